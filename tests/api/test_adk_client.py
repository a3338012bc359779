"""`phloem api` driven by ADK's own client code (google-adk's `AdkWebServerClient`, its
`RunAgentRequest`, `Session` and `Event` models): a session is created, a turn whose
scripted model calls a tool is run through `/run` and `/run_sse`, the session is read
back and deleted; every event validates against ADK's `Event`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.apiproc import APP, ApiProc, api_config, running_api, streamed_call, streamed_text
from tests.helpers import DaemonProc, running_daemon
from tests.models.fake_provider import FakeProvider

from google.adk.cli.adk_web_server import RunAgentRequest  # isort: skip
from google.adk.cli.conformance.adk_web_server_client import AdkWebServerClient  # isort: skip
from google.adk.events.event import Event  # isort: skip
from google.adk.sessions.session import Session  # isort: skip
from google.genai import types  # isort: skip

pytestmark = pytest.mark.timeout(120)
USER = "user"  # the daemon's [sessions] user (the default)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("the answer is 42\n")
    return root


@pytest.fixture
def daemon(fake: FakeProvider, tmp_path: Path, workdir: Path) -> Iterator[DaemonProc]:
    with running_daemon(api_config(fake.base_url, tmp_path / "store", workdir)) as d:
        yield d


@pytest.fixture
def api(daemon: DaemonProc) -> Iterator[ApiProc]:
    with running_api(daemon.socket, "--listen", "127.0.0.1:0") as proc:
        yield proc


def _request(session: Session, text: str, *, streaming: bool = False) -> RunAgentRequest:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return RunAgentRequest(
        app_name=APP, user_id=USER, session_id=session.id, new_message=message, streaming=streaming
    )


def _tool_turn(events: list[Event]) -> None:
    """A turn that called `read` on notes.txt and answered from it."""
    calls = [c for e in events for c in e.get_function_calls()]
    responses = [r for e in events for r in e.get_function_responses()]
    assert [(c.name, c.args, c.id) for c in calls] == [("read", {"path": "notes.txt"}, "c1")]
    assert [r.name for r in responses] == ["read"] and responses[0].id == "c1"
    assert "the answer is 42" in json.dumps(responses[0].response)
    final = [e for e in events if not e.partial and e.content and e.content.parts[0].text]
    assert final[-1].author == APP and final[-1].content is not None
    assert final[-1].content.parts[0].text == "It is 42."


def test_adk_client_runs_a_tool_turn_through_run_and_run_sse(
    api: ApiProc, fake: FakeProvider
) -> None:
    asyncio.run(_drive(api, fake))


async def _drive(api: ApiProc, fake: FakeProvider) -> None:
    async with AdkWebServerClient(api.url, timeout=60) as client:
        assert (await client.get_version_data())["language"] == "python"
        session = await client.create_session(app_name=APP, user_id=USER)
        assert session.app_name == APP and session.user_id == USER and session.events == []

        # /run: the turn's events as one JSON list, no partial ones.
        fake.add(streamed_call("read", {"path": "notes.txt"}), streamed_text("It is ", "42."))
        async with httpx.AsyncClient(base_url=api.url, timeout=60) as http:
            reply = await http.post(
                "/run", json=_request(session, "what do the notes say?").model_dump(by_alias=True)
            )
        assert reply.status_code == 200, reply.text
        ran = [Event.model_validate(e) for e in reply.json()]
        assert not any(e.partial for e in ran)
        _tool_turn(ran)
        assert "invocationId" in reply.json()[0] and "functionCall" in json.dumps(reply.json())

        # /run_sse with streaming: the same turn as it happens, partial text included.
        fake.add(streamed_call("read", {"path": "notes.txt"}), streamed_text("It is ", "42."))
        request = _request(session, "and again?", streaming=True)
        streamed = [e async for e in client.run_agent(request)]
        _tool_turn(streamed)
        assert [e.content.parts[0].text for e in streamed if e.partial and e.content] == [
            "It is ",
            "42.",
        ]

        # The session read back: both turns stored (user prompts included), no partials.
        back = await client.get_session(app_name=APP, user_id=USER, session_id=session.id)
        texts = [
            e.content.parts[0].text for e in back.events if e.content and e.content.parts[0].text
        ]
        assert texts == ["what do the notes say?", "It is 42.", "and again?", "It is 42."]
        assert not any(e.partial for e in back.events)
        async with httpx.AsyncClient(base_url=api.url, timeout=60) as http:
            listed = (await http.get(f"/apps/{APP}/users/{USER}/sessions")).json()
            assert [Session.model_validate(s).id for s in listed] == [session.id]
            assert (await http.get("/list-apps")).json() == [APP]
            assert (await http.get("/health")).json() == {"status": "ok"}

        await client.delete_session(app_name=APP, user_id=USER, session_id=session.id)
        with pytest.raises(httpx.HTTPStatusError) as gone:
            await client.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert gone.value.response.status_code == 404
        assert gone.value.response.json()["kind"] == "unknown_session"
    assert fake.unused == 0


def _get(api: ApiProc, path: str, **kw: Any) -> httpx.Response:
    return httpx.get(api.url + path, timeout=30, **kw)


def test_what_phloem_does_not_serve_is_a_501_naming_it(api: ApiProc) -> None:
    session = f"/apps/{APP}/users/{USER}/sessions/s1"
    for method, path, feature in [
        ("GET", session + "/artifacts", "artifacts"),
        ("GET", session + "/artifacts/report.txt/versions/1", "artifacts"),
        ("PATCH", f"/apps/{APP}/users/{USER}/memory", "memory"),
        ("GET", f"/dev/apps/{APP}/build_graph", "build graphs"),
        ("GET", f"/dev/apps/{APP}/eval_sets", "eval sets"),
        ("GET", f"/dev/apps/{APP}/eval-sets/s/run", "eval sets"),
        ("GET", f"/dev/apps/{APP}/eval_results", "eval results"),
        ("GET", f"/apps/{APP}/eval_results/r1", "eval results"),
        ("GET", f"/dev/apps/{APP}/builder?ts=1", "the agent builder"),
        ("GET", f"/dev/apps/{APP}/users/{USER}/sessions/s1/events/e1/graph", "event graphs"),
        ("GET", "/config/telemetry", "telemetry settings"),
        ("GET", f"/apps/{APP}/app-info", "app info"),
        ("GET", "/list-apps?detailed=true", "detailed app listings"),
        ("GET", f"/dev/apps/{APP}/debug/trace/session/s1", "traces"),
        ("PATCH", session, "session state updates"),
    ]:
        reply = httpx.request(method, api.url + path, timeout=30, json={})
        assert reply.status_code == 501, (method, path, reply.text)
        body = reply.json()
        assert body["kind"] == "unsupported" and body["unsupported"] == feature
        assert feature in body["detail"] and "\n" not in body["detail"]


def _padded_run(size: int) -> bytes:
    message = {"role": "user", "parts": [{"text": "hi"}]}
    body = json.dumps(
        {"appName": APP, "userId": USER, "sessionId": "nope", "newMessage": message}
    ).encode()
    return body[:-1] + b" " * (size - len(body)) + b"}"


def test_bad_input_is_one_line_and_a_typed_status(api: ApiProc) -> None:
    base = f"/apps/{APP}/users/{USER}/sessions"
    cases = [
        ("POST", "/run", b"{not json", 400, "invalid_argument"),
        ("POST", "/run", b"[1]", 400, "invalid_argument"),
        ("POST", "/run", json.dumps({"appName": APP}).encode(), 400, "invalid_argument"),
        (
            "POST",
            "/run_sse",
            json.dumps(
                {
                    "appName": APP,
                    "userId": USER,
                    "sessionId": "nope",
                    "newMessage": {"role": "user", "parts": [{"text": "hi"}]},
                }
            ).encode(),
            404,
            "unknown_session",
        ),
        ("POST", "/apps/nosuch/users/user/sessions", b"{}", 404, "unknown_agent"),
        ("POST", base, b"[" * 500 + b"]" * 500, 400, "invalid_argument"),
        ("GET", "/nowhere", b"", 404, "unsupported"),
        # Under the default 1 MiB body limit but many TCP segments: read whole, then checked.
        ("POST", "/run", _padded_run(900 * 1024), 404, "unknown_session"),
    ]
    for method, path, body, status, kind in cases:
        reply = httpx.request(method, api.url + path, content=body, timeout=30)
        assert reply.status_code == status, (path, reply.text)
        assert reply.json()["kind"] == kind and "Traceback" not in reply.text
        assert "\n" not in reply.json()["detail"]
