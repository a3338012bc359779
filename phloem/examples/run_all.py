"""`make run`: start the daemon on a config, run the example workload through it, stop it.

The workload is the list `STEPS`: each step gets a connected `phloem.Client` and returns
something JSON-able to print. Feature modules add their examples by listing a module in
`EXAMPLE_MODULES` that defines `steps() -> list[Step]`, and, if an example needs something
running beside the daemon (a stand-in model server), `prepare(config) -> context manager`:
entered before the daemon starts, it may change the daemon's config table (the server's
port). Each example runs once. Any failing step (or a daemon that does not start or stop
cleanly) makes the exit code non-zero.

Nothing is left in the user's directories: the daemon runs on a copy of the config in a
temporary state directory (`phloem-run-*` under `$TMPDIR`), with its socket, its session
store and `$XDG_STATE_HOME`, `$XDG_CACHE_HOME` and `$XDG_DATA_HOME` there; the directory
is removed at the end. Stand-in servers listen on ports the system picks, so a port in
use elsewhere changes nothing.

The daemon it starts is stopped on every way out: the normal end, a failure, Ctrl-C
(SIGINT), SIGTERM, SIGHUP, and a closed stdout (`make run | head`). A signal first tells
the daemon to stop (SIGTERM), then unwinds the runner, which waits for the daemon to exit
(`STOP_TIMEOUT_S`, then SIGKILL); the exit code is then 128 + the signal's number (141,
as for SIGPIPE, when stdout was closed).

    python -m phloem.examples.run_all --config conf/phloem.toml [--socket PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import msgspec

import phloem
from phloem.base.settings import read_toml
from phloem.cli.render import render_status, render_tree
from phloem.config import load_config, to_toml
from phloem.protocols.errors import ErrorKind, PhloemError

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
INTERRUPTING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STATE_PREFIX = "phloem-run-"  # the temporary state directory's name, under $TMPDIR


@dataclass(frozen=True)
class Step:
    """One example: a name and what to do with a connected client."""

    name: str
    run: Callable[[phloem.Client], Any]


def _status(client: phloem.Client) -> str:
    return render_status(client.status())


def _tree(client: phloem.Client) -> str:
    return render_tree(client.tree())


def _echo(client: phloem.Client) -> Any:
    message = {"hello": "phloem", "numbers": [1, 2, 3]}
    reply = client.ask("echo", message)
    if reply != message:
        raise PhloemError(ErrorKind.EXAMPLE_FAILED, f"echo replied {reply!r}")
    return reply


def _stream(client: phloem.Client) -> Any:
    reply = client.ask("echo", {"stream": "make-run", "count": 5})
    window = phloem.CreditWindow(messages=2, bytes=64 * 1024)
    events = [event["n"] for event in client.subscribe(reply["stream"], window)]
    if events != list(range(5)):
        raise PhloemError(ErrorKind.EXAMPLE_FAILED, f"stream gave {events!r}")
    return {"stream": reply["stream"], "events": events}


STEPS: list[Step] = [
    Step("status", _status),
    Step("tree", _tree),
    Step("echo", _echo),
    Step("stream under credit", _stream),
]

# Modules defining `steps() -> list[Step]`, appended to by feature modules' owners.
EXAMPLE_MODULES: list[str] = [
    "phloem.examples.planning_report",
    "phloem.examples.supplier_risk",
    "phloem.examples.live_session",
    "phloem.examples.sessions_demo",
    "phloem.examples.helpdesk_eval",
]


def example_modules() -> list[Any]:
    """The modules of `EXAMPLE_MODULES`, each once, in order."""
    return [importlib.import_module(name) for name in dict.fromkeys(EXAMPLE_MODULES)]


def all_steps() -> list[Step]:
    steps = list(STEPS)
    for module in example_modules():
        steps.extend(module.steps())
    return steps


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(msgspec.to_builtins(value), indent=2, default=str)


class _Interrupted(BaseException):
    """A signal ended the run (raised in the main thread by the signal handler)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Daemon:
    """The daemon subprocess, started and waited for through its JSON log lines."""

    def __init__(self, config: Path, socket: Path, env: dict[str, str]) -> None:
        argv = [sys.executable, "-m", "phloem", "daemon", "--config", str(config)]
        argv += ["--socket", str(socket)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
        )
        self.log: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            if '"daemon_ready"' in line:
                self._ready.set()
        self._ready.set()  # exited: wake the waiter

    def wait_ready(self) -> bool:
        return self._ready.wait(READY_TIMEOUT_S) and self.proc.poll() is None

    def signal_stop(self) -> None:
        """SIGTERM to the daemon unless it has been reaped (safe in a signal handler: no
        locks, so never `Popen.send_signal`)."""
        if self.proc.returncode is None:
            with contextlib.suppress(OSError):
                os.kill(self.proc.pid, signal.SIGTERM)

    def stop(self) -> None:
        """Make sure the daemon is gone: SIGTERM (a clean stop: services stopped, socket
        removed), then SIGKILL after `STOP_TIMEOUT_S` or on a second interruption."""
        if self.proc.poll() is not None:
            return
        self.signal_stop()
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print("run_all: the daemon did not stop in time; killing it", file=sys.stderr)
            self.proc.kill()
            self.proc.wait()
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise


