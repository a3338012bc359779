"""A small real language server for the LSP tests (standard library only).

    python tests/actors/lsp/servers.py

It speaks the base protocol on stdio (Content-Length frames, JSON-RPC): answers
`initialize` (full text sync) and `shutdown`, exits on `exit`, and for each `didOpen` or
`didChange` publishes, for that version, one warning `BAD` per line containing `BAD`.
A text with a line `HOG N` makes it hold N MiB of touched memory (16 MiB at a time)
before it answers, so a memory cap can be crossed by a real server.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MIB = 1024 * 1024
held: list[bytes] = []


def read_message(stream: Any) -> dict[str, Any] | None:
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    assert length is not None
    body: dict[str, Any] = json.loads(stream.read(length))
    return body


def send(message: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()


def check(uri: str, version: int, text: str) -> None:
    for line in text.splitlines():
        if line.startswith("HOG "):
            for _ in range(int(line.split()[1]) // 16):
                held.append(b"\x01" * (16 * MIB))
    diagnostics = [
        {
            "range": {"start": {"line": n, "character": 0}, "end": {"line": n, "character": 3}},
            "severity": 2,
            "code": "BAD",
            "source": "test-ls",
            "message": "a bad line",
        }
        for n, line in enumerate(text.splitlines())
        if "BAD" in line
    ]
    params = {"uri": uri, "version": version, "diagnostics": diagnostics}
    send({"method": "textDocument/publishDiagnostics", "params": params})


def main() -> None:
    stdin = sys.stdin.buffer
    while (message := read_message(stdin)) is not None:
        method = message.get("method")
        params = message.get("params") or {}
        if method == "initialize":
            send({"id": message["id"], "result": {"capabilities": {"textDocumentSync": 1}}})
        elif method == "shutdown":
            send({"id": message["id"], "result": None})
        elif method == "exit":
            return
        elif method == "textDocument/didOpen":
            doc = params["textDocument"]
            check(doc["uri"], doc["version"], doc["text"])
        elif method == "textDocument/didChange":
            doc = params["textDocument"]
            check(doc["uri"], doc["version"], params["contentChanges"][-1]["text"])


if __name__ == "__main__":
    main()
