"""`phloem mcp serve` as a real subprocess fed raw lines: the line cap holds its memory
bounded, and the MCP lifecycle refuses work before `initialize`."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from phloem.actors.mcp.lines import MAX_MESSAGE_BYTES
from tests.helpers import PY, ROOT

pytestmark = pytest.mark.timeout(180)

MIB = 1024 * 1024
ENDLESS_BYTES = 512 * MIB
"""How much of one line without a newline the server is fed."""
RSS_GROWTH_CAP = 64 * MIB
"""Most its resident memory may grow meanwhile: the line cap (4 MiB) plus slack."""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


class Served:
    """A `phloem mcp serve` process: write lines, read its answers (with a deadline)."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [PY, "-m", "phloem", "mcp", "serve", "--root", str(root)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message).encode() + b"\n")

    def answer(self, timeout: float = 60.0) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.lines.get(timeout=timeout))
        return value

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


def test_an_endless_line_is_dropped_with_bounded_memory_and_answered(tmp_path: Path) -> None:
    served = Served(tmp_path)
    try:
        served.send(INITIALIZE)
        assert served.answer()["result"]["serverInfo"]["name"] == "phloem"
        served.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        process = psutil.Process(served.proc.pid)
        baseline = process.memory_info().rss
        peak = baseline
        chunk = b"x" * MIB
        written = 0
        while written < ENDLESS_BYTES:  # one line, no newline
            served.write(chunk)
            written += len(chunk)
            if written % (16 * MIB) == 0:
                peak = max(peak, process.memory_info().rss)
        time.sleep(0.5)
        peak = max(peak, process.memory_info().rss)
        refused = served.answer()
        assert refused["id"] is None and refused["error"]["code"] == -32600
        assert "Request too large" in refused["error"]["message"]
        served.write(b'tail of that line"}\n')  # the rest of it, up to its newline: dropped
        served.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert served.answer() == {"jsonrpc": "2.0", "id": 2, "result": {}}  # it serves on
        growth = peak - baseline
        print(
            f"\nmcp serve fed one {ENDLESS_BYTES // MIB} MiB line: RSS {baseline // MIB} MiB "
            f"-> peak {peak // MIB} MiB (growth {growth / MIB:.1f} MiB, cap "
            f"{RSS_GROWTH_CAP // MIB} MiB; line limit {MAX_MESSAGE_BYTES // MIB} MiB)"
        )
        assert growth < RSS_GROWTH_CAP
    finally:
        served.close()


def test_no_method_but_ping_before_initialize(tmp_path: Path) -> None:
    served = Served(tmp_path)
    try:
        served.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        refused = served.answer()
        assert refused["id"] == 1 and refused["error"]["code"] == -32600
        assert refused["error"]["message"].startswith("Server not initialized")
        served.send({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                     "params": {"name": "read", "arguments": {"path": "x"}}})  # fmt: skip
        assert served.answer()["error"]["code"] == -32600  # no tool ran
        served.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        )  # fmt: skip  (dropped, unanswered)
        served.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert served.answer() == {"jsonrpc": "2.0", "id": 2, "result": {}}  # allowed
        served.write(b"not json\n")
        garbled = served.answer()
        assert garbled["id"] is None and garbled["error"]["code"] == -32700
        served.write(b"[" * 200 + b"]" * 200 + b"\n")
        deep = served.answer()
        assert deep["error"]["code"] == -32700 and "nested" in deep["error"]["message"]
        served.send({**INITIALIZE, "id": 3})
        assert served.answer()["id"] == 3
        served.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        served.send({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
        listed = served.answer()
        assert listed["id"] == 4 and {t["name"] for t in listed["result"]["tools"]} == {
            "read", "grep", "find", "ls",
        }  # fmt: skip
    finally:
        served.close()