@contextlib.contextmanager
def _interruptible(daemon: list[_Daemon]) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP tell the daemon (once started) to stop, then raise
    `_Interrupted` in the main thread so every `finally` runs."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        for d in daemon:
            d.signal_stop()
        raise _Interrupted(signum)

    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    previous = {sig: signal.signal(sig, on_signal) for sig in INTERRUPTING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _silence_stdout() -> None:
    """stdout's reader is gone: point it at /dev/null so nothing more (not even the flush
    at exit) fails on it."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="phloem.examples.run_all", description=__doc__)
    parser.add_argument("--config", default="conf/phloem.toml", help="daemon config file")
    parser.add_argument("--socket", default=None, help="override the config's socket path")
    args = parser.parse_args(argv)
    started: list[_Daemon] = []
    try:
        with _interruptible(started):
            return _run(args.config, args.socket, started)
    except _Interrupted as exc:
        _note(f"run_all: {signal.Signals(exc.signum).name}; the daemon was stopped")
        return 128 + exc.signum
    except KeyboardInterrupt:  # SIGINT before our handler was in place
        return 128 + signal.SIGINT
    except BrokenPipeError:
        _silence_stdout()
        _note("run_all: stdout was closed; the daemon was stopped")
        return 128 + signal.SIGPIPE


def _note(text: str) -> None:
    """A line on stderr, if stderr can still take one."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


def _run(config_path: str, socket_arg: str | None, started: list[_Daemon]) -> int:
    try:
        load_config(config_path)
        table, _ = read_toml(config_path)
    except PhloemError as err:
        print(f"run_all: {err.message}", file=sys.stderr)
        return 1
    with (
        tempfile.TemporaryDirectory(prefix=STATE_PREFIX) as state_dir,
        contextlib.ExitStack() as prepared,
    ):
        state = Path(state_dir)
        socket = Path(socket_arg) if socket_arg else state / "phloem.sock"
        for module in example_modules():
            prepare = getattr(module, "prepare", None)
            if prepare is not None:
                prepared.enter_context(prepare(table))
        config = state_config(table, state, socket)
        print(f"== starting phloem daemon on {socket} ({config_path}, state in {state})")
        sys.stdout.flush()
        daemon = _Daemon(config, socket, state_env(state))
        started.append(daemon)
        try:
            return _drive(daemon, socket)
        finally:
            daemon.stop()  # a no-op after a clean stop; otherwise no daemon is left behind


def state_config(table: dict[str, Any], state: Path, socket: Path) -> Path:
    """The daemon's copy of the config table, written into `state`: its socket and its
    session store there (whatever the file said)."""
    table.setdefault("daemon", {})["socket"] = str(socket)
    table.setdefault("sessions", {})["dir"] = str(state / "sessions")
    path = state / "phloem.toml"
    path.write_text(to_toml(table), encoding="utf-8")
    return path


def state_env(state: Path) -> dict[str, str]:
    """The daemon's environment: this one, with the XDG state, cache and data homes in
    `state` (whatever a library puts there goes with the directory)."""
    env = dict(os.environ)
    for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        env[name] = str(state / name.removeprefix("XDG_").removesuffix("_HOME").lower())
    return env


def _drive(daemon: _Daemon, socket: Path) -> int:
    if not daemon.wait_ready():
        print("run_all: the daemon did not start:\n" + "".join(daemon.log), file=sys.stderr)
        return 1
    print(f"== phloem daemon (pid {daemon.proc.pid}) ready", flush=True)
    failures = 0
    try:
        with phloem.Client.connect(socket) as client:
            for step in all_steps():
                print(f"\n== {step.name}", flush=True)
                try:
                    print(_show(step.run(client)), flush=True)
                except BrokenPipeError:
                    raise
                except Exception as exc:  # a failed example is reported, the rest still run
                    failures += 1
                    kind = exc.kind if isinstance(exc, PhloemError) else type(exc).__name__
                    print(f"FAILED [{kind}]: {exc}", flush=True)
            print("\n== stopping the daemon", flush=True)
            client.stop_daemon()
        code = daemon.proc.wait(STOP_TIMEOUT_S)
    except PhloemError as err:
        print(f"run_all: {err.message} [{err.kind}]", file=sys.stderr)
        return 1
    except subprocess.TimeoutExpired:
        print("run_all: the daemon did not stop in time; killing it", file=sys.stderr)
        daemon.proc.kill()
        return 1
    if code != 0:
        print(f"run_all: the daemon exited with {code}:\n" + "".join(daemon.log), file=sys.stderr)
        return 1
    print(f"daemon stopped cleanly; {failures} of {len(all_steps())} examples failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
