"""Eval fixtures: files in ADK's exact shapes, and small agents for runs.

The ADK documents follow ADK's published schema (`EvalSet` / `EvalCase` / `Invocation`
with `intermediate_data.tool_uses`, genai `Content` parts), once in snake_case as
`adk web` writes them and once in camelCase (pydantic's aliases), plus a legacy
`*.test.json` list and `test_config.json` criteria.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from phloem.agents import Agent, Event, InvocationContext, LlmAgent
from phloem.protocols.content import Content, ModelRequest, ModelResponse, Part

ADK_SNAKE: dict[str, Any] = {
    "eval_set_id": "home_automation",
    "name": "Home automation",
    "description": "Turns devices on and off",
    "eval_cases": [
        {
            "eval_id": "turn_on_lamp",
            "conversation": [
                {
                    "invocation_id": "inv-1",
                    "user_content": {"parts": [{"text": "Turn on the lamp"}], "role": "user"},
                    "final_response": {
                        "parts": [{"text": "The lamp is on."}],
                        "role": "model",
                    },
                    "intermediate_data": {
                        "tool_uses": [
                            {
                                "id": "call-1",
                                "name": "set_device",
                                "args": {"device": "lamp", "on": True},
                            }
                        ],
                        "tool_responses": [],
                        "intermediate_responses": [],
                    },
                    "creation_timestamp": 1718000000.0,
                }
            ],
            "session_input": {"app_name": "home", "user_id": "u1", "state": {"room": "den"}},
            "creation_timestamp": 1718000000.0,
        },
        {
            "eval_id": "status_then_off",
            "conversation": [
                {
                    "invocation_id": "inv-2",
                    "user_content": {"parts": [{"text": "Is the fan on?"}], "role": "user"},
                    "final_response": {"parts": [{"text": "The fan is off."}], "role": "model"},
                    "intermediate_data": {
                        "tool_uses": [],
                        "tool_responses": [],
                        "intermediate_responses": [],
                    },
                    "creation_timestamp": 1718000001.0,
                },
                {
                    "invocation_id": "inv-3",
                    "user_content": {"parts": [{"text": "Turn off the heater"}], "role": "user"},
                    "final_response": {"parts": [{"text": "The heater is off."}], "role": "model"},
                    "intermediate_data": {
                        "tool_uses": [
                            {"name": "set_device", "args": {"device": "heater", "on": False}}
                        ],
                        "tool_responses": [{"name": "set_device", "response": {"ok": True}}],
                        "intermediate_responses": [],
                    },
                    "creation_timestamp": 1718000002.0,
                },
            ],
            "session_input": None,
            "final_session_state": {"heater": "off"},
            "creation_timestamp": 1718000001.0,
        },
    ],
    "creation_timestamp": 1718000000.0,
}


def camel(value: Any, inside_data: bool = False) -> Any:
    """`value` with ADK's keys in camelCase (tool `args` and session `state` untouched)."""
    if isinstance(value, list):
        return [camel(v, inside_data) for v in value]
    if not isinstance(value, dict) or inside_data:
        return value
    out = {}
    for key, item in value.items():
        head, *rest = key.split("_")
        name = head + "".join(p.title() for p in rest)
        out[name] = camel(item, key in ("args", "state", "response", "final_session_state"))
    return out


ADK_CAMEL = camel(ADK_SNAKE)

ADK_LEGACY = [
    {
        "query": "Turn on the lamp",
        "expected_tool_use": [
            {"tool_name": "set_device", "tool_input": {"device": "lamp", "on": True}}
        ],
        "expected_intermediate_agent_responses": [],
        "reference": "The lamp is on.",
    },
    {
        "query": "Is the fan on?",
        "expected_tool_use": [],
        "expected_intermediate_agent_responses": [],
        "reference": "The fan is off.",
    },
]

ADK_TEST_CONFIG = {"criteria": {"tool_trajectory_avg_score": 1.0, "response_match_score": 0.8}}


def write_json(path: Any, value: Any) -> Any:
    path.write_text(json.dumps(value))
    return path


def phloem_set(
    cases: list[dict[str, Any]], set_id: str = "set", version: str = "1"
) -> dict[str, Any]:
    return {"schema_version": 2, "id": set_id, "version": version, "cases": cases}


def case(cid: str, *turns: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "turns": list(turns)}


# --- agents used by the run tests ------------------------------------------------------


class EchoAgent(Agent):
    """Answers every message with its own text (upper-cased if the state says so); a
    message `fail` makes it yield an error event, `sleep N` makes it wait N seconds (or
    until cancelled)."""

    def __init__(self, name: str = "echo_agent") -> None:
        super().__init__(name, "echoes")
        self.live = 0
        self.peak = 0
        self.lock = threading.Lock()

    def run(self, ctx: InvocationContext) -> Iterator[Event]:
        text = ctx.user_content.text if ctx.user_content is not None else ""
        with self.lock:
            self.live += 1
            self.peak = max(self.peak, self.live)
        try:
            if text == "fail":
                yield self.error_event(ctx, "agent_error", "asked to fail")
                return
            if text.startswith("sleep "):
                ctx.cancel.wait(float(text.split()[1]))
            else:
                time.sleep(0.05)
            if ctx.state.get("shout"):
                text = text.upper()
            yield Event(
                author=self.name, invocation_id=ctx.invocation_id, content=Content.model(text)
            )
        finally:
            with self.lock:
                self.live -= 1


def sleepy(seconds: float, pid_file: str) -> str:
    """A FunctionAgent body for a process child: records its pid, then sleeps."""
    with open(pid_file, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    return "woke"


class HomeModel:
    """A stateless stand-in model for the ADK fixtures: switches devices with
    `set_device`, then says what it did; answers the fan question directly."""

    def generate(self, request: ModelRequest) -> ModelResponse:
        last = request.contents[-1]
        done = [p.function_response for p in last.parts if p.function_response is not None]
        if done:
            args = done[0].response
            return ModelResponse.from_text(f"The {args['device']} is {args['state']}.")
        text = last.text
        for verb, on in (("Turn on the ", True), ("Turn off the ", False)):
            if text.startswith(verb):
                device = text.removeprefix(verb)
                call = Part.from_function_call("set_device", {"device": device, "on": on})
                return ModelResponse.from_parts([call])
        return ModelResponse.from_text("The fan is off.")


def set_device(device: str, on: bool) -> dict[str, Any]:
    """Switch a device on or off."""
    return {"device": device, "state": "on" if on else "off"}


def home_agent() -> LlmAgent:
    return LlmAgent("home", "home automation", HomeModel(), tools=[set_device])
