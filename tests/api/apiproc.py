"""`ApiProc`: a `phloem api` subprocess for the tests, on a daemon whose LLM agent talks
to the local fake Gemini provider; and the google-adk import the tests need (loudly
missing: google-adk is the `adk` extra, in its own venv, `make adk` → `.venv-adk`)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import PY, ROOT
from tests.models.fake_provider import Reply, gemini_parts, sse_reply

try:
    import google.adk  # noqa: F401
except ImportError as exc:  # pragma: no cover - the dev extra installs it
    raise ImportError(
        "the `phloem api` tests drive ADK's own client and dev UI: run them with google-adk "
        "installed, in its own venv (`make adk`, then .venv-adk/bin/python -m pytest tests/api;"
        " make test does this): pip install -e '.[dev,adk]'"
    ) from exc

START_TIMEOUT_S = 60.0
APP = "helper"  # the scripted agent: its one tool reads a file of its workspace


def api_config(base_url: str, store: Path, workdir: Path) -> str:
    return f"""
[providers.gem]
protocol = "gemini"
model = "g"
base_url = "{base_url}"
max_retries = 0

[sessions]
dir = "{store}"
workdir = "{workdir}"
default_agent = "{APP}"

[agents.llm.{APP}]
provider = "gem"
instruction = "Answer briefly."
tools = ["read"]
workdir = "{workdir}"
"""


def streamed_text(*pieces: str) -> Reply:
    """A streamed Gemini answer in `pieces` (the last one finishes it)."""
    last = len(pieces) - 1
    return sse_reply(
        [
            gemini_parts([{"text": p}], finish="STOP" if i == last else None)
            for i, p in enumerate(pieces)
        ]
    )


def streamed_call(name: str, args: dict[str, Any], call_id: str = "c1") -> Reply:
    return sse_reply(
        [gemini_parts([{"functionCall": {"name": name, "args": args, "id": call_id}}])]
    )


class ApiProc:
    """`phloem api --socket S --listen L ...`; `url` once it serves."""

    def __init__(self, socket: Path, *args: str, env: dict[str, str] | None = None) -> None:
        cmd = [PY, "-m", "phloem", "api", "--socket", str(socket), *args]
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        out = self.proc.stdout
        threading.Thread(target=lambda: [lines.put(x) for x in out], daemon=True).start()
        try:
            line = lines.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            self.stop()
            pytest.fail(f"phloem api did not start: {self.stderr()}")
        assert line.startswith("phloem api: serving "), line
        self.url = line.split()[-1].rstrip("/")
        self.port = int(self.url.rsplit(":", 1)[1])

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return ""
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)


@contextmanager
def running_api(socket: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[ApiProc]:
    api = ApiProc(socket, *args, env=env)
    try:
        yield api
    finally:
        code = api.stop()
        assert code == 0, f"phloem api exited {code}: {api.stderr()}"
