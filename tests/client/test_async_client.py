"""`phloem.AsyncClient`: native asyncio, one pipelined connection, against a real daemon."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from phloem.client import aio, protocol
from phloem.client.agents import AgentClientMethods
from phloem.client.aio import AsyncClient, AsyncEventStream
from phloem.client.planning import PlanningMethods
from phloem.client.runs import RunsClientMethods
from phloem.client.sync import Client
from phloem.config import DEFAULT_MAX_INFLIGHT
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorValue, PhloemError
from phloem.protocols.runs import RunBegan, RunFinished, RunNoted
from phloem.protocols.wire import (
    Fail,
    FrameReader,
    Welcome,
    decode_client,
    encode_frame,
)
from tests.helpers import FIXTURE_CONFIG, ROOT, DaemonProc, running_daemon

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")

PLANNING_CONFIG = """
[planning.planners]
scripted = "tests.actors.planning.adapters:ScriptedPlanner"
[planning.executors]
scripted = "tests.actors.planning.adapters:ScriptedExecutor"
"""


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(45):  # a hang fails the test instead of the whole run
            return await coro

    return asyncio.run(bounded())


async def kind_of(coro: Awaitable[Any]) -> str:
    with pytest.raises(PhloemError) as info:
        await coro
    return info.value.kind


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    """Fixture services, planning and the supplier-risk agents in one daemon."""
    with running_daemon(
        FIXTURE_CONFIG
        + PLANNING_CONFIG
        + (ROOT / "conf" / "examples" / "supplier_risk.toml").read_text()
    ) as daemon:
        yield daemon


def own_daemon(tmp: Path, config: str = "") -> DaemonProc:
    (tmp / "c.toml").write_text(config)
    return DaemonProc(tmp / "d.sock", tmp / "c.toml").wait_ready()


# --- pipelining and the in-flight limit ----------------------------------------------------


def test_200_concurrent_asks_on_one_connection_each_get_their_own_reply(
    daemon: DaemonProc,
) -> None:
    async def main() -> tuple[list[Any], int]:
        async with await AsyncClient.connect(daemon.socket) as client:
            replies = await asyncio.gather(
                *(client.ask("echo", {"i": i, "pad": "x" * (i % 37)}) for i in range(200))
            )
            return replies, client.inflight

    replies, inflight = run(main())
    assert replies == [{"i": i, "pad": "x" * (i % 37)} for i in range(200)]
    assert inflight == 0


def test_requests_are_pipelined_not_serialised(daemon: DaemonProc) -> None:
    async def main() -> float:
        async with await AsyncClient.connect(daemon.socket) as client:
            t0 = time.monotonic()
            slept = await asyncio.gather(*(client.ask("echo", {"sleep": 0.5}) for _ in range(40)))
            assert slept == [{"slept": 0.5}] * 40
            return time.monotonic() - t0

    assert run(main()) < 5.0  # serialised, the 40 sleeps would take 20 s


def test_the_default_limit_is_the_daemons_default() -> None:
    assert aio.DEFAULT_MAX_INFLIGHT == DEFAULT_MAX_INFLIGHT == 64


def test_more_concurrent_asks_than_the_limit_wait_for_a_slot_and_all_complete(
    tmp_short: Path,
) -> None:
    daemon = own_daemon(tmp_short, "[daemon]\nmax_inflight_per_connection = 4\n")

    async def main() -> tuple[list[Any], int]:
        async with await AsyncClient.connect(daemon.socket, max_inflight=4) as client:
            peak = 0

            async def one(i: int) -> Any:
                nonlocal peak
                reply = client.ask("echo", {"sleep": 0.02} if i % 2 else i)
                peak = max(peak, client.inflight)
                return await reply

            replies = await asyncio.gather(*(one(i) for i in range(60)))
            # tells count against the same limit
            await asyncio.gather(*(client.tell("echo", i) for i in range(20)))
            return replies, peak

    try:
        replies, peak = run(main())
    finally:
        daemon.stop()
    assert replies == [{"slept": 0.02} if i % 2 else i for i in range(60)]
    assert peak <= 4


def test_a_client_limit_above_the_daemons_is_lowered_to_it(tmp_short: Path) -> None:
    """The welcome carries the daemon's limit: the client never exceeds it."""
    daemon = own_daemon(tmp_short, "[daemon]\nmax_inflight_per_connection = 2\n")

    async def main() -> tuple[int, list[Any]]:
        async with await AsyncClient.connect(daemon.socket, max_inflight=16) as client:
            replies = await asyncio.gather(
                *(client.ask("echo", {"sleep": 0.01} if i % 3 else i) for i in range(48))
            )
            return client.max_inflight, replies

    try:
        limit, replies = run(main())
    finally:
        daemon.stop()
    assert limit == 2
    assert replies == [{"slept": 0.01} if i % 3 else i for i in range(48)]


