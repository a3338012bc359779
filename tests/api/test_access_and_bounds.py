"""`phloem api`'s safety: the web view's access rule (a foreign Host refused on loopback,
a token on every request for any other address, no start without one), the same-origin
rule, and the turn bounds at their edges (`[api] max_runs`, `[api] max_run_events`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.apiproc import APP, ApiProc, api_config, running_api, streamed_call, streamed_text
from tests.helpers import DaemonProc, run_cli, running_daemon, wait_until
from tests.models.fake_provider import FakeProvider, Reply

pytestmark = pytest.mark.timeout(120)
TOKEN = "api-t0ken-" + "x" * 20
MAX_RUNS = 1
MAX_RUN_EVENTS = 1  # a text turn has exactly one event (its answer); a tool turn three


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def setup(fake: FakeProvider, tmp_path: Path) -> Iterator[tuple[DaemonProc, Path]]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("the answer is 42\n")
    config = api_config(fake.base_url, tmp_path / "store", ws)
    with running_daemon(config) as daemon:
        path = tmp_path / "api.toml"
        path.write_text(
            config + f"\n[api]\nmax_runs = {MAX_RUNS}\nmax_run_events = {MAX_RUN_EVENTS}\n"
        )
        yield daemon, path


@pytest.fixture
def api(setup: tuple[DaemonProc, Path]) -> Iterator[ApiProc]:
    daemon, path = setup
    args = ("--config", str(path), "--socket", str(daemon.socket), "--listen", "127.0.0.1:0")
    with running_api(daemon.socket, *args) as proc:
        yield proc


def _session(api: ApiProc) -> str:
    made = httpx.post(f"{api.url}/apps/{APP}/users/user/sessions", json={}, timeout=30)
    assert made.status_code == 200, made.text
    sid: str = made.json()["id"]
    return sid


def _turn(sid: str, text: str) -> dict[str, object]:
    message = {"role": "user", "parts": [{"text": text}]}
    return {"appName": APP, "userId": "user", "sessionId": sid, "newMessage": message}


def test_a_loopback_api_refuses_a_foreign_host_and_origin(api: ApiProc) -> None:
    rebound = httpx.get(api.url + "/list-apps", headers={"Host": "evil.example"}, timeout=30)
    assert rebound.status_code == 403 and rebound.json()["kind"] == "permission_denied"
    for origin in ("http://evil.example", f"http://localhost:{api.port + 1}"):
        other = httpx.get(api.url + "/list-apps", headers={"Origin": origin}, timeout=30)
        assert other.status_code == 403, origin
    same = httpx.get(api.url + "/list-apps", headers={"Origin": api.url}, timeout=30)
    assert same.status_code == 200 and same.json() == [APP]


def test_another_address_needs_the_token_on_every_request(
    setup: tuple[DaemonProc, Path],
) -> None:
    daemon, _ = setup
    refused = run_cli("api", "--socket", str(daemon.socket), "--listen", "0.0.0.0:0")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "api listen '0.0.0.0' is not loopback" in refused.stderr
    assert "PHLOEM_API_TOKEN" in refused.stderr
    env = {"PHLOEM_API_TOKEN": TOKEN}
    with running_api(daemon.socket, "--listen", "0.0.0.0:0", env=env) as proc:
        url = f"http://127.0.0.1:{proc.port}"  # loopback peers need it too
        for path in ("/health", "/list-apps", f"/apps/{APP}/users/user/sessions"):
            bare = httpx.get(url + path, timeout=30)
            assert bare.status_code == 401 and bare.json()["kind"] == "permission_denied"
            wrong = httpx.get(url + path, headers={"Authorization": f"Bearer {TOKEN}x"}, timeout=30)
            assert wrong.status_code == 401
        good = httpx.get(
            url + "/list-apps", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )
        assert good.status_code == 200 and good.json() == [APP]


def test_turns_at_max_runs_are_served_one_more_is_503(api: ApiProc, fake: FakeProvider) -> None:
    sid, other = _session(api), _session(api)
    gate = threading.Event()
    held = streamed_text("held.")
    fake.add(Reply(body=held.body, headers=held.headers, gate=gate, gate_after=1))
    first: list[httpx.Response] = []
    runner = threading.Thread(
        target=lambda: first.append(httpx.post(api.url + "/run", json=_turn(sid, "a"), timeout=60))
    )
    runner.start()
    try:
        wait_until(lambda: len(fake.requests) == 1, timeout=30, what="the held model call")
        refused = httpx.post(api.url + "/run", json=_turn(other, "b"), timeout=30)
        assert refused.status_code == 503 and refused.json()["kind"] == "backpressure"
    finally:
        gate.set()
        runner.join(60)
    assert first[0].status_code == 200, first[0].text
    fake.add(streamed_text("free again."))
    assert httpx.post(api.url + "/run", json=_turn(other, "c"), timeout=60).status_code == 200
    counted = httpx.get(api.url + "/phloem/stats", timeout=30).json()
    assert counted == {
        "runs": 2,
        "runs_refused": 1,
        "clients_dropped": 0,
        "live_interruptions": 0,
        "live_stale_audio_dropped": 0,
        "runs_active": 0,
    }


def test_run_collects_max_run_events_one_more_cancels_the_turn(
    api: ApiProc, fake: FakeProvider
) -> None:
    sid = _session(api)
    fake.add(streamed_text("It is ", "42."))
    at = httpx.post(api.url + "/run", json=_turn(sid, "plain"), timeout=60)
    assert at.status_code == 200 and len(at.json()) == MAX_RUN_EVENTS
    fake.add(streamed_call("read", {"path": "notes.txt"}), streamed_text("It is 42."))
    over = httpx.post(api.url + "/run", json=_turn(sid, "with a tool"), timeout=60)
    assert over.status_code == 413 and over.json()["kind"] == "limit_exceeded"
    assert "max_run_events" in over.json()["detail"]
    listed = httpx.get(f"{api.url}/apps/{APP}/users/user/sessions", timeout=30).json()
    assert [s["id"] for s in listed] == [sid]  # the session is there and can take a turn
    fake.add(streamed_text("again."))
    wait_until(
        lambda: (
            httpx.post(api.url + "/run", json=_turn(sid, "again"), timeout=60).status_code == 200
        ),
        timeout=30,
        what="the cancelled turn to end",
    )


@pytest.mark.parametrize("route", ["/run", "/run_sse"])
def test_a_client_that_goes_away_cancels_its_turn(
    api: ApiProc, fake: FakeProvider, setup: tuple[DaemonProc, Path], route: str
) -> None:
    import phloem

    sid = _session(api)
    fake.add(Reply(delay=60.0, body=b"{}"))
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(api.url + route, json=_turn(sid, "hang"), timeout=httpx.Timeout(30, read=3))
    with phloem.Client.connect(setup[0].socket) as client:
        wait_until(lambda: not client.session_list()[0].busy, timeout=30, what="the turn cancelled")
