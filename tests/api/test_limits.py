"""The named limits of `phloem api` at their edges: the request body (`[api]
max_body_bytes`), a turn's time (`[api] turn_timeout_s`), the one-line error detail, the
WebSocket close reason, the events a session read back carries (the sessions service's
own bound); and `--dev-ui` refused without ADK's bundle."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from phloem.actors.sessions.service import MAX_SHOW_EVENTS
from phloem.web.api.errors import MAX_DETAIL_CHARS, one_line
from phloem.web.api.live import MAX_REASON_BYTES, _reason
from phloem.web.api.shared import MAX_SESSION_EVENTS
from tests.api.apiproc import APP, ApiProc, api_config, running_api
from tests.helpers import running_daemon
from tests.models.fake_provider import FakeProvider, Reply

BODY_LIMIT = 1024  # the smallest `[api] max_body_bytes`
TURN_TIMEOUT_S = 2.0


def test_session_read_back_bound_is_the_sessions_services() -> None:
    assert MAX_SESSION_EVENTS == MAX_SHOW_EVENTS


def test_detail_and_close_reason_edges() -> None:
    assert one_line("x" * MAX_DETAIL_CHARS) == "x" * MAX_DETAIL_CHARS
    cut = one_line("x" * (MAX_DETAIL_CHARS + 1))
    assert len(cut) == MAX_DETAIL_CHARS and cut.endswith("…")
    assert one_line("two\nlines") == "two lines"
    assert _reason("r" * MAX_REASON_BYTES) == "r" * MAX_REASON_BYTES
    assert _reason("r" * (MAX_REASON_BYTES + 1)) == "r" * MAX_REASON_BYTES


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def api(tmp_path: Path, fake: FakeProvider) -> Iterator[ApiProc]:
    ws = tmp_path / "ws"
    ws.mkdir()
    config = api_config(fake.base_url, tmp_path / "store", ws)
    with running_daemon(config) as daemon:
        path = tmp_path / "api.toml"
        limits = f"max_body_bytes = {BODY_LIMIT}\nturn_timeout_s = {TURN_TIMEOUT_S}\n"
        path.write_text(config + "\n[api]\n" + limits)
        args = ("--config", str(path), "--socket", str(daemon.socket))
        with running_api(daemon.socket, *args, "--listen", "127.0.0.1:0") as proc:
            yield proc


def _sized(size: int) -> bytes:
    body = json.dumps({"appName": APP, "userId": "user", "sessionId": "nope"}).encode()
    return body[:-1] + b" " * (size - len(body)) + b"}"


def test_request_body_at_the_limit_is_read_one_byte_more_is_413(api: ApiProc) -> None:
    at = httpx.post(api.url + "/run", content=_sized(BODY_LIMIT), timeout=30)
    assert len(_sized(BODY_LIMIT)) == BODY_LIMIT
    assert at.status_code == 400 and "newMessage" in at.json()["detail"]  # read, then checked
    over = httpx.post(api.url + "/run", content=_sized(BODY_LIMIT + 1), timeout=30)
    assert over.status_code == 413 and over.json()["kind"] == "limit_exceeded"


def test_a_turn_past_turn_timeout_is_cancelled_and_answered_504(
    api: ApiProc, fake: FakeProvider
) -> None:
    sid = httpx.post(f"{api.url}/apps/{APP}/users/user/sessions", json={}, timeout=30).json()["id"]
    fake.add(Reply(delay=60.0, body=b"{}"))
    message = {"role": "user", "parts": [{"text": "hang"}]}
    turn = {"appName": APP, "userId": "user", "sessionId": sid, "newMessage": message}
    late = httpx.post(api.url + "/run", json=turn, timeout=60)
    assert late.status_code == 504 and late.json()["kind"] == "timeout"
    assert "cancelled" in late.json()["detail"]


def test_dev_ui_without_its_bundle_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from phloem.protocols.errors import PhloemError
    from phloem.web.api import devui

    assert (devui.find_bundle() / "index.html").is_file()  # the installed google-adk's
    monkeypatch.setattr(devui, "BUNDLE_PARTS", ("cli", "no-such-bundle"))
    with pytest.raises(PhloemError) as err:
        devui.find_bundle()
    assert err.value.kind == "config_invalid" and "pip install google-adk" in err.value.message
