"""The `echo` service: replies with what it was sent. For tests, examples and benchmarks.

Requests are any msgpack value; the reply is the same value. Two structured requests do
more: `{"sleep": seconds}` holds the call that long (at most `MAX_SLEEP_S`) without
blocking the actor, and `{"stream": name, "count": n}` opens a topic bound to the caller
and publishes `n` numbered events to it once a subscriber attaches or `wait_s` passes
(waiting for credit, or with `"mode": "publish"` never waiting, so that a consumer that
does not keep up is detached with `backpressure`).
They exercise timeouts, owner-bound streams and cancellation on disconnect.
"""

from __future__ import annotations

import threading
from typing import Any

from phloem.actors.services import DEFER, Call, ServiceActor, register_service, service_factory
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range
from phloem.supervision import timers
from phloem.supervision.reasons import ExitReason

MAX_SLEEP_S = 60.0
MAX_STREAM_EVENTS = 100_000
MAX_STREAM_WAIT_S = 30.0


class EchoService(ServiceActor):
    """Replies with the request; see the module docstring for `sleep` and `stream`."""

    def handle(self, message: Any, call: Call) -> Any:
        if isinstance(message, dict) and set(message) == {"sleep"}:
            return self._sleep(message["sleep"], call)
        if isinstance(message, dict) and "stream" in message and "count" in message:
            return self._stream(message, call)
        return message

    def _sleep(self, seconds: Any, call: Call) -> Any:
        check_range("sleep", seconds, 0, MAX_SLEEP_S, kind=ErrorKind.BAD_MESSAGE, integer=False)
        timers.call_later(float(seconds), call.reply, {"slept": seconds})
        return DEFER

    def _stream(self, message: dict[str, Any], call: Call) -> Any:
        name, count = message["stream"], message["count"]
        wait_s = message.get("wait_s", 5.0)
        blocking = message.get("mode", "send") != "publish"
        if not isinstance(name, str):
            raise PhloemError(ErrorKind.BAD_MESSAGE, "stream must be a string")
        check_range("count", count, 0, MAX_STREAM_EVENTS, kind=ErrorKind.BAD_MESSAGE)
        check_range(
            "wait_s", wait_s, 0, MAX_STREAM_WAIT_S, kind=ErrorKind.BAD_MESSAGE, integer=False
        )
        topic = self.open_topic(f"echo/{name}", owner=call.owner)

        def produce() -> None:
            topic.stream.wait_for_subscribers(1, wait_s)
            try:
                for i in range(count):
                    if blocking:
                        topic.send({"n": i}, timeout=MAX_STREAM_WAIT_S)
                    else:
                        topic.publish({"n": i})
            except PhloemError as err:
                topic.close(
                    ExitReason.timeout(err.message) if err.kind == ErrorKind.TIMEOUT else None
                )
                return
            topic.close()

        threading.Thread(target=produce, name=f"echo-stream-{name}", daemon=True).start()
        return {"stream": topic.name}


register_service("echo", service_factory(EchoService))
