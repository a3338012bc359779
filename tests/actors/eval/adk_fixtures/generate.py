"""Writes the ADK fixtures beside this file with ADK's own pydantic models.

NOT run by the tests (google-adk is no dependency of phloem): the tests read the JSON
files this wrote, committed beside it. To regenerate, in a throwaway venv::

    python3 -m venv /tmp/venv-adk && /tmp/venv-adk/bin/pip install google-adk==2.13.0
    /tmp/venv-adk/bin/python tests/actors/eval/adk_fixtures/generate.py

Each document is dumped three ways: `model_dump_json()` (every field, nulls included,
snake_case: what ADK's own writers produce), with `exclude_none=True`, and with
`by_alias=True` (camelCase). The cases are those of `tests.actors.eval.fixtures`'s home
automation agent, so they run against it; a case with a `conversation_scenario` (a user
simulator's plan), rubrics and an expected final session state are there to be named
`not_evaluated`.
"""

from __future__ import annotations

from pathlib import Path

from google.adk.evaluation.conversation_scenarios import ConversationScenario
from google.adk.evaluation.eval_case import (
    EvalCase,
    IntermediateData,
    Invocation,
    InvocationEvent,
    InvocationEvents,
    SessionInput,
)
from google.adk.evaluation.eval_config import EvalConfig
from google.adk.evaluation.eval_metrics import (
    BaseCriterion,
    JudgeModelOptions,
    LlmAsAJudgeCriterion,
    ToolTrajectoryCriterion,
)
from google.adk.evaluation.eval_rubrics import Rubric, RubricContent
from google.adk.evaluation.eval_set import EvalSet
from google.adk.evaluation.simulation.llm_backed_user_simulator import (
    LlmBackedUserSimulatorConfig,
)
from google.genai import types

HERE = Path(__file__).parent


def text(role: str, value: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=value)])


def call(name: str, **args: object) -> types.FunctionCall:
    return types.FunctionCall(name=name, args=args)


def evalset() -> EvalSet:
    lamp = Invocation(
        invocation_id="inv-lamp",
        user_content=text("user", "Turn on the lamp"),
        final_response=text("model", "The lamp is on."),
        intermediate_data=IntermediateData(
            tool_uses=[call("set_device", device="lamp", on=True)],
        ),
        creation_timestamp=1718000000.0,
    )
    fan = Invocation(
        invocation_id="inv-fan",
        user_content=text("user", "Is the fan on?"),
        final_response=text("model", "The fan is off."),
        intermediate_data=IntermediateData(),
    )
    heater = Invocation(  # the other intermediate_data shape: the invocation's events
        invocation_id="inv-heater",
        user_content=text("user", "Turn off the heater"),
        final_response=text("model", "The heater is off."),
        intermediate_data=InvocationEvents(
            invocation_events=[
                InvocationEvent(
                    author="home",
                    content=types.Content(
                        role="model",
                        parts=[
                            types.Part(function_call=call("set_device", device="heater", on=False))
                        ],
                    ),
                )
            ]
        ),
    )
    scenario = ConversationScenario(
        starting_prompt="Turn on the lamp",
        conversation_plan="Ask for the lamp, then ask whether the fan is on, then stop.",
    )
    rubric = Rubric(
        rubric_id="polite",
        rubric_content=RubricContent(text_property="The answer is polite."),
    )
    return EvalSet(
        eval_set_id="home_adk",
        name="Home automation (written by ADK)",
        eval_cases=[
            EvalCase(
                eval_id="turn_on_lamp",
                conversation=[lamp],
                session_input=SessionInput(
                    app_name="home", user_id="u1", session_id="fixed-1", state={"room": "den"}
                ),
            ),
            EvalCase(
                eval_id="fan_then_heater",
                conversation=[fan, heater],
                rubrics=[rubric],
                final_session_state={"heater": "off"},
            ),
            EvalCase(eval_id="simulated_user", conversation_scenario=scenario),
        ],
        creation_timestamp=1718000000.0,
    )


def config() -> EvalConfig:
    judge = JudgeModelOptions(judge_model="a-judge-model", num_samples=3)
    return EvalConfig(
        criteria={
            "tool_trajectory_avg_score": ToolTrajectoryCriterion(
                threshold=1.0, match_type=ToolTrajectoryCriterion.MatchType.IN_ORDER
            ),
            "response_match_score": BaseCriterion(threshold=0.8),
            "final_response_match_v2": LlmAsAJudgeCriterion(
                threshold=0.5, judge_model_options=judge
            ),
            "safety_v1": 0.8,
        },
        user_simulator_config=LlmBackedUserSimulatorConfig(
            model="a-simulator-model", max_allowed_invocations=5
        ),
    )


def write(name: str, model: EvalSet | EvalConfig) -> None:
    stem, _, ext = name.partition(".")
    for suffix, kwargs in (
        ("", {}),
        (".exclude_none", {"exclude_none": True}),
        (".camel", {"by_alias": True}),
    ):
        path = HERE / f"{stem}{suffix}.{ext}"
        path.write_text(model.model_dump_json(indent=2, **kwargs) + "\n")  # type: ignore[arg-type]
        print("wrote", path)


if __name__ == "__main__":
    write("home.evalset.json", evalset())
    write("test_config.json", config())
