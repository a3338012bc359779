"""Interrupted session turns (`phloem.actors.sessions.resume`): how each is resumed from
what its transcript holds, and that a starting service resumes them under its admission
limit (`max_concurrent_runs`: exactly the limit at once, one over it waits its turn)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

import phloem
from phloem.actors.sessions import resume
from phloem.actors.sessions.durable import DurableSessionService
from phloem.actors.sessions.protocol import RunSession
from phloem.agents.events import Event
from phloem.config import parse_config
from phloem.protocols.content import Content, Part
from tests.actors.sessions.conftest import harness_config
from tests.helpers import wait_until
from tests.models.fake_provider import FakeProvider, chat_text

pytestmark = pytest.mark.timeout(120)


def test_what_a_transcript_holds_decides_how_the_turn_goes_on(tmp_path: Path) -> None:
    store = DurableSessionService(tmp_path, "phloem", sync=False)
    try:
        sid = store.create_session("phloem", "user").id
        resume.mark_started(store, RunSession(sid, "go"), 0)
        resume.live(store, sid, True)  # its driver runs in this process: not resumed
        assert resume.unfinished(store) == []
        resume.live(store, sid, False)
        [(found, marker)] = resume.unfinished(store)
        assert found == sid and marker["prompt"] == "go"
        assert resume.plan(store, sid, marker).plan == "rerun"  # the prompt never recorded
        session = store.get_session(sid)
        store.append_event(session, Event(author="user", content=Content.user("go")))
        assert resume.plan(store, sid, marker).plan == "continue"  # the model never answered
        call = Part.from_function_call("bash", {"command": "true"}, "c1")
        reply = Content(role="model", parts=(call,))
        store.append_event(session, Event(author="coder", content=reply))
        assert resume.plan(store, sid, marker).plan == "continue"
        assert resume.close_unanswered(store, sid, "coder") == 1
        assert resume.close_unanswered(store, sid, "coder") == 0  # closed once
        closed = store.get_session(sid).events[-1].content
        assert closed is not None and closed.role == "user"
        [answer] = closed.parts
        assert answer.function_response is not None
        assert answer.function_response.response["error"] == "interrupted"
        store.append_event(session, Event(author="coder", content=Content.model("done")))
        assert resume.plan(store, sid, marker).plan == "done"  # only the end marker missing
        resume.mark_ended(store, sid, "done")
        assert resume.unfinished(store) == []
    finally:
        store.close()


@pytest.mark.parametrize("limit", [2, 3])
def test_interrupted_turns_resume_under_the_admission_limit(
    fake: FakeProvider, workspace: Path, tmp_path: Path, limit: int
) -> None:
    text = harness_config(fake.base_url, tmp_path / "store")
    config = parse_config(
        text.replace("[sessions]\n", f"[sessions]\nmax_concurrent_runs = {limit}\n")
    )
    with phloem.Tree.start(config) as tree, tree.client() as client:
        sids = [client.session_new(workdir=str(workspace)) for _ in range(3)]
    store = DurableSessionService(config.sessions.store_dir(), "phloem", sync=False)
    try:  # three turns cut short after their prompts: the model never answered them
        for sid in sids:
            resume.mark_started(store, RunSession(sid, f"prompt {sid}"), 0)
            session = store.get_session(sid)
            store.append_event(session, Event(author="user", content=Content.user(f"prompt {sid}")))
    finally:
        store.close()
    gates = [threading.Event() for _ in range(3)]
    fake.add(*(dataclasses.replace(chat_text(f"answer {i}"), gate=g) for i, g in enumerate(gates)))
    try:
        with phloem.Tree.start(config) as tree, tree.client() as client:
            wait_until(lambda: len(fake.requests) == limit, 60, "the first turns resumed")
            busy = [s.busy for s in client.session_list()]
            assert busy.count(True) == limit  # exactly the limit at once
            assert busy.count(False) == 3 - limit  # one over it waits
            for gate in gates:
                gate.set()

            def all_ended() -> bool:
                details = [client.session_show(sid) for sid in sids]
                return all(
                    not d.summary.busy and d.events[-1].text.startswith("answer") for d in details
                )

            wait_until(all_ended, 60, "every interrupted turn ended")
        assert len(fake.requests) == 3
    finally:
        for gate in gates:
            gate.set()
