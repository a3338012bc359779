"""A tree with a `coder` harness agent on a local fake provider and a private store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import phloem
from phloem.config import Config, parse_config
from tests.models.fake_provider import FakeProvider


def harness_config(base_url: str, store: Path, extra: str = "") -> str:
    return f"""
[providers.fake]
protocol = "openai-chat"
model = "fake"
base_url = "{base_url}/v1"
chat_token_limit = "max_tokens"
max_retries = 0

[sessions]
dir = "{store}"

[agents.llm.coder]
harness = true
provider = "fake"
{extra}
"""


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    return root


@pytest.fixture
def config(fake: FakeProvider, tmp_path: Path) -> Config:
    return parse_config(harness_config(fake.base_url, tmp_path / "store"))


@pytest.fixture
def tree(config: Config) -> Iterator[phloem.Tree]:
    with phloem.Tree.start(config) as t:
        yield t
