"""Adapters and agent functions that plant canary secrets for `tests/test_secret_canaries.py`.

Every canary sits where a credential would: after a secret key, in a dict repr or JSON,
after `Bearer`/`Basic`. Each starts with `CANARY`, so one search finds any leak.
"""

from __future__ import annotations

import time
from typing import Any

from phloem.protocols.plan import Plan, Step
from phloem.protocols.result import Continue, Error, Fail, Ok
from tests.actors.planning.adapters import _doc

# one canary per shape, each looking like a real credential
API_KEY_ARG = "CANARY1apiKey0a1b2c3d"
BEARER = "CANARY2Bearer.4e5f6a7b8c"
JSON_TOKEN = "CANARY3jsonTok9d8c7b6a"
BASIC = "CANARY4BasicQ2FuYXJ5OnB3"
CANCEL_KEY = "CANARY5cancelPw1234"
CANCEL_TEXT = "CANARY6cancelTxt5678"
DICT_REPR = "CANARY7dictRepr2468"
ISOLATED = "CANARY8isolated1357"
CHILD = "CANARY9childRaise8642"


class CanaryPlanner:
    def plan(self, target: Any, goal: Any, context: Any, config: Any) -> Any:
        mode = target["mode"]
        if mode == "raise":
            raise RuntimeError(f"login failed: api_key='{API_KEY_ARG}' was refused")
        if mode == "raise_bearer":
            raise PermissionError(f"401 from upstream; sent Authorization: Bearer {BEARER}")
        if mode == "error_repr":
            return Error(
                {
                    "why": f"upstream said {{'api_key': '{DICT_REPR}'}}",
                    "body": f'{{"token": "{JSON_TOKEN}", "error": "expired"}}',
                    "header": f"Authorization: Basic {BASIC}",
                }
            )
        if mode == "steps":
            return Ok(_doc(goal, 0, [{"op": op} for op in target["ops"]]))
        raise ValueError(f"unknown mode {mode}")

    def review(
        self,
        target: Any,
        plan: Plan,
        step: Step,
        observation: dict[str, Any],
        context: Any,
        config: Any,
    ) -> Any:
        if observation["status"] == "error":
            return Fail({"because": f"gave up; proxy wanted Proxy-Authorization: Basic {BASIC}"})
        return Continue()


class CanaryExecutor:
    def execute(self, target: Any, step: Step, context: Any, config: Any) -> Any:
        op = step.action["op"]
        if op == "raise_json":
            raise ValueError(f'bad response {{"token": "{JSON_TOKEN}"}}')
        if op == "error_bearer":
            return Error({"why": f"Authorization: Bearer {BEARER}", "password": CANCEL_KEY})
        if op == "sleep":
            time.sleep(30)
            return Ok("slept")
        raise ValueError(f"unknown op {op}")


def bearer() -> None:
    raise RuntimeError(f"upstream said Authorization: Bearer {BEARER}")


def basic() -> None:
    raise PermissionError(f"proxy refused Proxy-Authorization: Basic {BASIC} (sent Basic {BASIC})")


def json_token() -> None:
    raise ValueError(f'provider answered {{"token": "{JSON_TOKEN}", "error": "expired"}}')


def dict_repr() -> None:
    raise KeyError(f"config was {{'api_key': '{DICT_REPR}', 'model': 'm'}}")


def isolated() -> None:
    raise RuntimeError(f"child failed with {{'secret': '{ISOLATED}'}} and api_key={CHILD}")
