"""A real daemon process: CLI, signals, sockets, owners, streams, limits, peers."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import stat
import subprocess
import textwrap
from pathlib import Path

import msgspec
import psutil
import pytest

import phloem
from phloem.cli.main import main
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import PhloemError
from phloem.protocols.snapshot import TreeSnapshot
from phloem.protocols.wire import (
    Ask,
    Fail,
    FrameReader,
    GetStatus,
    GetTree,
    Hello,
    Ping,
    Reply,
    Welcome,
    decode_server,
    encode_body,
    encode_frame,
)
from tests.daemon.fixture_services import Cancelled, Die, Hold, Peek
from tests.helpers import FIXTURE_CONFIG, PY, ROOT, DaemonProc, run_cli

pytestmark = pytest.mark.timeout(60)


class CliResult:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def cli(*args: str) -> CliResult:
    """The `phloem` command run in this process (same code as the console script)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return CliResult(code, out.getvalue(), err.getvalue())


def raw_conn(path: Path, hello: bool = True) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(path))
    if hello:
        sock.sendall(encode_frame(Hello(version=1)))
        assert isinstance(read_frames(sock, 1)[0], Welcome)
    return sock


def read_frames(sock: socket.socket, n: int) -> list[object]:
    reader = FrameReader(64 * 1024 * 1024)
    frames: list[bytes] = []
    while len(frames) < n:
        data = sock.recv(65536)
        if not data:
            break
        frames.extend(reader.feed(data))
    return [decode_server(f) for f in frames]


# --- CLI against the shared daemon --------------------------------------------------------


def test_status_tree_and_send_work_through_the_cli(shared_daemon: DaemonProc) -> None:
    sock = str(shared_daemon.socket)
    status = run_cli("status", "--socket", sock)  # once through a real `python -m phloem`
    assert status.returncode == 0, status.stderr
    assert "services   echo, " in status.stdout and "holder, counter\n" in status.stdout
    tree = cli("tree", "--socket", sock)
    assert tree.returncode == 0 and "└── counter  actor  running" in tree.stdout
    sent = cli("send", "echo", '{"a": [1, 2]}', "--socket", sock)
    assert (sent.returncode, sent.stdout) == (0, '{"a":[1,2]}\n')
    as_json = cli("status", "--json", "--socket", sock)
    services = json.loads(as_json.stdout)["services"]
    assert services[0] == "echo" and services[-2:] == ["holder", "counter"]


def test_cli_errors_exit_1_with_one_line_and_usage_errors_exit_2(
    shared_daemon: DaemonProc,
) -> None:
    sock = str(shared_daemon.socket)
    missing = cli("send", "nope", "1", "--socket", sock)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == ["phloem: no actor at 'nope' [unknown_actor]"]
    as_json = cli("send", "nope", "1", "--json", "--socket", sock)
    assert json.loads(as_json.stdout)["error"]["kind"] == "unknown_actor"
    assert cli("send", "echo", "{not json", "--socket", sock).returncode == 2
    assert cli("frobnicate").returncode == 2
    assert cli("top", "--interval", "0", "--socket", sock).returncode == 2


def test_a_missing_daemon_is_reported_clearly(tmp_short: Path) -> None:
    path = tmp_short / "none.sock"
    result = cli("status", "--socket", str(path))
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"phloem: no phloem daemon at {path} (start one with `phloem daemon --config ...`)"
    )
    with pytest.raises(PhloemError) as err:
        phloem.Client.connect(path)
    assert err.value.kind == "no_daemon"


def test_tree_json_matches_the_daemons_tree_snapshot(shared_daemon: DaemonProc) -> None:
    result = cli("tree", "--json", "--socket", str(shared_daemon.socket))
    assert result.returncode == 0, result.stderr
    from_cli = msgspec.json.decode(result.stdout, type=TreeSnapshot)
    with phloem.Client.connect(shared_daemon.socket) as client:
        from_client = client.tree()

    def stable(snap: TreeSnapshot) -> dict[str, object]:
        data: dict[str, object] = msgspec.to_builtins(snap)
        for volatile in ("taken_at", "rss_bytes", "threads"):
            data.pop(volatile)
        return data

    assert stable(from_cli) == stable(from_client)
    assert from_cli.pid == shared_daemon.proc.pid
    ids = [c.id for c in from_cli.roots[0].children]
    assert ids[0] == "echo" and ids[-2:] == ["holder", "counter"]


