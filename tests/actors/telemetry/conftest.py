"""Fixtures: an OTLP/HTTP receiver and a fake model provider, both on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.models.fake_provider import FakeProvider

from .receiver import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as rx:
        yield rx


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider
