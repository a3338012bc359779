"""Credit streams: windows, acks, pending bounds, detach on overflow, the pull receiver."""

from __future__ import annotations

import threading

import pytest

from phloem.protocols.credit import (
    DEFAULT_WINDOW_BYTES,
    DEFAULT_WINDOW_MESSAGES,
    WINDOW_BYTES_RANGE,
    WINDOW_MESSAGES_RANGE,
    CreditWindow,
)
from phloem.protocols.errors import PhloemError
from phloem.supervision.credit import CreditStream, default_size
from phloem.supervision.reasons import ExitKind, ExitReason

pytestmark = pytest.mark.timeout(20)


class Sink:
    """A push consumer that records deliveries and detach reasons."""

    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.reasons: list[ExitReason] = []
        self.detached = threading.Event()

    def deliver(self, item: bytes) -> None:
        self.items.append(item)

    def on_detach(self, reason: ExitReason) -> None:
        self.reasons.append(reason)
        self.detached.set()


def test_window_defaults_and_ranges_are_validated() -> None:
    w = CreditWindow()
    assert (w.messages, w.bytes) == (DEFAULT_WINDOW_MESSAGES, DEFAULT_WINDOW_BYTES)
    CreditWindow(WINDOW_MESSAGES_RANGE[0], WINDOW_BYTES_RANGE[0])
    CreditWindow(WINDOW_MESSAGES_RANGE[1], WINDOW_BYTES_RANGE[1])
    messages = r"^invalid_argument: messages must be between 1 and 65536$"
    with pytest.raises(ValueError, match=messages):
        CreditWindow(0, 10)
    with pytest.raises(ValueError, match=r"^invalid_argument: bytes must be between 1 and "):
        CreditWindow(1, 0)
    with pytest.raises(ValueError, match=messages):
        CreditWindow(WINDOW_MESSAGES_RANGE[1] + 1, 10)
    with pytest.raises(ValueError, match=r"^invalid_argument: bytes must be between 1 and "):
        CreditWindow(1, WINDOW_BYTES_RANGE[1] + 1)
    with pytest.raises(TypeError, match=r"^invalid_argument: messages must be an int$") as err:
        CreditWindow(True, 10)
    assert isinstance(err.value, PhloemError) and err.value.details == {"field": "messages"}


def test_the_producer_stops_at_the_message_window_and_resumes_on_ack() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    sink = Sink()
    sub = stream.subscribe(CreditWindow(3, 1000), sink.deliver, sink.on_detach)
    for i in range(5):
        stream.publish(b"%d" % i)
    assert sink.items == [b"0", b"1", b"2"]
    assert (sub.in_flight_messages, sub.pending_messages) == (3, 2)
    assert stream.credit_in_use() == 3
    stream.ack(sub, 1, 1)
    assert sink.items == [b"0", b"1", b"2", b"3"]
    stream.ack(sub, 3, 3)
    assert sink.items == [b"0", b"1", b"2", b"3", b"4"]
    assert sub.pending_messages == 0


def test_the_producer_stops_at_the_byte_window() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    sink = Sink()
    sub = stream.subscribe(CreditWindow(100, 10), sink.deliver, sink.on_detach)
    stream.publish(b"x" * 6)
    stream.publish(b"y" * 4)
    stream.publish(b"z")
    assert sink.items == [b"x" * 6, b"y" * 4]
    assert (sub.in_flight_bytes, sub.pending_bytes) == (10, 1)
    stream.ack(sub, 1, 6)
    assert sink.items[-1] == b"z"
    assert sub.in_flight_bytes == 5


def test_an_ack_beyond_what_is_outstanding_clamps_to_the_window() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    sink = Sink()
    sub = stream.subscribe(CreditWindow(2, 100), sink.deliver, sink.on_detach)
    stream.publish(b"a")
    stream.ack(sub, 50, 5000)
    assert (sub.in_flight_messages, sub.in_flight_bytes) == (0, 0)
    for _ in range(4):
        stream.publish(b"b")
    assert sub.in_flight_messages == 2  # credit never exceeds the window
    assert sub.pending_messages == 2