def test_top_renders_every_actor_and_stops_after_its_iterations(
    shared_daemon: DaemonProc,
) -> None:
    result = cli(
        "top", "--iterations", "2", "--interval", "0.05", "--socket", str(shared_daemon.socket)
    )
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout  # piped: plain text, one snapshot per refresh
    assert result.stdout.count("PID/THREAD") == 2 and "holder" in result.stdout
    as_json = cli("top", "--iterations", "1", "--json", "--socket", str(shared_daemon.socket))
    assert json.loads(as_json.stdout)["status"]["actors"] >= 3


# --- clients and owners -------------------------------------------------------------------


def test_two_clients_are_isolated_owners(shared_daemon: DaemonProc) -> None:
    with (
        phloem.Client.connect(shared_daemon.socket) as alice,
        phloem.Client.connect(shared_daemon.socket) as bob,
    ):
        ref = alice.ask("holder", Hold("alice"))
        assert alice.ask("holder", Peek(ref)) == "alice"
        with pytest.raises(PhloemError) as err:
            bob.ask("holder", Peek(ref))
        assert err.value.kind == "not_owner"
        with pytest.raises(PhloemError) as err:
            bob.ask("holder", Peek("ref_123"))
        assert err.value.kind == "invalid_ref"
        stream = alice.ask("echo", {"stream": "iso", "count": 1, "wait_s": 0})["stream"]
        with pytest.raises(PhloemError) as err:
            bob.subscribe(stream)
        assert err.value.kind in ("not_owner", "unknown_stream")