def test_a_reply_frees_its_slot_before_the_next_request_can_arrive(tmp_short: Path) -> None:
    """At a limit of one, every ask is sent the moment the previous reply arrives; the
    daemon must already count that request as done (none refused with backpressure)."""
    daemon = own_daemon(tmp_short, "[daemon]\nmax_inflight_per_connection = 1\n")

    async def main() -> list[Any]:
        async with await AsyncClient.connect(daemon.socket) as client:
            return await asyncio.gather(*(client.ask("echo", i) for i in range(3000)))

    try:
        replies = run(main())
    finally:
        daemon.stop()
    assert replies == list(range(3000))


def test_max_inflight_is_checked(daemon: DaemonProc) -> None:
    async def main() -> None:
        with pytest.raises(ValueError):
            await AsyncClient.connect(daemon.socket, max_inflight=0)

    run(main())


# --- streams -------------------------------------------------------------------------------


def test_a_stream_arrives_in_order_under_credit_while_asks_go_on(daemon: DaemonProc) -> None:
    async def main() -> tuple[list[int], list[Any]]:
        async with await AsyncClient.connect(daemon.socket) as client:
            name = (await client.ask("echo", {"stream": "aio-credit", "count": 300}))["stream"]
            window = CreditWindow(4, 4096)
            stream = await client.subscribe(name, window)
            assert isinstance(stream, AsyncEventStream)
            seen: list[int] = []

            async def consume() -> None:
                async for event in stream:
                    assert stream.buffered <= window.messages
                    seen.append(event["n"])

            consumer = asyncio.create_task(consume())
            asks = await asyncio.gather(*(client.ask("echo", i) for i in range(100)))
            await consumer
            return seen, asks

    seen, asks = run(main())
    assert seen == list(range(300))
    assert asks == list(range(100))


def test_a_consumer_that_does_not_keep_up_gets_backpressure(daemon: DaemonProc) -> None:
    async def main() -> tuple[str, list[int]]:
        async with await AsyncClient.connect(daemon.socket) as client:
            request = {"stream": "aio-flood", "count": 5000, "mode": "publish"}
            name = (await client.ask("echo", request))["stream"]
            stream = await client.subscribe(name, CreditWindow(1, 4096))
            received: list[int] = []
            with pytest.raises(PhloemError) as err:
                async for event in stream:
                    received.append(event["n"])
            return err.value.kind, received

    kind, received = run(main())
    assert kind == "backpressure"
    assert received == list(range(len(received))) and len(received) < 5000


def test_a_quiet_stream_times_out_and_a_cancelled_recv_leaves_it_usable(
    daemon: DaemonProc,
) -> None:
    async def main() -> tuple[list[str], list[str]]:
        async with await AsyncClient.connect(daemon.socket) as client:
            assert await kind_of(client.subscribe("echo/none")) == "unknown_stream"
            _, updates = await client.follow_runs()  # quiet until a run starts
            t0 = time.monotonic()
            assert await kind_of(updates.recv(0.2)) == "timeout"
            assert time.monotonic() - t0 < 3
            waiting = asyncio.create_task(updates.recv())
            await asyncio.sleep(0.05)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            started = await client.start_planning_run("scripted", "scripted", 1)
            kinds: list[str] = []
            result = await client.follow_planning(started, on_event=lambda e: kinds.append(e.kind))
            assert result.status == "completed"
            noted: list[str] = []
            async for update in updates:  # the record saw the same events
                if isinstance(update, RunBegan) and update.run.kind == "planning":
                    mine = update.run.id
                elif isinstance(update, RunNoted) and update.id == mine:
                    noted.append(update.note.kind)
                elif isinstance(update, RunFinished) and update.id == mine:
                    assert update.outcome == "done"
                    break
            await updates.aclose()
            assert await kind_of(updates.recv(0.2)) == "closed"
            return kinds, noted

    kinds = ["plan_accepted", "step_started", "observation", "terminal"]
    assert run(main()) == (kinds, kinds)


