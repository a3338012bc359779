"""The `make run` session example: two turns of a durable session against a local
stand-in for a model provider.

`DemoModelServer` is a small OpenAI-compatible Chat Completions server on a free port of
127.0.0.1; `prepare(config)` starts it for a whole `make run` and points the
`[providers.demo]` entry of the daemon's config at it (conf/phloem.toml's own
`base_url` is a placeholder the runner replaces). It is scripted, not a model: to a first
question it asks for the `ls` tool, then reports what the tool returned; to later
questions it answers from the history it was sent (how many questions it has seen), which
shows that the session's earlier turns went with the request.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import phloem
from phloem.examples.run_all import Step
from phloem.protocols.errors import ErrorKind, PhloemError

MAX_BODY_BYTES = 16 * 1024 * 1024


def reply_to(request: dict[str, Any]) -> dict[str, Any]:
    """The scripted answer to one Chat Completions request."""
    messages = request.get("messages") or []
    questions = [m for m in messages if m.get("role") == "user"]
    last = messages[-1] if messages else {}
    message: dict[str, Any]
    if last.get("role") == "tool":
        listing = json.loads(last.get("content") or "{}")
        names = [e["path"] for e in listing.get("entries", [])][:6]
        message = {"role": "assistant", "content": "The workspace holds: " + ", ".join(names)}
    elif len(questions) == 1:
        call = {
            "id": "call_ls",
            "type": "function",
            "function": {"name": "ls", "arguments": json.dumps({"path": "."})},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    else:
        message = {
            "role": "assistant",
            "content": f"You have asked me {len(questions)} questions in this session; "
            f"the first was {questions[0].get('content')!r}.",
        }
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": "demo",
        "object": "chat.completion",
        "model": "demo",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": len(json.dumps(messages)) // 4, "completion_tokens": 12},
    }


class DemoModelServer:
    """`with DemoModelServer() as demo: ...` serves the scripted model at `demo.url`
    (`port` 0: a free one, chosen by the system)."""

    def __init__(self, port: int = 0) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = min(int(self.headers.get("content-length") or 0), MAX_BODY_BYTES)
                body = json.dumps(reply_to(json.loads(self.rfile.read(length)))).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> DemoModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextlib.contextmanager
def prepare(config: dict[str, Any]) -> Iterator[None]:
    """For the whole run (`run_all`, before the daemon starts): serve the stand-in and
    point `[providers.demo] base_url` of the daemon's config table at it."""
    with DemoModelServer() as demo:
        config.setdefault("providers", {}).setdefault("demo", {})["base_url"] = demo.url
        yield


def _two_turns(client: phloem.Client) -> dict[str, Any]:
    sid = client.session_new(agent="demo", workdir=os.getcwd())
    first = client.session_ask(sid, "What is in this directory?", timeout=60)
    second = client.session_ask(sid, "How many questions have I asked?", timeout=60)
    for result in (first, second):
        if not result.ok:
            raise PhloemError(ErrorKind.EXAMPLE_FAILED, f"turn {result.status}: {result.error}")
    return {
        "session": sid,
        "turn 1": {"text": first.text, "tool calls": [c.name for c in first.tool_calls]},
        "turn 2": {"text": second.text},
        "transcript": second.transcript,
    }


def steps() -> list[Step]:
    return [Step("a two-turn session (sessions, against a local stand-in model)", _two_turns)]
