"""`make run`: start the daemon on a config, run the example workload through it, stop it.

The workload is the list `STEPS`: each step gets a connected `phloem.Client` and returns
something JSON-able to print. Feature modules add their examples by listing a module in
`EXAMPLE_MODULES` that defines `steps() -> list[Step]`. Any failing step (or a daemon that
does not start or stop cleanly) makes the exit code non-zero.

    python -m phloem.examples.run_all --config conf/phloem.toml [--socket PATH]
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

import phloem
from phloem.cli.render import render_status, render_tree
from phloem.config import load_config
from phloem.protocols.errors import ErrorKind, PhloemError

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


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
]


def all_steps() -> list[Step]:
    steps = list(STEPS)
    for module in EXAMPLE_MODULES:
        steps.extend(importlib.import_module(module).steps())
    return steps


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(msgspec.to_builtins(value), indent=2, default=str)


class _Daemon:
    """The daemon subprocess, started and waited for through its JSON log lines."""

    def __init__(self, config: Path, socket: Path) -> None:
        argv = [sys.executable, "-m", "phloem", "daemon", "--config", str(config)]
        argv += ["--socket", str(socket)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="phloem.examples.run_all", description=__doc__)
    parser.add_argument("--config", default="conf/phloem.toml", help="daemon config file")
    parser.add_argument("--socket", default=None, help="override the config's socket path")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except PhloemError as err:
        print(f"run_all: {err.message}", file=sys.stderr)
        return 1
    socket = Path(args.socket) if args.socket else config.daemon.socket_path()
    print(f"== starting phloem daemon on {socket} ({args.config})", flush=True)
    daemon = _Daemon(Path(args.config), socket)
    if not daemon.wait_ready():
        print("run_all: the daemon did not start:\n" + "".join(daemon.log), file=sys.stderr)
        if daemon.proc.poll() is None:
            daemon.proc.kill()
        return 1
    failures = 0
    try:
        with phloem.Client.connect(socket) as client:
            for step in all_steps():
                print(f"\n== {step.name}", flush=True)
                try:
                    print(_show(step.run(client)), flush=True)
                except Exception as exc:  # a failed example is reported, the rest still run
                    failures += 1
                    kind = exc.kind if isinstance(exc, PhloemError) else type(exc).__name__
                    print(f"FAILED [{kind}]: {exc}", flush=True)
            print("\n== stopping the daemon", flush=True)
            client.stop_daemon()
        code = daemon.proc.wait(STOP_TIMEOUT_S)
    except PhloemError as err:
        print(f"run_all: {err.message} [{err.kind}]", file=sys.stderr)
        daemon.proc.terminate()
        daemon.proc.wait(STOP_TIMEOUT_S)
        return 1
    except subprocess.TimeoutExpired:
        print("run_all: the daemon did not stop in time", file=sys.stderr)
        daemon.proc.kill()
        return 1
    if code != 0:
        print(f"run_all: the daemon exited with {code}:\n" + "".join(daemon.log), file=sys.stderr)
        return 1
    print(f"daemon stopped cleanly; {failures} of {len(all_steps())} examples failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
