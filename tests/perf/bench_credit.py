"""Benchmark: credit stream throughput (producer thread → consumer thread) vs queue.Queue.

The floor is an unbounded `queue.Queue` carrying the same items between the same two
threads in the same run. The credit stream is bounded everywhere (window 256 messages,
pending 1,024) and the producer uses `send`, so it slows down rather than overflowing.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from phloem.protocols.credit import CreditWindow
from phloem.supervision.credit import CreditStream

ITEMS = 200_000
ROUNDS = 3
PAYLOAD = b"x" * 64


def _queue_rate(n: int) -> float:
    q: queue.Queue[bytes] = queue.Queue()

    def consume() -> None:
        get = q.get
        for _ in range(n):
            get()

    t = threading.Thread(target=consume)
    start = time.perf_counter()
    t.start()
    put = q.put
    for _ in range(n):
        put(PAYLOAD)
    t.join()
    return n / (time.perf_counter() - start)


def _credit_rate(n: int) -> float:
    stream: CreditStream[bytes] = CreditStream("bench", size_of=len)
    rx = stream.receiver(CreditWindow(256, 1 << 20), max_pending_messages=1024)

    def consume() -> None:
        recv = rx.recv
        for _ in range(n):
            recv(30)

    t = threading.Thread(target=consume)
    start = time.perf_counter()
    t.start()
    send = stream.send
    for _ in range(n):
        send(PAYLOAD, 30)
    t.join()
    return n / (time.perf_counter() - start)


def run() -> list[dict[str, Any]]:
    floor = max(_queue_rate(ITEMS) for _ in range(ROUNDS))
    value = max(_credit_rate(ITEMS) for _ in range(ROUNDS))
    return [
        {
            "name": "credit stream throughput (1 producer → 1 consumer thread)",
            "value": value,
            "unit": "items/s",
            "floor_name": "unbounded queue.Queue, same threads",
            "floor": floor,
            # throughput: higher is better, so the ratio is floor / value (time per item)
            "ratio": floor / value,
            "target": 1.5,
        }
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
