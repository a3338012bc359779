"""Telemetry benchmarks: the cost of one model call with telemetry on (spans and metrics
exported by the real OTLP/HTTP exporter to a receiver on 127.0.0.1) against the same call
with telemetry off, measured in the same run — for an in-process model (the overhead
alone) and for a model over loopback HTTP (the overhead beside a real request); and one
agent run with telemetry exporting to a dead collector against the same run with it off
(a collector that is down must not slow a run)."""

from __future__ import annotations

import socket
from typing import Any

from phloem.actors.telemetry.genai import GenAIInterceptor
from phloem.actors.telemetry.providers import TelemetryRuntime
from phloem.actors.telemetry.settings import TelemetryConfig
from phloem.agents import InlineExecutor, LlmAgent, run_agent
from phloem.base import telemetry
from phloem.models.interceptors import NO_INTERCEPTORS, CallInfo, Interceptors
from phloem.models.openai import OpenAIModel
from phloem.protocols.content import Content, ModelRequest, ModelResponse, Usage
from tests.actors.telemetry.receiver import Receiver
from tests.models.fake_provider import FakeProvider, chat_text
from tests.perf.common import median_seconds, row

ANSWER = ModelResponse(
    content=Content.model("ok"),
    finish_reason="STOP",
    usage=Usage(input_tokens=9, output_tokens=3),
    model_version="m",
    response_id="r-1",
)


class _Instant:
    """A model that answers at once (the call's own cost is nil)."""

    provider_name = "bench"
    operation_name = "chat"
    model = "instant"

    def generate(self, request: ModelRequest) -> ModelResponse:
        return ANSWER


class _Endless(FakeProvider):
    """The fake provider, answering every request with the same chat completion."""

    def __init__(self) -> None:
        super().__init__()
        self.add(*[chat_text("ok") for _ in range(5000)])


def _per_call(chain: Interceptors, model: Any, repeat: int) -> float:
    info = CallInfo(kind="agent", agent="bench").for_model(model)
    request = ModelRequest(contents=(Content.user("hi"),))
    return median_seconds(lambda: chain.model(info, request, model.generate), repeat=repeat)


def _agent_run(chain: Interceptors) -> float:
    """Median time of one LlmAgent run (one model call, inline) through `chain`."""
    agent = LlmAgent("bench", "", _Instant())
    return median_seconds(
        lambda: run_agent(agent, input="hi", executor=InlineExecutor(), interceptors=chain),
        repeat=500,
    )


def _dead_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def run() -> list[dict[str, Any]]:
    rows = _per_model_call()
    off = _agent_run(NO_INTERCEPTORS)
    config = TelemetryConfig(enabled=True, endpoint=_dead_endpoint(), export_timeout_s=1.0)
    runtime = TelemetryRuntime(config)
    assert telemetry.install(runtime)
    try:
        dead = _agent_run(Interceptors([GenAIInterceptor()]))
    finally:
        telemetry.uninstall(runtime)
        runtime.shutdown(0.5)
    counts = runtime.bus.counts()
    print(f"   dead collector: dropped {counts['dropped_by_reason']}", flush=True)
    rows.append(
        row(
            "telemetry.agent_run_dead_collector",
            dead * 1e6,
            "us",
            "same run, telemetry off",
            off * 1e6,
            None,
        )
    )
    return rows


def _per_model_call() -> list[dict[str, Any]]:
    instant = _Instant()
    with Receiver() as rx, _Endless() as fake:
        http_model = OpenAIModel(
            "chat_completions", "fake", fake.base_url + "/v1", chat_token_limit="max_tokens"
        )
        off_instant = _per_call(NO_INTERCEPTORS, instant, 5000)
        off_http = _per_call(NO_INTERCEPTORS, http_model, 300)
        runtime = TelemetryRuntime(TelemetryConfig(enabled=True, endpoint=rx.endpoint))
        assert telemetry.install(runtime)
        try:
            chain = Interceptors([GenAIInterceptor()])
            on_instant = _per_call(chain, instant, 5000)
            on_http = _per_call(chain, http_model, 300)
        finally:
            telemetry.uninstall(runtime)
            runtime.shutdown(5.0)
            http_model.close()
        counts = runtime.bus.counts()
    print(f"   exported {counts['exported']} dropped {counts['dropped_by_reason']}", flush=True)
    return [
        row(
            "telemetry.model_call_in_process_on",
            on_instant * 1e6,
            "us",
            "same call, telemetry off",
            off_instant * 1e6,
            None,
        ),
        row(
            "telemetry.model_call_overhead",
            (on_instant - off_instant) * 1e6,
            "us",
            "loopback HTTP model call, telemetry off",
            off_http * 1e6,
            None,
        ),
        row(
            "telemetry.model_call_http_on",
            on_http * 1e6,
            "us",
            "same call, telemetry off",
            off_http * 1e6,
            None,
        ),
    ]
