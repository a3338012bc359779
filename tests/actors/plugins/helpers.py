"""Small builders for the plugin tests: slots, chains and runs without a tree."""

from __future__ import annotations

from typing import Any

import msgspec

from phloem.actors.plugins.interceptor import PluginInterceptor
from phloem.actors.plugins.service import make_slot
from phloem.actors.plugins.settings import PluginOptions
from phloem.actors.plugins.slots import PluginSlot
from phloem.agents import LlmAgent
from phloem.agents.executor import InlineExecutor
from phloem.agents.runner import AgentRun, run_agent
from phloem.models import ScriptedModel
from phloem.models.interceptors import Interceptors
from phloem.protocols.content import ModelResponse, Part


def slot(name: str, plugin: Any, **options: Any) -> PluginSlot:
    return make_slot(name, plugin, msgspec.convert(options, PluginOptions), "test")


def chain(*slots: PluginSlot) -> Interceptors:
    return Interceptors([PluginInterceptor(tuple(slots))])


def run(agent: Any, chain: Interceptors, input: str = "go") -> AgentRun:
    return run_agent(agent, input=input, interceptors=chain, executor=InlineExecutor())


def lookup(company: str) -> dict[str, Any]:
    """Look up a filing."""
    return {"filing": f"{company} 10-K"}


def tool_then_text(args: dict[str, Any] | None = None) -> ScriptedModel:
    call = ModelResponse.from_parts(
        [Part.from_function_call("lookup", args or {"company": "ACME"}, "c1")]
    )
    return ScriptedModel([call, "done"])


def tool_agent(**kwargs: Any) -> LlmAgent:
    return LlmAgent("f", "", tool_then_text(kwargs.pop("args", None)), tools=[lookup], **kwargs)


def tool_answer(run: AgentRun) -> Any:
    for event in run.events:
        for part in event.content.parts if event.content else ():
            if part.function_response is not None:
                return part.function_response.response
    raise AssertionError("no tool answer")
