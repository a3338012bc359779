"""docs/http-apis.md documents every `[api]` key of the example config, every route phloem
answers 501 (by the feature its body names), and keeps the MCP section h34b fills in."""

from __future__ import annotations

import tomllib

from tests.helpers import ROOT, doc_section

GUIDE = "docs/http-apis.md"


def test_the_guide_documents_every_api_key() -> None:
    guide = doc_section(GUIDE, "ADK's API server")
    data = tomllib.loads((ROOT / "conf" / "phloem.toml").read_text())
    for key in data["api"]:
        assert f"`api.{key}`" in guide, f"api.{key} is not documented in {GUIDE}"


def test_the_guide_names_everything_answered_501() -> None:
    from phloem.web.api.app import UNSUPPORTED_ROUTES

    features = {feature for _, _, feature in UNSUPPORTED_ROUTES}
    guide = doc_section(GUIDE, "What is not supported")
    for feature in features:
        assert f"`{feature}`" in guide, f"{feature!r} (a 501) is not named in {GUIDE}"


def test_the_mcp_section_is_there() -> None:
    assert "mcp.md" in doc_section(GUIDE, "MCP over streamable HTTP")


def test_the_voice_socket_section_states_its_limits() -> None:
    from phloem.web.api.live import MAX_VOICE_FRAME_BYTES
    from phloem.web.api.liveflow import MAX_CREDIT, MAX_QUEUED_BYTES, MAX_QUEUED_MESSAGES

    guide = doc_section(GUIDE, "`/run_live` as a browser voice socket")
    assert f"1 to {MAX_CREDIT:,}" in guide and f"2 to {MAX_VOICE_FRAME_BYTES:,} bytes" in guide
    assert f"{MAX_QUEUED_MESSAGES} messages or {MAX_QUEUED_BYTES // 2**20} MiB" in guide
