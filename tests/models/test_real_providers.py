"""Opt-in checks against real providers. They run only when a key is set and are reported
as skipped otherwise — never as passed. A rate-limited answer fails the test.

    PHLOEM_GEMINI_API_KEY   [PHLOEM_GEMINI_MODEL] [PHLOEM_GEMINI_BASE_URL]
    PHLOEM_OPENAI_API_KEY + PHLOEM_OPENAI_BASE_URL + PHLOEM_OPENAI_MODEL
                            [PHLOEM_OPENAI_PROTOCOL=responses|chat_completions]
                            [PHLOEM_OPENAI_CHAT_TOKEN_LIMIT=max_tokens|max_completion_tokens]
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from phloem.models import oneshot
from phloem.models.gemini import GeminiModel
from phloem.models.openai import OpenAIModel
from phloem.protocols import gemini as gemini_wire
from phloem.protocols.content import Content, GenerateConfig, ModelRequest

pytestmark = pytest.mark.timeout(60)

GEMINI_KEY = os.environ.get("PHLOEM_GEMINI_API_KEY", "")
OPENAI_KEY = os.environ.get("PHLOEM_OPENAI_API_KEY", "")
OPENAI_URL = os.environ.get("PHLOEM_OPENAI_BASE_URL", "")
OPENAI_MODEL = os.environ.get("PHLOEM_OPENAI_MODEL", "")

needs_gemini = pytest.mark.skipif(not GEMINI_KEY, reason="PHLOEM_GEMINI_API_KEY not set")
needs_openai = pytest.mark.skipif(
    not (OPENAI_KEY and OPENAI_URL and OPENAI_MODEL),
    reason="PHLOEM_OPENAI_API_KEY, PHLOEM_OPENAI_BASE_URL and PHLOEM_OPENAI_MODEL not all set",
)


def gemini() -> GeminiModel:
    return GeminiModel(
        os.environ.get("PHLOEM_GEMINI_MODEL", gemini_wire.DEFAULT_MODEL),
        GEMINI_KEY,
        base_url=os.environ.get("PHLOEM_GEMINI_BASE_URL", gemini_wire.DEFAULT_BASE_URL),
        max_retries=1,
    )


def openai() -> OpenAIModel:
    protocol: Any = os.environ.get("PHLOEM_OPENAI_PROTOCOL", "responses")
    limit: Any = None
    if protocol == "chat_completions":
        limit = os.environ.get("PHLOEM_OPENAI_CHAT_TOKEN_LIMIT", "max_completion_tokens")
    return OpenAIModel(
        protocol, OPENAI_MODEL, OPENAI_URL, OPENAI_KEY, chat_token_limit=limit, max_retries=1
    )


def assert_ok(result: oneshot.OneShotResult) -> None:
    assert result.error is None, f"{result.error.kind}: {result.error.message}"


@needs_gemini
def test_real_gemini_probe_passes() -> None:
    assert_ok(oneshot.probe(gemini(), max_output_tokens=256))


@needs_gemini
def test_real_gemini_streams_an_answer() -> None:
    request = ModelRequest(
        contents=(Content.user("Reply with the single word: pong"),),
        config=GenerateConfig(max_output_tokens=256),
    )
    chunks = list(gemini().stream(request))
    assert not chunks[-1].partial
    assert "pong" in chunks[-1].text.lower()


@needs_openai
def test_real_openai_probe_passes() -> None:
    assert_ok(oneshot.probe(openai(), max_output_tokens=256))


@needs_openai
def test_real_openai_one_shot_answers() -> None:
    result = oneshot.run(
        openai(),
        "Answer in one word.",
        "What is the capital of France?",
        (),
        max_output_tokens=256,
        max_returned_text_bytes=4096,
        max_model_calls=1,
        max_tool_calls_per_response=1,
    )
    assert_ok(result)
    assert "paris" in result.text.lower()
