"""The durable store: torn tails, corrupt lines, idempotent appends, permissions,
identifiers, one run per session, and create/delete surviving kill -9 at any point."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import stat
import threading
import time
from pathlib import Path

import pytest

from phloem.actors.sessions.durable import DurableSessionService
from phloem.actors.sessions.ids import MAX_ID_BYTES, decode_id, encode_id
from phloem.agents.events import Event, EventActions
from phloem.protocols.content import Content
from phloem.protocols.depth import MAX_NESTING_DEPTH
from phloem.protocols.errors import PhloemError
from tests.helpers import raises_kind


def event(text: str, **delta: object) -> Event:
    return Event(author="user", content=Content.user(text), actions=EventActions(state_delta=delta))


def filled(root: Path, n: int = 3) -> tuple[str, Path]:
    store = DurableSessionService(root)
    session = store.create_session("phloem", "u")
    for i in range(n):
        store.append_event(session, event(f"turn {i}", step=i))
    path = store.transcript_path(session.id)
    store.close()
    return session.id, path


def test_events_and_state_survive_a_reopen(tmp_path: Path) -> None:
    store = DurableSessionService(tmp_path)
    s = store.create_session("phloem", "ann", {"a": 1, "app:x": 2, "user:y": 3, "temp:t": 4})
    store.append_event(s, event("hi", b=2, **{"app:x": 5, "temp:z": 1}))
    assert s.state["temp:z"] == 1
    store.close()
    again = DurableSessionService(tmp_path)
    s2 = again.get_session(s.id)
    assert s2.state == {"a": 1, "b": 2, "app:x": 5, "user:y": 3}  # temp: never persisted
    assert [e.text for e in s2.events] == ["hi"]
    other = again.create_session("phloem", "ann")
    assert other.state == {"app:x": 5, "user:y": 3}  # app and user scopes are shared
    again.close()


def test_torn_tail_is_repaired_at_every_byte_offset_of_the_last_line(tmp_path: Path) -> None:
    sid, path = filled(tmp_path / "src")
    data = path.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    for cut in range(last_start + 1, len(data)):  # every torn length of the last line
        root = tmp_path / f"c{cut}"
        copy = root / path.relative_to(tmp_path / "src")
        copy.parent.mkdir(parents=True)
        (tmp_path / "src").joinpath(".lock")  # the lock file is recreated
        copy.write_bytes(data[:cut])
        store = DurableSessionService(root)
        session = store.get_session(sid)
        assert [e.text for e in session.events] == ["turn 0", "turn 1"]
        warnings = store.take_warnings(sid)
        assert [w.code for w in warnings] == ["session_tail_repaired"]
        assert warnings[0].path == str(copy) and warnings[0].line == 4
        assert copy.read_bytes() == data[:last_start]
        store.append_event(session, event("after repair"))  # appends go on cleanly
        store.close()
        assert len(DurableSessionService(root).get_session(sid).events) == 3


def test_a_corrupt_middle_line_is_refused_and_left_untouched(tmp_path: Path) -> None:
    sid, path = filled(tmp_path)
    lines = path.read_bytes().split(b"\n")
    lines[2] = b'{"type":"event","order":2,"event":{oops'
    broken = b"\n".join(lines)[:-5]  # and a torn tail, which must not be repaired either
    path.write_bytes(broken)
    store = DurableSessionService(tmp_path)
    with pytest.raises(Exception) as info:
        store.get_session(sid)
    assert getattr(info.value, "kind", "") == "session_corrupt"
    assert f"{path}:3" in str(info.value)
    assert info.value.details == {"path": str(path), "line": 3}  # type: ignore[attr-defined]
    assert path.read_bytes() == broken
    store.close()


def test_the_same_event_twice_is_idempotent_and_a_changed_one_conflicts(tmp_path: Path) -> None:
    store = DurableSessionService(tmp_path)
    s = store.create_session("phloem", "u")
    e = event("once")
    store.append_event(s, e)
    store.append_event(s, e)
    assert len(s.events) == 1
    changed = Event(author="user", content=Content.user("other"), id=e.id)
    assert raises_kind(store.append_event, s, changed) == "session_conflict"
    store.close()
    assert len(DurableSessionService(tmp_path).get_session(s.id).events) == 1


def test_permissions_are_private(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        store = DurableSessionService(tmp_path / "store")
        s = store.create_session("phloem", "u", {"user:k": 1, "app:k": 1})
        store.append_event(s, event("x"))
        store.close()
    finally:
        os.umask(old)
    for path in (tmp_path / "store").rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [("s-1", "s-1"), ("a b/c", "a%20b%2Fc"), ("..", "%2E."), (".x", "%2Ex"), ("é", "%C3%A9")],
)
def test_identifiers_are_percent_encoded(raw: str, encoded: str) -> None:
    assert encode_id(raw) == encoded
    assert decode_id(encoded) == raw


def test_identifier_limits(tmp_path: Path) -> None:
    assert raises_kind(encode_id, "") == "invalid_argument"
    assert len(encode_id("a" * MAX_ID_BYTES)) == MAX_ID_BYTES
    assert raises_kind(encode_id, "a" * (MAX_ID_BYTES + 1)) == "invalid_argument"
    assert raises_kind(encode_id, "/" * 67) == "invalid_argument"  # 201 bytes encoded
    store = DurableSessionService(tmp_path)
    s = store.create_session("phloem", "u", session_id="../../etc/x")
    assert store.transcript_path(s.id).parent == store.sessions_dir
    assert [i.id for i in store.infos()] == ["../../etc/x"]
    store.close()


def test_one_run_per_session_and_sessions_in_parallel(tmp_path: Path) -> None:
    store = DurableSessionService(tmp_path)
    a = store.create_session("phloem", "u")
    b = store.create_session("phloem", "u")
    with store.run_lease(a.id):
        assert raises_kind(store.acquire_run, a.id) == "session_busy"
        assert raises_kind(store.delete_session, a.id) == "session_busy"
        with store.run_lease(b.id):
            pass
    with store.run_lease(a.id):
        pass
    errors: list[BaseException] = []

    def writer(s_id: str) -> None:
        try:
            for i in range(50):
                store.append_event(store.get_session(s_id), event(f"{s_id} {i}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(x.id,)) for x in (a, b) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    store.close()
    again = DurableSessionService(tmp_path)
    assert len(again.get_session(a.id).events) == 100
    assert len(again.get_session(b.id).events) == 100
    again.close()


def test_a_second_process_is_refused_the_store(tmp_path: Path) -> None:
    store = DurableSessionService(tmp_path)
    assert raises_kind(DurableSessionService, tmp_path) == "session_store_locked"
    store.close()
    DurableSessionService(tmp_path).close()


def _churn(root: str, seed: int, acks: multiprocessing.SimpleQueue) -> None:  # type: ignore[type-arg]
    rng = random.Random(seed)
    store = DurableSessionService(root)
    live = [i.id for i in store.infos()]
    n = 0
    while True:
        n += 1
        if live and rng.random() < 0.4:
            victim = live.pop(rng.randrange(len(live)))
            acks.put(("deleting", victim))
            store.delete_session(victim)
            acks.put(("deleted", victim))
        else:
            sid = f"s{seed}-{n}"
            session = store.create_session("phloem", "u", session_id=sid)
            acks.put(("created", sid))
            store.append_event(session, event("x", n=n))
            live.append(sid)


def test_create_and_delete_survive_kill_9_at_random_points(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    rng = random.Random(1234)
    created: set[str] = set()
    deleted: set[str] = set()
    deleting: set[str] = set()
    for iteration in range(200):
        acks = ctx.SimpleQueue()
        child = ctx.Process(target=_churn, args=(str(tmp_path), iteration, acks))
        child.start()
        time.sleep(rng.uniform(0.0, 0.03))
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join(10)
        while not acks.empty():
            what, sid = acks.get()
            {"created": created, "deleted": deleted, "deleting": deleting}[what].add(sid)
        store = DurableSessionService(tmp_path)  # recovery runs here
        present = {i.id for i in store.infos()}
        assert not list(store.pending_dir.iterdir())
        assert not list(store.sessions_dir.glob(".*"))
        for sid in present:
            store.get_session(sid)  # every transcript loads
        # acknowledged creates are there (unless a delete of them had begun)
        assert present >= created - deleting, iteration
        assert not present & deleted, iteration  # acknowledged deletes are gone
        store.close()


def _nested_line(depth: int) -> bytes:
    """A complete sidecar record whose data nests so that the whole line is `depth` deep."""
    inner = depth - 1  # the record's own object is one level
    return b'{"type":"sidecar","kind":"k","data":' + b"[" * inner + b"]" * inner + b"}"


@pytest.mark.parametrize("depth", [MAX_NESTING_DEPTH + 1, 100_000])
def test_a_deeply_nested_complete_line_is_corrupt_not_a_recursion_error(
    tmp_path: Path, depth: int
) -> None:
    sid, path = filled(tmp_path)
    original = path.read_bytes()
    path.write_bytes(original + _nested_line(depth) + b"\n")
    store = DurableSessionService(tmp_path)
    with pytest.raises(PhloemError) as info:
        store.get_session(sid)
    assert info.value.kind == "session_corrupt"
    assert info.value.details == {"path": str(path), "line": 5}
    assert f"more than {MAX_NESTING_DEPTH} levels" in info.value.message
    store.close()


def test_a_line_exactly_at_the_nesting_limit_loads(tmp_path: Path) -> None:
    sid, path = filled(tmp_path)
    path.write_bytes(path.read_bytes() + _nested_line(MAX_NESTING_DEPTH) + b"\n")
    store = DurableSessionService(tmp_path)
    assert len(store.get_session(sid).events) == 3
    store.close()


def test_a_deeply_nested_header_is_corrupt_and_left_out_of_the_listing(tmp_path: Path) -> None:
    sid, path = filled(tmp_path)
    lines = path.read_bytes().split(b"\n", 1)
    path.write_bytes(b'{"type":"header","meta":' + b"[" * 50_000 + b"\n" + lines[1])
    store = DurableSessionService(tmp_path)
    assert store.infos() == []
    assert raises_kind(store.get_session, sid) == "session_corrupt"
    store.close()


def test_count_events_reads_an_order_of_at_most_max_order_digits(tmp_path: Path) -> None:
    from phloem.actors.sessions.transcript import MAX_ORDER_DIGITS, count_events

    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"type":"header"}\n{"type":"event","order":' + b"9" * 19 + b',"e":1}\n')
    assert MAX_ORDER_DIGITS == 19 and count_events(path) == 10**19 - 1
    for digits in (20, 5_000):  # one over; and no ValueError from int() on 5,000 digits
        line = b'{"type":"event","order":' + b"9" * digits + b',"e":1}\n'
        path.write_bytes(b'{"type":"header"}\n' + line)
        assert count_events(path) is None


def test_a_partial_event_is_never_written_to_the_transcript(tmp_path: Path) -> None:
    """plasmid §3: the transcript is the commit record of complete non-partial events."""
    store = DurableSessionService(tmp_path)
    session = store.create_session("phloem", "u")
    store.append_event(session, event("whole"))
    piece = Event(author="coder", content=Content.model("pie"), partial=True)
    assert store.append_event(session, piece) is piece
    path = store.transcript_path(session.id)
    store.close()
    assert len(path.read_text().splitlines()) == 2  # the header and the whole event
    again = DurableSessionService(tmp_path)
    assert [e.text for e in again.get_session(session.id).events] == ["whole"]
    again.close()
