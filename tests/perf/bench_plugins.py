"""Plugin benchmarks: the overhead of 4 observing plugins (before_model + after_model
each) on one scripted model call through the interceptor chain — in process and with
`isolate = true` (a capped process child per hook call) — beside the bare call."""

from __future__ import annotations

from typing import Any

import msgspec

from phloem.actors.plugins.interceptor import PluginInterceptor
from phloem.actors.plugins.service import make_slot
from phloem.actors.plugins.settings import PluginOptions
from phloem.models import ScriptedModel
from phloem.models.interceptors import CallInfo, Interceptors
from phloem.protocols.content import Content, ModelRequest
from phloem.supervision.childcall import call_in_child
from phloem.supervision.spec import Limits
from tests.actors.plugins.sample_plugins import Observe
from tests.perf.common import median_seconds, row

PLUGINS = 4


def _chain(**options: Any) -> Interceptors:
    checked = msgspec.convert(options, PluginOptions)
    slots = tuple(make_slot(f"p{i}", Observe(), checked, "bench") for i in range(PLUGINS))
    return Interceptors([PluginInterceptor(slots)])


def run() -> list[dict[str, Any]]:
    request = ModelRequest(contents=(Content.user("hello"),))
    info = CallInfo(kind="model", agent="bench", target="ScriptedModel")
    model = ScriptedModel(["hi"] * 1_000_000)
    bare = median_seconds(lambda: model.generate(request), repeat=2000)
    in_process = _chain()
    plugged = median_seconds(lambda: in_process.model(info, request, model.generate), repeat=1000)
    isolated = _chain(isolate=True, timeout_ms=30_000)
    child = median_seconds(
        lambda: isolated.model(info, request, model.generate), repeat=10, warmup=2
    )
    # the floor of isolation itself: as many bare capped child calls (of a builtin, so
    # the child imports nothing) as the hooks made
    limits = Limits(max_memory_bytes=512 * 1024 * 1024)
    one_child = median_seconds(
        lambda: call_in_child(abs, 1, name="bench", limits=limits, timeout=30),
        repeat=10,
        warmup=2,
    )
    return [
        row(
            "plugins.4_observers_in_process",
            plugged * 1e6,
            "us",
            "bare model call",
            bare * 1e6,
            None,
        ),
        row("plugins.4_observers_isolated", child * 1e6, "us", "bare model call", bare * 1e6, None),
        row(
            "plugins.4_observers_isolated_vs_children",
            child * 1e6,
            "us",
            f"{2 * PLUGINS} bare call_in_child",
            2 * PLUGINS * one_child * 1e6,
            None,
        ),
    ]
