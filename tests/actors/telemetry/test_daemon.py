"""Telemetry of a real daemon: a client's span is the parent of the daemon's spans,
`phloem status --json` shows the export counts, a 10,000-span burst against a slow
collector keeps the daemon's memory bounded, and its shutdown drains within the deadline."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import psutil
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

import phloem
from tests.helpers import DaemonProc, run_cli, short_tmpdir, wait_until
from tests.models.fake_provider import FakeProvider, chat_text

from .receiver import Receiver

pytestmark = pytest.mark.timeout(120)

CONFIG = """
[logging]
level = "info"
format = "json"

[telemetry]
enabled = true
endpoint = "{endpoint}"
flush_interval_s = 0.05
metric_interval_s = 3600
export_timeout_s = {export_timeout_s}
drain_timeout_s = 1.0
max_queue_events = {max_queue_events}
batch_size = 32

[providers.fake]
protocol = "openai-chat"
model = "fake-chat"
base_url = "{fake}/v1"
chat_token_limit = "max_tokens"

[agents.llm.analyst]
provider = "fake"

[agents.functions.burst]
fn = "tests.actors.telemetry.components:burst"
input_keys = ["n"]
"""


def start_daemon(
    endpoint: str, fake: str, *, export_timeout_s: float = 5.0, max_queue_events: int = 4096
) -> DaemonProc:
    d = short_tmpdir()
    path = d / "phloem.toml"
    path.write_text(
        CONFIG.format(
            endpoint=endpoint,
            fake=fake,
            export_timeout_s=export_timeout_s,
            max_queue_events=max_queue_events,
        )
    )
    return DaemonProc(d / "run" / "phloem.sock", path).wait_ready()


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def status_json(daemon: DaemonProc) -> dict[str, object]:
    out = run_cli("status", "--json", "--socket", str(daemon.socket))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_the_daemon_adopts_the_callers_span_and_status_shows_the_counts(
    fake: FakeProvider,
) -> None:
    fake.add(chat_text("fine"), chat_text("fine again"))
    with Receiver() as rx:
        daemon = start_daemon(rx.endpoint, fake.base_url)
        try:
            tracer = TracerProvider(sampler=ALWAYS_ON).get_tracer("caller")
            with (
                phloem.Client.connect(daemon.socket) as client,
                tracer.start_as_current_span("caller-op") as caller,
            ):
                run = client.run_agent("analyst", input="hi")
            assert run.ok, run.outcome
            assert run.outcome.usage.input_tokens == 9 and run.outcome.usage.output_tokens == 3
            wait_until(
                lambda: rx.span_named("invoke_agent analyst") and rx.span_named("chat fake-chat"),
                20,
            )
            (agent,) = rx.span_named("invoke_agent analyst")
            (chat,) = rx.span_named("chat fake-chat")
            ctx = caller.get_span_context()
            assert agent.trace_id == format(ctx.trace_id, "032x")
            assert agent.parent_span_id == format(ctx.span_id, "016x")
            assert chat.parent_span_id == agent.span_id
            assert fake.requests[0].headers["traceparent"].split("-")[2] == chat.span_id
            wait_until(lambda: status_json(daemon)["telemetry"]["exported"] >= 2, 20)  # type: ignore[index]
            t = status_json(daemon)["telemetry"]
            assert isinstance(t, dict) and t["enabled"] is True and t["failed"] == 0
            assert set(t["dropped_by_reason"]) == {"queue_full", "export_failed", "shutdown"}
            text = run_cli("status", "--socket", str(daemon.socket)).stdout
            assert "telemetry" in text and "exported" in text

            # the asyncio client carries its caller's context the same way
            async def from_asyncio() -> tuple[object, object]:
                async with await phloem.AsyncClient.connect(daemon.socket) as client:
                    with tracer.start_as_current_span("async-caller") as span:
                        return await client.run_agent("analyst", input="again"), span

            run2, async_caller = asyncio.run(from_asyncio())
            assert run2.ok  # type: ignore[attr-defined]
            flushed = run_cli("telemetry", "flush", "--json", "--socket", str(daemon.socket))
            assert flushed.returncode == 0, flushed.stderr
            assert json.loads(flushed.stdout)["exported"] >= 4
            sc = async_caller.get_span_context()  # type: ignore[attr-defined]
            second = [s for s in rx.span_named("invoke_agent analyst") if s is not agent]
            assert len(second) == 1 and second[0].parent_span_id == format(sc.span_id, "016x")
            plain = run_cli("telemetry", "flush", "--socket", str(daemon.socket)).stdout
            assert "exported" in plain and "failed exports" in plain
        finally:
            assert daemon.stop() == 0


def test_a_burst_against_a_slow_collector_keeps_the_daemon_bounded(fake: FakeProvider) -> None:
    # a collector taking 30 s per request (3x the 10 s: margin for a loaded machine)
    with Receiver(delay=30.0) as rx:
        daemon = start_daemon(rx.endpoint, fake.base_url, export_timeout_s=2.0, max_queue_events=64)
        try:
            process = psutil.Process(daemon.proc.pid)
            with phloem.Client.connect(daemon.socket) as client:
                client.run_agent("burst", state={"n": 100})  # warm up (imports, threads)
                rss_before = process.memory_info().rss
                started = time.monotonic()
                run = client.run_agent("burst", state={"n": 10_000})
                elapsed = time.monotonic() - started
            assert run.ok, run.outcome
            assert elapsed < rx.delay  # no span waited for the collector
            rss_after = process.memory_info().rss
            assert rss_after - rss_before < 64 * 1024 * 1024
            t = status_json(daemon)["telemetry"]
            assert isinstance(t, dict)
            assert t["peak_queued"] <= 64
            # each worker gets one batch of 32 out per 2 s export timeout: nearly all drop
            assert t["dropped_by_reason"]["queue_full"] > 9_000
            assert t["offered"] == t["exported"] + t["dropped"] + t["queued"] + t["inflight"]
            stopping = time.monotonic()
            assert daemon.stop() == 0
            # drain_timeout_s = 1: the daemon does not wait out the collector
            assert time.monotonic() - stopping < rx.delay
            stopped = next(
                json.loads(line) for line in daemon.lines if '"telemetry_stopped"' in line
            )
            assert stopped["dropped_by_reason"]["shutdown"] >= 0
            assert stopped["offered"] >= 10_100
        finally:
            daemon.stop()
