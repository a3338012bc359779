"""A real HTTP server on 127.0.0.1 standing in for Gemini and OpenAI in tests.

Each test scripts the replies in order (`provider.add(...)`); every request is recorded
(method, path, query, headers, JSON body). An unscripted request gets a 500 whose body
says so. Helpers build the wire bodies of Gemini REST (incl. SSE streams), OpenAI Chat
Completions and OpenAI Responses.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    gzip: bool = False
    delay: float = 0.0
    """Seconds the server stalls before answering (to provoke client timeouts)."""
    drip: float = 0.0
    """Seconds between 16-byte pieces of the body (a slow server)."""
    gate: threading.Event | None = None
    """When set, the server sends `body[:gate_after]`, then waits (up to 10 s) for it."""
    gate_after: int = 0


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def json_reply(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status=status,
        body=json.dumps(obj).encode(),
        headers={"content-type": "application/json", **(headers or {})},
    )


def sse_reply(events: list[Any], *, done: bool = False) -> Reply:
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in events)
    if done:
        body += b"data: [DONE]\r\n\r\n"
    return Reply(body=body, headers={"content-type": "text/event-stream"})


class FakeProvider:
    """`with FakeProvider() as fake:` serves on `fake.base_url` until the block ends."""

    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[Recorded] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                split = urlsplit(self.path)
                with provider._lock:
                    provider.requests.append(
                        Recorded(
                            method="POST",
                            path=split.path,
                            query=split.query,
                            headers={k.lower(): v for k, v in self.headers.items()},
                            body=body,
                        )
                    )
                    reply = (
                        provider._replies.popleft()
                        if provider._replies
                        else Reply(status=500, body=b"unscripted request")
                    )
                if reply.delay:
                    provider._stop.wait(reply.delay)
                payload = gzip.compress(reply.body) if reply.gzip else reply.body
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.gzip:
                    self.send_header("content-encoding", "gzip")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                if reply.gate is not None:
                    self.wfile.write(payload[: reply.gate_after])
                    self.wfile.flush()
                    reply.gate.wait(10)
                    self.wfile.write(payload[reply.gate_after :])
                    return
                if not reply.drip:
                    self.wfile.write(payload)
                    return
                for start in range(0, len(payload), 16):
                    if provider._stop.wait(reply.drip):
                        return
                    try:
                        self.wfile.write(payload[start : start + 16])
                        self.wfile.flush()
                    except OSError:
                        return

            do_GET = do_POST  # noqa: N815 - the name http.server dispatches to

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, *replies: Reply) -> FakeProvider:
        with self._lock:
            self._replies.extend(replies)
        return self

    @property
    def unused(self) -> int:
        with self._lock:
            return len(self._replies)

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


# -- Gemini bodies ------------------------------------------------------------------


def gemini_parts(
    parts: list[dict[str, Any]],
    *,
    finish: str | None = "STOP",
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": usage
        or {"promptTokenCount": 5, "candidatesTokenCount": 7, "totalTokenCount": 12},
        "modelVersion": "fake-gemini-001",
        "responseId": "resp-1",
    }


def gemini_text(text: str, **kw: Any) -> Reply:
    return json_reply(gemini_parts([{"text": text}], **kw))


def gemini_call(name: str, args: dict[str, Any], call_id: str | None = None) -> Reply:
    call: dict[str, Any] = {"name": name, "args": args}
    if call_id:
        call["id"] = call_id
    return json_reply(gemini_parts([{"functionCall": call}]))


# -- OpenAI Chat bodies -------------------------------------------------------------


def chat_body(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    finish: str = "stop",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "fake-chat",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
    }


def chat_text(text: str, *, finish: str = "stop") -> Reply:
    return json_reply(chat_body(text, finish=finish))


def chat_tool_call(name: str, arguments: str, call_id: str | None = "call_1") -> dict[str, Any]:
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    if call_id is not None:
        call["id"] = call_id
    return call


def chat_calls(*calls: dict[str, Any]) -> Reply:
    return json_reply(chat_body(None, list(calls), finish="tool_calls"))


# -- OpenAI Responses bodies --------------------------------------------------------


def responses_body(output: list[dict[str, Any]], *, status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "model": "fake-responses",
        "status": status,
        "output": output,
        "usage": {"input_tokens": 8, "output_tokens": 4, "total_tokens": 12},
    }


def responses_message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def responses_call(name: str, arguments: str, call_id: str | None = "call_1") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def responses_text(text: str) -> Reply:
    return json_reply(responses_body([responses_message(text)]))
