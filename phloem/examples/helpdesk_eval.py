"""A small helpdesk `LlmAgent` on a scripted model, and its eval set (`make run`).

`HelpdeskModel` stands in for a provider: it answers from the request alone (no state),
so any number of runs can share it at any concurrency. Asked about the weather in a city
it calls the `get_weather` tool, then reports the tool's answer; it greets back; it
answers anything else with a fixed refusal. `helpdesk` is the `LlmAgent` registered in
`conf/phloem.toml` as `[agents.components] helpdesk`.

The eval set is `conf/examples/eval/helpdesk.evalset.json` (phloem's format) with its
criteria in `conf/examples/eval/criteria.json`; `make run` runs it through the daemon and
prints the Markdown report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from phloem.agents.llm_agent import LlmAgent
from phloem.protocols.content import ModelRequest, ModelResponse, Part
from phloem.protocols.errors import ErrorKind, PhloemError

EXAMPLE_DIR = Path("conf/examples/eval")
EVALSET = EXAMPLE_DIR / "helpdesk.evalset.json"
CRITERIA = EXAMPLE_DIR / "criteria.json"
TEMPERATURES_C = {"oslo": 4, "lisbon": 19, "cairo": 31, "lima": 17}
_WEATHER = re.compile(r"weather in ([A-Za-z ]+?)\??$", re.IGNORECASE)


def get_weather(city: str) -> dict[str, Any]:
    """The current temperature in a city, in degrees Celsius."""
    temperature = TEMPERATURES_C.get(city.strip().lower())
    if temperature is None:
        return {"city": city, "error": "unknown city"}
    return {"city": city, "temperature_c": temperature}


class HelpdeskModel:
    """A deterministic `Model`: the answer depends only on the request."""

    name = "helpdesk-scripted"

    def generate(self, request: ModelRequest) -> ModelResponse:
        last = request.contents[-1] if request.contents else None
        responses = [
            p.function_response for p in (last.parts if last else ()) if p.function_response
        ]
        if responses:
            result = responses[0].response
            if "temperature_c" in result:
                return ModelResponse.from_text(
                    f"It is {result['temperature_c']} degrees Celsius in {result['city']}."
                )
            return ModelResponse.from_text(f"Sorry, I have no weather for {result['city']}.")
        text = last.text.strip() if last is not None else ""
        match = _WEATHER.search(text)
        if match:
            call = Part.from_function_call("get_weather", {"city": match.group(1).strip()})
            return ModelResponse.from_parts([call])
        if text.lower().startswith(("hello", "hi")):
            return ModelResponse.from_text("Hello! How can I help you today?")
        return ModelResponse.from_text("Sorry, I can only help with the weather.")


def helpdesk() -> LlmAgent:
    """The `helpdesk` agent (a factory, as `[agents.components]` accepts)."""
    return LlmAgent(
        "helpdesk",
        "Answers weather questions with the get_weather tool",
        HelpdeskModel(),
        "You are a helpful helpdesk. Use get_weather for weather questions.",
        tools=[get_weather],
    )


def _eval(client: Any) -> str:
    report = client.run_eval(EVALSET, agent="helpdesk", criteria=CRITERIA)
    from phloem.protocols.evalreport import encode_markdown

    if report.status != "passed":
        raise PhloemError(ErrorKind.EXAMPLE_FAILED, f"helpdesk eval {report.status}")
    return encode_markdown(report).decode()


def steps() -> list[Any]:
    from phloem.examples.run_all import Step

    return [Step("eval helpdesk (Markdown report)", _eval)]