def test_a_client_killed_mid_work_has_its_work_cancelled(shared_daemon: DaemonProc) -> None:
    script = textwrap.dedent(
        f"""
        import sys, phloem
        from tests.daemon.fixture_services import Hold
        client = phloem.Client.connect({str(shared_daemon.socket)!r})
        print(client.ask("holder", Hold("doomed")), flush=True)
        sys.stdin.read()
        """
    )
    child = subprocess.Popen(
        [PY, "-c", script], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().startswith("ref_")
    child.kill()
    child.wait(10)
    with phloem.Client.connect(shared_daemon.socket) as observer:
        cancelled = observer.ask("holder", Cancelled(wait_for="doomed:owner_down"), timeout=10)
    assert "doomed:owner_down" in cancelled


def test_a_closed_connection_cancels_its_refs_and_streams(shared_daemon: DaemonProc) -> None:
    client = phloem.Client.connect(shared_daemon.socket)
    client.ask("holder", Hold("closed-conn"))
    client.ask("echo", {"stream": "closed-conn", "count": 1, "wait_s": 30})
    client.close()
    with phloem.Client.connect(shared_daemon.socket) as observer:
        cancelled = observer.ask("holder", Cancelled(wait_for="closed-conn:owner_down"))
        assert "closed-conn:owner_down" in cancelled


def test_a_stream_over_the_socket_delivers_everything_within_credit(
    shared_daemon: DaemonProc,
) -> None:
    with phloem.Client.connect(shared_daemon.socket) as client:
        name = client.ask("echo", {"stream": "credit", "count": 300})["stream"]
        with client.subscribe(name, CreditWindow(4, 4096)) as events:
            assert [e["n"] for e in events] == list(range(300))


def test_a_consumer_that_does_not_keep_up_is_detached_with_backpressure(
    shared_daemon: DaemonProc,
) -> None:
    with phloem.Client.connect(shared_daemon.socket) as client:
        name = client.ask("echo", {"stream": "flood", "count": 5000, "mode": "publish"})["stream"]
        events = client.subscribe(name, CreditWindow(1, 4096))
        received = []
        with pytest.raises(PhloemError) as err:
            for event in events:
                received.append(event["n"])
        assert err.value.kind == "backpressure"
        assert received == list(range(len(received))) and len(received) < 5000


def test_the_same_client_can_be_used_from_many_threads(shared_daemon: DaemonProc) -> None:
    import threading

    results: dict[int, object] = {}
    with phloem.Client.connect(shared_daemon.socket) as client:

        def work(i: int) -> None:
            for j in range(50):
                results[i * 100 + j] = client.ask("echo", i * 100 + j)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert results == {k: k for k in results} and len(results) == 400


def test_a_live_daemon_is_not_replaced(shared_daemon: DaemonProc) -> None:
    second = run_cli(
        "daemon", "--socket", str(shared_daemon.socket), "--config", str(shared_daemon.config)
    )
    assert second.returncode == 1
    assert "already running" in second.stderr
    with phloem.Client.connect(shared_daemon.socket) as client:
        client.ping()


# --- wire-level behaviour ---------------------------------------------------------------


def test_an_unsupported_protocol_version_is_refused(shared_daemon: DaemonProc) -> None:
    sock = raw_conn(shared_daemon.socket, hello=False)
    sock.sendall(encode_frame(Hello(version=99)))
    (fail,) = read_frames(sock, 1)
    assert isinstance(fail, Fail) and fail.error.kind == "unsupported_version"
    assert sock.recv(1) == b""


def test_pipelined_requests_each_get_their_own_reply(shared_daemon: DaemonProc) -> None:
    sock = raw_conn(shared_daemon.socket)
    frames = b"".join(
        encode_frame(Ask(id=i, actor="echo", body=encode_body(i), timeout=5)) for i in range(20)
    )
    sock.sendall(frames + encode_frame(Ping(id=99)))
    replies = read_frames(sock, 21)
    got = {r.id: msgspec.msgpack.decode(r.body) for r in replies if isinstance(r, Reply)}
    assert got.pop(99) is None
    assert got == {i: i for i in range(20)}


def test_connections_share_the_one_connection_loop(shared_daemon: DaemonProc) -> None:
    """Connections cost no thread each (`phloem.daemon.loop`): 48 open, each with an
    answered ask, leave the daemon's thread count where one connection had it (with
    slack for the daemon's own short-lived threads)."""
    daemon = psutil.Process(shared_daemon.proc.pid)
    with phloem.Client.connect(shared_daemon.socket) as first:
        assert first.ask("echo", {"n": 0}) == {"n": 0}
        before = daemon.num_threads()
        clients = [phloem.Client.connect(shared_daemon.socket) for _ in range(48)]
        try:
            for i, client in enumerate(clients):
                assert client.ask("echo", {"n": i}) == {"n": i}
            assert daemon.num_threads() < before + 16
        finally:
            for client in clients:
                client.close()


def test_requests_keep_their_order_around_one_served_off_the_loop(
    shared_daemon: DaemonProc,
) -> None:
    """A status or tree request runs on a thread of its own (it may block); the requests
    pipelined behind it on the same connection still come after it, in order."""
    sock = raw_conn(shared_daemon.socket)
    try:
        sock.sendall(
            encode_frame(GetStatus(id=1))
            + encode_frame(Ping(id=2))
            + encode_frame(GetTree(id=3))
            + encode_frame(Ping(id=4))
        )
        replies = read_frames(sock, 4)
    finally:
        sock.close()
    assert [r.id for r in replies if isinstance(r, Reply)] == [1, 2, 3, 4]


# --- daemon lifecycle -------------------------------------------------------------------


def test_the_daemon_stops_cleanly_on_sigterm_and_sigint(fixture_config: Path) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        path = fixture_config.parent / f"{sig.name}.sock"
        daemon = DaemonProc(path, fixture_config).wait_ready()
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert daemon.stop(sig) == 0
        assert not path.exists()
        assert any('"daemon_stopped"' in line for line in daemon.lines)


_TGKILL = {"x86_64": 234, "aarch64": 131}


@pytest.mark.skipif(os.uname().machine not in _TGKILL, reason="tgkill number unknown here")
def test_a_sigterm_delivered_to_a_worker_thread_stops_the_daemon(fixture_config: Path) -> None:
    # The kernel may hand a process's signal to any thread; while the accept loop waits
    # in select() with no timeout, only the wakeup fd makes the main thread run the
    # handler. tgkill picks the thread, so this is the case that once hung under load.
    import ctypes

    path = fixture_config.parent / "tgkill.sock"
    daemon = DaemonProc(path, fixture_config).wait_ready()
    pid = daemon.proc.pid
    other = next(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(_TGKILL[os.uname().machine], pid, other, signal.SIGTERM) == 0
    assert daemon.proc.wait(20) == 0
    assert not path.exists()


def test_phloem_stop_stops_the_daemon_gracefully(fixture_config: Path) -> None:
    path = fixture_config.parent / "s" / "stop.sock"
    daemon = DaemonProc(path, fixture_config).wait_ready()
    result = cli("stop", "--socket", str(path))
    assert result.returncode == 0, result.stderr
    assert f"pid {daemon.proc.pid}" in result.stdout
    assert daemon.proc.wait(20) == 0
    assert not path.exists()


def test_a_stale_socket_is_replaced(fixture_config: Path) -> None:
    path = fixture_config.parent / "stale.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # a socket file nobody listens on: what a crashed daemon leaves
    daemon = DaemonProc(path, fixture_config)
    daemon.wait_event("stale_socket_removed")
    daemon.wait_ready()
    with phloem.Client.connect(path) as client:
        assert client.ask("echo", "fresh") == "fresh"
    assert daemon.stop() == 0


def test_a_path_that_is_not_a_socket_is_refused(fixture_config: Path) -> None:
    path = fixture_config.parent / "file.sock"
    path.write_text("not a socket")
    result = cli("daemon", "--socket", str(path), "--config", str(fixture_config))
    assert result.returncode == 1 and "is not a socket" in result.stderr
    assert path.read_text() == "not a socket"


def test_connections_beyond_max_connections_are_refused(tmp_short: Path) -> None:
    config = tmp_short / "c.toml"
    config.write_text("[daemon]\nmax_connections = 2\n")
    daemon = DaemonProc(tmp_short / "m.sock", config).wait_ready()
    try:
        first = phloem.Client.connect(daemon.socket)
        second = phloem.Client.connect(daemon.socket)
        with pytest.raises(PhloemError) as err:
            phloem.Client.connect(daemon.socket)
        assert err.value.kind == "too_many_connections"
        first.close()
        second.ping()
        second.close()
    finally:
        assert daemon.stop() == 0


# --- peers --------------------------------------------------------------------------------

_PEER_SCRIPT = textwrap.dedent(
    """
    import os, socket, sys
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    try:
        sock.connect(sys.argv[1])
    except PermissionError:
        print("EACCES"); sys.exit(0)
    sock.sendall(bytes.fromhex(sys.argv[2]))
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    print(data.hex())
    """
)


SYSTEM_PYTHON = "/usr/bin/python3"  # readable by any uid (unlike a venv under /root)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a peer as another uid")
@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason="no system python3 for uid 65534")
def test_a_peer_with_another_uid_is_refused(tmp_short: Path) -> None:
    os.chmod(tmp_short, 0o711)
    hello = encode_frame(Hello(version=1)).hex()

    def as_nobody(path: Path) -> str:
        out = subprocess.run(
            [SYSTEM_PYTHON, "-c", _PEER_SCRIPT, str(path), hello],
            user=65534,
            group=65534,
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
            cwd="/",
        )
        return out.stdout.strip()

    # Default: the socket (0600 in a 0700 dir) cannot even be reached by another uid.
    config = tmp_short / "c.toml"
    config.write_text("")
    private = DaemonProc(tmp_short / "p" / "d.sock", config).wait_ready()
    try:
        assert as_nobody(private.socket) == "EACCES"
    finally:
        private.stop()
    # With other uids allowed, the socket is reachable and SO_PEERCRED decides.
    config.write_text("[daemon]\nallowed_uids = [4242]\n")
    shared = DaemonProc(tmp_short / "s" / "d.sock", config).wait_ready()
    try:
        assert stat.S_IMODE(shared.socket.stat().st_mode) == 0o666
        reply = bytes.fromhex(as_nobody(shared.socket))
        (fail,) = [decode_server(f) for f in FrameReader().feed(reply)]
        assert isinstance(fail, Fail) and fail.error.kind == "permission_denied"
        assert "uid 65534" in fail.error.message
        with phloem.Client.connect(shared.socket) as client:  # our own uid is fine
            client.ping()
    finally:
        shared.stop()


def test_a_half_closed_connection_still_gets_its_replies(shared_daemon: DaemonProc) -> None:
    sock = raw_conn(shared_daemon.socket)
    asks = [
        encode_frame(Ask(id=i, actor="echo", body=encode_body({"sleep": 0.2}), timeout=5))
        for i in (1, 2)
    ]
    sock.sendall(b"".join(asks))
    sock.shutdown(socket.SHUT_WR)  # done sending, still reading
    replies = read_frames(sock, 2)
    assert sorted(r.id for r in replies if isinstance(r, Reply)) == [1, 2]
    sock.close()


def test_the_daemon_exits_1_when_its_root_supervisor_gives_up(tmp_short: Path) -> None:
    config = tmp_short / "c.toml"
    config.write_text(FIXTURE_CONFIG + "\n[supervision]\nintensity = 0\n")
    daemon = DaemonProc(tmp_short / "i.sock", config).wait_ready()
    with phloem.Client.connect(daemon.socket) as client:
        assert client.ask("holder", Die()) == "dying"
    daemon.wait_event("root_supervisor_exited")
    assert daemon.proc.wait(20) == 1
    assert not daemon.socket.exists()


def test_the_async_client_works_over_the_socket(shared_daemon: DaemonProc) -> None:
    import asyncio

    async def main() -> tuple[object, list[int], str]:
        async with await phloem.AsyncClient.connect(shared_daemon.socket) as client:
            echoed = await client.ask("echo", {"async": True})
            reply = await client.ask("echo", {"stream": "async-socket", "count": 4})
            stream = await client.subscribe(reply["stream"], CreditWindow(2, 1024))
            events = [e["n"] async for e in stream]
            status = await client.status()
            return echoed, events, status.state

    assert asyncio.run(main()) == ({"async": True}, [0, 1, 2, 3], "running")