def test_ack_with_bytes_omitted_frees_bytes_only_when_all_messages_are_acked() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    sub = stream.subscribe(CreditWindow(10, 100), Sink().deliver)
    stream.publish(b"aaaa")
    stream.publish(b"bb")
    stream.ack(sub, 1)
    assert sub.in_flight_bytes == 6
    stream.ack(sub, 1)
    assert sub.in_flight_bytes == 0


def test_a_negative_ack_is_refused() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    sub = stream.subscribe(CreditWindow(), Sink().deliver)
    with pytest.raises(ValueError, match=r"^invalid_argument: messages must be at least 0$"):
        stream.ack(sub, -1)
    with pytest.raises(ValueError, match=r"^invalid_argument: bytes must be at least 0$"):
        stream.ack(sub, 1, -1)


def test_an_item_larger_than_the_byte_window_detaches_with_backpressure() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    small, big = Sink(), Sink()
    stream.subscribe(CreditWindow(10, 4), small.deliver, small.on_detach)
    stream.subscribe(CreditWindow(10, 100), big.deliver, big.on_detach)
    assert stream.publish(b"12345") == 1
    assert small.reasons[0].kind is ExitKind.BACKPRESSURE
    assert small.reasons[0].detail == "item of 5 bytes exceeds window of 4 bytes"
    assert big.items == [b"12345"] and big.reasons == []
    assert stream.subscriber_count() == 1


def test_an_item_exactly_the_byte_window_is_delivered() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    sink = Sink()
    stream.subscribe(CreditWindow(10, 4), sink.deliver, sink.on_detach)
    stream.publish(b"1234")
    assert sink.items == [b"1234"] and sink.reasons == []


def test_a_consumer_whose_pending_messages_overflow_is_detached_with_backpressure() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    slow, fast = Sink(), Sink()
    slow_sub = stream.subscribe(
        CreditWindow(1, 100), slow.deliver, slow.on_detach, max_pending_messages=2
    )
    fast_sub = stream.subscribe(CreditWindow(100, 1000), fast.deliver, fast.on_detach)
    stream.publish(b"1")  # delivered
    stream.publish(b"2")  # pending 1
    stream.publish(b"3")  # pending 2 == limit
    assert slow.reasons == [] and slow_sub.pending_messages == 2
    stream.publish(b"4")  # overflow
    assert slow.detached.is_set()
    assert slow.reasons[0].kind is ExitKind.BACKPRESSURE
    assert slow_sub.detach_reason == slow.reasons[0]
    assert not slow_sub.attached and slow_sub.pending_messages == 0
    assert fast.items == [b"1", b"2", b"3", b"4"] and fast_sub.attached
    stream.ack(slow_sub, 1)  # acks from a detached consumer are ignored
    assert slow.items == [b"1"]
    assert stream.usage().detached == 1


def test_a_consumer_whose_pending_bytes_overflow_is_detached() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    sink = Sink()
    stream.subscribe(CreditWindow(1, 100), sink.deliver, sink.on_detach, max_pending_bytes=5)
    stream.publish(b"a")
    stream.publish(b"bbbbb")  # 5 bytes pending: at the limit
    assert sink.reasons == []
    stream.publish(b"c")
    assert sink.reasons[0].kind is ExitKind.BACKPRESSURE


def test_zero_pending_means_detach_as_soon_as_credit_runs_out() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    sink = Sink()
    stream.subscribe(CreditWindow(1, 100), sink.deliver, sink.on_detach, max_pending_messages=0)
    stream.publish(b"a")
    assert sink.reasons == []
    stream.publish(b"b")
    assert sink.reasons[0].kind is ExitKind.BACKPRESSURE


def test_a_failing_deliver_detaches_only_that_consumer_with_an_exception_reason() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    good = Sink()
    reasons: list[ExitReason] = []

    def bad(item: bytes) -> None:
        raise OSError("socket gone")

    stream.subscribe(CreditWindow(), bad, reasons.append)
    stream.subscribe(CreditWindow(), good.deliver, good.on_detach)
    stream.publish(b"x")
    assert reasons[0].kind is ExitKind.EXCEPTION and reasons[0].error_type == "OSError"
    assert good.items == [b"x"]


