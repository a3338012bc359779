"""Benchmark: the wall time of `phloem --version` and of `phloem status` against a running
daemon, each beside `python -c pass` measured in the same run.

Each command is a fresh process, run as a user runs it (the installed `phloem` script,
output to /dev/null), with the byte-code cache allowed (`PYTHONDONTWRITEBYTECODE` is
dropped from its environment: a warm-up run of each writes the caches). `ROUNDS` rounds
each run the three commands in turn, so a change in the machine's load hits them alike;
the figures are the medians. Rows: each command against `python -c pass` (a ratio), and
each command's time above `python -c pass` against the goal of issue 27 (at most
`GOAL_ABOVE_PASS_MS` above it).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.perf.common import row

ROUNDS = 25
WARMUP = 2
GOAL_ABOVE_PASS_MS = 150.0
READY_TIMEOUT_S = 60.0
COMMAND_TIMEOUT_S = 60.0
ROOT = Path(__file__).resolve().parents[2]


def _phloem() -> list[str]:
    """The `phloem` console script beside this interpreter (else `python -m phloem`)."""
    script = Path(sys.executable).with_name("phloem")
    return [str(script)] if script.exists() else [sys.executable, "-m", "phloem"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _start_daemon(config: Path, socket: Path) -> subprocess.Popen[str]:
    argv = [*_phloem(), "daemon", "--config", str(config), "--socket", str(socket)]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    ready = threading.Event()

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:  # keep draining: a chatty daemon never blocks on the pipe
            if "daemon_ready" in line:
                ready.set()

    threading.Thread(target=watch, daemon=True).start()
    if not ready.wait(READY_TIMEOUT_S):
        proc.kill()
        proc.wait(10)
        raise RuntimeError("the daemon did not become ready")
    return proc


def _wall_seconds(argv: list[str]) -> float:
    """The wall time of one run of `argv` to its exit (which must be 0)."""
    start = time.perf_counter()
    done = subprocess.run(
        argv,
        cwd=ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{argv[-3:]} exited {done.returncode}: {done.stderr[-500:]!r}")
    return elapsed


def run() -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="phlc"))
    (tmp / "c.toml").write_text("[daemon]\n")
    socket = tmp / "d.sock"
    commands = {
        "pass": [sys.executable, "-c", "pass"],
        "version": [*_phloem(), "--version"],
        "status": [*_phloem(), "status", "--socket", str(socket)],
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    daemon = _start_daemon(tmp / "c.toml", socket)
    try:
        for _ in range(WARMUP):
            for argv in commands.values():
                _wall_seconds(argv)
        for _ in range(ROUNDS):
            for name, argv in commands.items():
                samples[name].append(_wall_seconds(argv))
    finally:
        daemon.terminate()
        try:
            daemon.wait(30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    ms = {name: statistics.median(got) * 1e3 for name, got in samples.items()}
    load = f"load {os.getloadavg()[0]:.1f}"
    rows = []
    for name, title in (("version", "phloem --version"), ("status", "phloem status (a daemon)")):
        rows.append(
            row(
                f"{title} wall time (median of {ROUNDS} interleaved runs, {load})",
                ms[name],
                "ms",
                "python -c pass, same rounds",
                ms["pass"],
                None,
            )
        )
        rows.append(
            row(
                f"{title}: time above python -c pass",
                ms[name] - ms["pass"],
                "ms",
                f"goal ({GOAL_ABOVE_PASS_MS:g} ms above python -c pass)",
                GOAL_ABOVE_PASS_MS,
                1.0,
            )
        )
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
