"""One opt-in session against the real Gemini Live service: skipped (and reported as
skipped) unless `PHLOEM_GEMINI_API_KEY` is set. The only test that uses the network."""

from __future__ import annotations

import os

import msgspec
import pytest

import phloem
from phloem.actors.live.settings import LiveConfig
from phloem.config import Config
from tests.actors.live.conftest import collect_until, next_kind

KEY_ENV = "PHLOEM_GEMINI_API_KEY"


@pytest.mark.skipif(not os.environ.get(KEY_ENV), reason=f"{KEY_ENV} is not set")
def test_a_real_live_session_answers_one_turn() -> None:
    key = os.environ[KEY_ENV]
    config = msgspec.structs.replace(Config(), live=LiveConfig(api_key_env=KEY_ENV))
    with phloem.Tree.start(config) as tree, tree.client() as client:
        ref = client.live_open(
            {"response_modalities": ["AUDIO"], "output_audio_transcription": True}
        )
        events = client.live_events(ref)
        next_kind(events, "ready", timeout=30)
        client.live_send(ref, text="Say the word 'hello'.")
        seen = collect_until(events, "turn_complete", timeout=60)
        assert any(e.kind in ("audio", "output_transcription", "text") for e in seen)
        status = client.live_status(ref)
        client.live_close(ref)
        assert key not in repr(seen) + repr(status)
