"""`DemoModelServer`: a scripted stand-in for a model provider, on 127.0.0.1.

It is a small OpenAI-compatible Chat Completions endpoint (`/v1/chat/completions`) for
`make run` and `phloem chat --demo`, so a session can be tried with no key and no network.
It is scripted, not a model: to a first question it asks for the `ls` tool, then reports
what the tool returned; to later questions it answers from the history it was sent (how
many questions it has seen), which shows that the session's earlier turns went with the
request.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest request body read; a longer one is cut there (and fails to parse)."""

DEMO_MODEL = "demo"


def reply_to(request: dict[str, Any]) -> dict[str, Any]:
    """The scripted answer to one Chat Completions request."""
    messages = request.get("messages") or []
    questions = [m for m in messages if m.get("role") == "user"]
    last = messages[-1] if messages else {}
    message: dict[str, Any]
    if last.get("role") == "tool":
        listing = json.loads(last.get("content") or "{}")
        names = [e["path"] for e in listing.get("entries", [])][:6]
        held = ", ".join(names) if names else "nothing yet (it is empty)"
        message = {"role": "assistant", "content": f"The workspace holds: {held}"}
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
        "model": DEMO_MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": len(json.dumps(messages)) // 4, "completion_tokens": 12},
    }


class DemoModelServer:
    """`with DemoModelServer(port): ...` serves the scripted model on 127.0.0.1:`port`
    (0: a free port; `base_url` says which)."""

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

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The endpoint to configure as a provider's `base_url` (openai-chat)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> DemoModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