def test_subscriber_count_is_bounded() -> None:
    stream: CreditStream[bytes] = CreditStream("s", max_subscribers=2)
    stream.subscribe(CreditWindow(), Sink().deliver)
    stream.subscribe(CreditWindow(), Sink().deliver)
    with pytest.raises(PhloemError) as err:
        stream.subscribe(CreditWindow(), Sink().deliver)
    assert err.value.kind == "backpressure"
    with pytest.raises(ValueError, match=r"^invalid_argument: max_subscribers must be between 1"):
        CreditStream("s", max_subscribers=0)
    with pytest.raises(ValueError, match=r"^invalid_argument: max_pending_messages must be betw"):
        stream.subscribe(CreditWindow(), Sink().deliver, max_pending_messages=-1)


def test_close_detaches_everyone_normally_and_refuses_new_items() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    sink = Sink()
    stream.subscribe(CreditWindow(), sink.deliver, sink.on_detach)
    stream.close()
    assert sink.reasons == [ExitReason.normal()]
    with pytest.raises(PhloemError) as err:
        stream.publish(b"late")
    assert err.value.kind == "closed"
    with pytest.raises(PhloemError):
        stream.subscribe(CreditWindow(), sink.deliver)


def test_the_receiver_gets_items_in_order_and_auto_acks() -> None:
    stream: CreditStream[int] = CreditStream("s")
    rx = stream.receiver(CreditWindow(4, 1000))
    for i in range(4):
        stream.publish(i)
    assert [rx.recv(1) for _ in range(4)] == [0, 1, 2, 3]
    for i in range(4, 8):
        stream.publish(i)  # credit restored by the auto-acks
    assert [rx.recv(1) for _ in range(4)] == [4, 5, 6, 7]
    assert rx.detach_reason is None


def test_recv_times_out_with_a_timeout_error() -> None:
    stream: CreditStream[int] = CreditStream("s")
    rx = stream.receiver()
    with pytest.raises(PhloemError) as err:
        rx.recv(0.01)
    assert err.value.kind == "timeout"


def test_the_receiver_drains_its_buffer_then_reports_the_stream_closed() -> None:
    stream: CreditStream[int] = CreditStream("s")
    rx = stream.receiver()
    stream.publish(1)
    stream.publish(2)
    stream.close()
    assert list(rx) == [1, 2]
    with pytest.raises(PhloemError) as err:
        rx.recv(0)
    assert err.value.kind == "closed"


def test_a_manual_receiver_that_never_acks_is_detached_on_overflow() -> None:
    stream: CreditStream[int] = CreditStream("s")
    rx = stream.receiver(CreditWindow(2, 1000), auto_ack=False, max_pending_messages=1)
    for i in range(3):
        stream.publish(i)
    assert rx.recv(1) == 0 and rx.recv(1) == 1
    stream.publish(3)  # pending was full: overflow
    with pytest.raises(PhloemError) as err:
        rx.recv(1)
    assert err.value.kind == "backpressure"
    assert rx.detach_reason is not None


def test_manual_ack_restores_exactly_the_acked_items_bytes() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    rx = stream.receiver(CreditWindow(10, 10), auto_ack=False)
    stream.publish(b"aaaa")
    stream.publish(b"bbbbbb")
    stream.publish(b"c")  # waits: 10 bytes in flight
    assert rx.recv(1) == b"aaaa"
    assert rx.buffered() == 1
    rx.ack(1)
    assert rx.subscription.in_flight_bytes == 7  # 6 + the now-delivered 1
    assert rx.recv(1) == b"bbbbbb" and rx.recv(1) == b"c"
    rx.ack(100)  # clamps
    assert rx.subscription.in_flight_messages == 0
    with pytest.raises(ValueError, match=r"^invalid_argument: count must be at least 0$"):
        rx.ack(-1)