def test_unsubscribing_ends_the_stream(daemon: DaemonProc) -> None:
    async def main() -> list[int]:
        async with await AsyncClient.connect(daemon.socket) as client:
            request = {"stream": "aio-unsub", "count": 1000}
            name = (await client.ask("echo", request))["stream"]
            got = []
            async with await client.subscribe(name, CreditWindow(2, 4096)) as stream:
                async for event in stream:
                    got.append(event["n"])
                    if len(got) == 5:
                        break
            assert await kind_of(stream.recv(1)) == "closed"
            assert await client.ask("echo", "after") == "after"
            return got

    assert run(main()) == [0, 1, 2, 3, 4]


# --- errors --------------------------------------------------------------------------------


def test_no_daemon(tmp_short: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        missing = tmp_short / "missing.sock"
        with pytest.raises(PhloemError) as info:
            await AsyncClient.connect(missing)
        assert info.value.kind == "no_daemon" and str(missing) in info.value.message
        monkeypatch.setenv("PHLOEM_SOCKET", str(tmp_short / "env.sock"))
        with pytest.raises(PhloemError) as info:
            await AsyncClient.connect()
        assert info.value.kind == "no_daemon" and "env.sock" in info.value.message

    run(main())


def test_connect_resolves_phloem_socket(
    daemon: DaemonProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHLOEM_SOCKET", str(daemon.socket))

    async def main() -> None:
        async with await AsyncClient.connect() as client:
            assert client.path == daemon.socket
            await client.ping()
            assert client.welcome is not None and client.welcome.version == 1

    run(main())


def test_the_daemons_fail_kinds_and_its_timeout(daemon: DaemonProc) -> None:
    async def main() -> None:
        async with await AsyncClient.connect(daemon.socket) as client:
            assert await kind_of(client.ask("nobody", 1)) == "unknown_actor"
            assert await kind_of(client.ask("holder", {"type": "nope"})) == "bad_message"
            t0 = time.monotonic()
            assert await kind_of(client.ask("echo", {"sleep": 10}, timeout=0.2)) == "timeout"
            assert time.monotonic() - t0 < 3
            assert await client.ask("echo", "still fine") == "still fine"
            huge = "x" * (client.welcome.max_frame_bytes if client.welcome else 0)
            assert await kind_of(client.ask("echo", huge)) == "frame_too_large"
            assert await client.ask("echo", "not sent, not fatal") == "not sent, not fatal"

    run(main())


class SilentDaemon:
    """Shakes hands, then reads requests and never answers (or answers with `reply`)."""

    def __init__(self, path: Path, reply: Callable[[Any], bytes | None] = lambda m: None):
        self.path = path
        self.reply = reply
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> SilentDaemon:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            frames = FrameReader()
            while data := await reader.read(65536):
                for frame in frames.feed(data):
                    message = decode_client(frame)
                    if type(message).__name__ == "Hello":
                        writer.write(encode_frame(Welcome(1, "fake", os.getpid(), 1 << 20, 0.1)))
                    elif (out := self.reply(message)) is not None:
                        writer.write(out)
            writer.close()

        self.server = await asyncio.start_unix_server(serve, str(self.path))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


def test_a_daemon_that_never_answers_times_out(
    tmp_short: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(protocol, "REPLY_GRACE_S", 0.2)

    async def main() -> None:
        async with SilentDaemon(tmp_short / "s.sock"):
            client = await AsyncClient.connect(tmp_short / "s.sock", max_inflight=1)
            t0 = time.monotonic()
            first = asyncio.create_task(client.ask("echo", 1))
            second = asyncio.create_task(client.ask("echo", 2))
            with pytest.raises(PhloemError) as info:
                await first
            assert info.value.kind == "timeout" and "no reply" in info.value.message
            with pytest.raises(PhloemError) as info:
                await second
            # the first one's slot stays taken: the daemon never answered it
            assert info.value.kind == "timeout" and "slot" in info.value.message
            assert await kind_of(client.ping()) == "timeout"
            assert time.monotonic() - t0 < 5
            assert client.inflight == 1
            await client.aclose()
            assert await kind_of(client.ask("echo", 3)) == "closed"

    run(main())


def test_a_connection_level_fail_ends_everything(tmp_short: Path) -> None:
    def fatal(message: Any) -> bytes | None:
        if getattr(message, "actor", None) == "boom":
            return encode_frame(Fail(None, ErrorValue(kind="bad_frame", message="no")))
        return None

    async def main() -> None:
        async with SilentDaemon(tmp_short / "f.sock", fatal):
            client = await AsyncClient.connect(tmp_short / "f.sock")
            waiting = [asyncio.create_task(client.ask("echo", i, timeout=30)) for i in range(5)]
            await asyncio.sleep(0.05)
            assert await kind_of(client.ask("boom", 1, timeout=30)) == "bad_frame"
            for task in waiting:
                assert await kind_of(task) == "bad_frame"
            assert await kind_of(client.ping()) == "bad_frame"
            await client.aclose()

    run(main())


def test_a_refused_handshake_raises_its_kind(tmp_short: Path) -> None:
    async def main() -> None:
        async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            fail = Fail(None, ErrorValue(kind="too_many_connections", message="full"))
            writer.write(encode_frame(fail))
            await writer.drain()
            writer.close()

        server = await asyncio.start_unix_server(refuse, str(tmp_short / "r.sock"))
        async with server:
            assert await kind_of(AsyncClient.connect(tmp_short / "r.sock")) == (
                "too_many_connections"
            )

    run(main())


def test_the_daemon_dying_fails_pending_requests_and_ends_streams(tmp_short: Path) -> None:
    daemon = own_daemon(tmp_short, PLANNING_CONFIG)

    async def main() -> None:
        client = await AsyncClient.connect(daemon.socket)
        _, stream = await client.follow_runs()
        reader = asyncio.create_task(stream.recv())  # no timeout: only the end can wake it
        pending = [asyncio.create_task(client.ask("echo", {"sleep": 30})) for _ in range(10)]
        await asyncio.sleep(0.1)
        daemon.proc.send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        for task in pending:
            assert await kind_of(task) == "connection_lost"
        assert await kind_of(reader) == "connection_lost"
        assert time.monotonic() - t0 < 5
        assert await kind_of(client.ask("echo", 1)) == "connection_lost"
        assert await kind_of(client.subscribe("x")) == "connection_lost"
        await client.aclose()

    try:
        run(main())
    finally:
        daemon.proc.wait(10)


def test_stop_daemon_with_requests_pending(tmp_short: Path) -> None:
    daemon = own_daemon(tmp_short, PLANNING_CONFIG)

    async def main() -> tuple[list[str], str]:
        async with await AsyncClient.connect(daemon.socket) as client:
            _, stream = await client.follow_runs()
            pending = [asyncio.create_task(client.ask("echo", {"sleep": 30})) for _ in range(5)]
            await asyncio.sleep(0.1)
            await client.stop_daemon()
            kinds = [await kind_of(task) for task in pending]
            return kinds, await kind_of(stream.recv())

    kinds, end = run(main())
    assert set(kinds) <= {"connection_lost", "shutting_down", "noproc"}, kinds
    assert end in ("connection_lost", "owner_down", "shutting_down"), end
    assert daemon.proc.wait(20) == 0


def test_cancelling_one_ask_leaves_the_connection_to_the_others(daemon: DaemonProc) -> None:
    async def main() -> None:
        async with await AsyncClient.connect(daemon.socket, max_inflight=2) as client:
            sleeper = asyncio.create_task(client.ask("echo", {"sleep": 0.5}))
            others = [asyncio.create_task(client.ask("echo", i)) for i in range(50)]
            await asyncio.sleep(0.05)
            sleeper.cancel()
            assert await asyncio.gather(*others) == list(range(50))
            with pytest.raises(asyncio.CancelledError):
                await sleeper
            # the cancelled ask keeps its slot until the daemon has answered it
            assert client.inflight == 1
            async with asyncio.timeout(5):
                while client.inflight:
                    await asyncio.sleep(0.01)
            # a cancelled subscriber's stream and a cancelled wait for a slot
            wait = asyncio.create_task(client.ask("echo", "late"))
            wait.cancel()
            with pytest.raises(asyncio.CancelledError):
                await wait
            assert await client.ask("echo", "after") == "after"
            assert (await client.status()).state == "running"

    run(main())


def test_aclose_fails_pending_requests_with_closed(daemon: DaemonProc) -> None:
    async def main() -> None:
        client = await AsyncClient.connect(daemon.socket)
        pending = asyncio.create_task(client.ask("echo", {"sleep": 5}))
        await asyncio.sleep(0.05)
        await client.aclose()
        assert client.closed
        assert await kind_of(pending) == "closed"
        assert await kind_of(client.ask("echo", 1)) == "closed"
        await client.aclose()  # idempotent

    run(main())


# --- status, tree and the feature methods --------------------------------------------------


def test_status_tree_and_ping(daemon: DaemonProc) -> None:
    async def main() -> None:
        async with await AsyncClient.connect(daemon.socket) as client:
            status, tree, _ = await asyncio.gather(client.status(), client.tree(), client.ping())
            assert status.state == "running" and "holder" in status.services
            assert tree.pid == status.pid and tree.roots

    run(main())


def test_the_methods_match_the_blocking_client() -> None:
    core = {n: getattr(Client, n) for n in ("ask", "tell", "status", "tree", "ping")}
    core |= {"subscribe": Client.subscribe, "stop_daemon": Client.stop_daemon}
    for mixin in (PlanningMethods, AgentClientMethods, RunsClientMethods):
        core |= {n: m for n, m in vars(mixin).items() if not n.startswith("_") and callable(m)}
    assert len(core) >= 17  # new feature methods join the check by themselves
    for name, method in core.items():
        ours = getattr(AsyncClient, name)
        assert inspect.iscoroutinefunction(ours), name
        theirs = list(inspect.signature(method).parameters)
        assert list(inspect.signature(ours).parameters) == theirs, name


def test_planning_runs_natively(daemon: DaemonProc) -> None:
    async def main() -> None:
        async with await AsyncClient.connect(daemon.socket) as client:
            kinds: list[str] = []
            result = await client.run_planning(
                "scripted", "scripted", 1, on_event=lambda e: kinds.append(e.kind)
            )
            assert result.status == "completed"
            assert kinds == ["plan_accepted", "step_started", "observation", "terminal"]

            async def on_event(event: Any) -> None:
                kinds.append(event.kind)

            kinds.clear()
            result = await client.run_planning("scripted", "scripted", 2, on_event=on_event)
            assert result.status == "completed" and kinds[-1] == "terminal"
            results = await asyncio.gather(
                *(client.run_planning("scripted", "scripted", i) for i in range(4))
            )
            assert [r.status for r in results] == ["completed"] * 4
            ref = await client.start_planning("scripted", "scripted", 3)
            assert (await client.await_planning(ref, 10)).status == "completed"
            assert await kind_of(client.start_planning("nope", "scripted", 1)) == (
                "invalid_planning_adapter"
            )

    run(main())


def test_agents_run_natively(daemon: DaemonProc) -> None:
    async def main() -> None:
        async with await AsyncClient.connect(daemon.socket) as client:
            agents = await client.list_agents()
            assert "supplierBrief" in [a.name for a in agents]
            groups = await client.plan_agent("supplierBrief", {"company": "ACME"})
            assert groups[0] == ["fetchFilings", "fetchNews"]
            seen: list[str] = []
            run_ = await client.run_agent(
                "supplierBrief",
                state={"company": "ACME Components"},
                on_event=lambda e: seen.append(e.author),
            )
            assert run_.outcome.status == "done"
            assert run_.state["brief"].startswith("Supplier risk brief: ACME Components")
            assert len(run_.events) == len(seen) > 0
            started = await client.start_agent_run("supplierBrief", state={"company": "ACME"})
            await client.cancel_agent_run(started.ref)
            assert await kind_of(client.run_agent("nobody")) == "unknown_agent"

    run(main())