def test_auto_ack_flushes_before_waiting_so_a_large_item_is_not_stuck() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    rx = stream.receiver(CreditWindow(100, 100))
    stream.publish(b"x" * 10)
    assert rx.recv(1) == b"x" * 10  # 10 bytes unacked, below the batch threshold
    got: list[bytes] = []
    t = threading.Thread(target=lambda: got.append(rx.recv(5)))
    t.start()
    stream.send(b"y" * 95, timeout=5)  # needs the 10 bytes back
    t.join(5)
    assert got == [b"y" * 95]


def test_send_waits_for_room_and_times_out_loudly() -> None:
    stream: CreditStream[int] = CreditStream("s")
    rx = stream.receiver(CreditWindow(1, 1000), auto_ack=False, max_pending_messages=1)
    stream.send(1, timeout=1)  # delivered
    stream.send(2, timeout=1)  # pending
    with pytest.raises(PhloemError) as err:
        stream.send(3, timeout=0.05)
    assert err.value.kind == "timeout"
    assert rx.detach_reason is None  # waiting, not detaching
    assert rx.recv(1) == 1
    rx.ack(1)
    stream.send(3, timeout=1)
    assert rx.recv(1) == 2


def test_default_size_measures_bytes_text_and_structures() -> None:
    assert default_size(b"abc") == 3
    assert default_size("é") == 2
    assert default_size({"a": 1}) == 4


@pytest.mark.timeout(30)
def test_a_threaded_producer_and_consumer_lose_and_reorder_nothing() -> None:
    stream: CreditStream[int] = CreditStream("s")
    rx = stream.receiver(CreditWindow(8, 1 << 20), max_pending_messages=16)
    n = 20_000
    got: list[int] = []

    def consume() -> None:
        for _ in range(n):
            got.append(rx.recv(10))

    t = threading.Thread(target=consume)
    t.start()
    for i in range(n):
        stream.send(i, timeout=10)
        assert rx.subscription.in_flight_messages <= 8
    t.join(20)
    assert got == list(range(n))
    assert stream.usage().pending_messages == 0


@pytest.mark.timeout(30)
def test_many_producers_never_exceed_any_consumers_window() -> None:
    stream: CreditStream[bytes] = CreditStream("s")
    window = CreditWindow(5, 50)
    receivers = [stream.receiver(window, max_pending_messages=64) for _ in range(3)]
    violations: list[str] = []
    per_producer = 2_000

    def produce(tag: int) -> None:
        for i in range(per_producer):
            stream.send(b"%d:%d" % (tag, i), timeout=10)
            for rx in receivers:
                sub = rx.subscription
                if sub.in_flight_messages > 5 or sub.in_flight_bytes > 50:
                    violations.append(repr(sub))

    counts = [0] * len(receivers)

    def consume(k: int) -> None:
        for _ in range(per_producer * 3):
            receivers[k].recv(10)
            counts[k] += 1

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(3)]
    threads += [threading.Thread(target=consume, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(25)
    assert violations == []
    assert counts == [per_producer * 3] * 3


def test_wait_for_subscribers_returns_once_one_attaches_or_times_out() -> None:
    stream: CreditStream[int] = CreditStream("s")
    assert not stream.wait_for_subscribers(1, timeout=0.01)
    t = threading.Thread(target=stream.receiver)
    t.start()
    assert stream.wait_for_subscribers(1, timeout=5)
    t.join(5)


def test_a_normal_close_delivers_what_is_pending_before_detaching() -> None:
    stream: CreditStream[int] = CreditStream("s")
    rx = stream.receiver(CreditWindow(2, 1000))
    for i in range(5):
        stream.publish(i)
    stream.close()
    assert rx.detach_reason is None  # still draining
    assert list(rx) == [0, 1, 2, 3, 4]
    assert rx.detach_reason == ExitReason.normal()


def test_an_abnormal_close_detaches_at_once_dropping_what_is_pending() -> None:
    stream: CreditStream[int] = CreditStream("s")
    rx = stream.receiver(CreditWindow(2, 1000))
    for i in range(5):
        stream.publish(i)
    stream.close(ExitReason.owner_down())
    assert rx.recv(1) == 0 and rx.recv(1) == 1
    with pytest.raises(PhloemError) as err:
        rx.recv(1)
    assert err.value.kind == "owner_down"


# --- keeping items for the first subscriber ------------------------------------------------


def _retaining(messages: int, nbytes: int = 1 << 20) -> CreditStream[bytes]:
    return CreditStream(
        "kept",
        size_of=len,
        retain_messages=messages,
        retain_bytes=nbytes,
        missed=lambda n: f"missed {n}".encode(),
    )


def test_items_wait_for_the_first_subscriber_up_to_exactly_the_retain_bound() -> None:
    stream = _retaining(3)
    for i in range(3):
        assert stream.publish(b"%d" % i) == 0  # nobody yet, and nothing blocks
    assert stream.retained() == 3 and stream.missed_count == 0
    first, second = Sink(), Sink()
    stream.subscribe(CreditWindow(8, 1 << 20), first.deliver, first.on_detach)
    stream.subscribe(CreditWindow(8, 1 << 20), second.deliver, second.on_detach)
    stream.publish(b"3")
    assert first.items == [b"0", b"1", b"2", b"3"]  # the first gets what was kept
    assert second.items == [b"3"]  # a later one only what came after it
    assert not stream.retaining and stream.retained() == 0


def test_one_item_over_the_bound_drops_the_oldest_and_tells_how_many() -> None:
    stream = _retaining(3)
    for i in range(5):
        stream.publish(b"%d" % i)
    assert stream.retained() == 3 and stream.missed_count == 2
    sink = Sink()
    stream.subscribe(CreditWindow(8, 1 << 20), sink.deliver, sink.on_detach)
    assert sink.items == [b"missed 2", b"2", b"3", b"4"]


def test_the_byte_bound_drops_the_oldest_but_never_the_newest() -> None:
    stream = _retaining(100, nbytes=4)
    stream.publish(b"ab")
    stream.publish(b"cd")  # exactly 4 bytes: both kept
    assert stream.retained() == 2 and stream.missed_count == 0
    stream.publish(b"e")
    assert stream.retained() == 2 and stream.missed_count == 1  # "ab" went
    stream.publish(b"much too large")
    assert stream.retained() == 1 and stream.missed_count == 3  # alone, over the bound, kept
    sink = Sink()
    stream.subscribe(CreditWindow(8, 1 << 20), sink.deliver, sink.on_detach)
    assert sink.items == [b"missed 3", b"much too large"]


def test_a_stream_closed_unread_is_read_by_its_first_subscriber_within_its_credit() -> None:
    stream = _retaining(10)
    for i in range(4):
        stream.publish(b"%d" % i)
    stream.close()
    assert stream.closed and stream.unread
    sink = Sink()
    sub = stream.subscribe(CreditWindow(2, 1 << 20), sink.deliver, sink.on_detach)
    assert sink.items == [b"0", b"1"] and not sink.detached.is_set()  # its window, no more
    stream.ack(sub, 2)
    assert sink.items == [b"0", b"1", b"2", b"3"]
    assert [r.kind for r in sink.reasons] == [ExitKind.NORMAL]  # left once all was delivered
    assert not stream.unread
    with pytest.raises(PhloemError) as info:
        stream.subscribe(CreditWindow(), Sink().deliver)
    assert info.value.kind == "closed"


def test_a_stream_closed_abnormally_or_dropped_keeps_nothing_for_a_reader() -> None:
    stopped = _retaining(10)
    stopped.publish(b"x")
    stopped.close(ExitReason.shutdown())
    assert not stopped.unread
    with pytest.raises(PhloemError):
        stopped.subscribe(CreditWindow(), Sink().deliver)
    dropped = _retaining(10)
    dropped.publish(b"x")
    assert dropped.drop_retained() == 1 and not dropped.retaining
    sink = Sink()
    dropped.subscribe(CreditWindow(), sink.deliver)
    assert sink.items == []
    with pytest.raises(ValueError):
        CreditStream("bad", retain_messages=-1)
