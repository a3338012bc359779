"""A plugin never sees an API key or a session-resumption handle (canary test)."""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import dill
import pytest

import phloem
from phloem.agents import LlmAgent
from phloem.models.gemini import GeminiModel
from phloem.models.interceptors import CallInfo
from phloem.plugins import HOOKS, Plugin, PluginContext
from phloem.protocols.content import ModelRequest
from tests.models.fake_provider import FakeProvider, gemini_call, gemini_text

from .helpers import chain, slot

pytestmark = pytest.mark.timeout(60)

API_KEY = "AIzaCANARYKEY0123456789abcdefghijklmnopq"
HANDLE = "resume-CANARY-HANDLE-77"


class Everything(Plugin):
    """Implements every hook and keeps a serialized copy of all it is handed."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []


def _recorder(hook: str) -> Callable[..., None]:
    def record(self: Everything, ctx: PluginContext, value: Any) -> None:
        self.seen.append(dill.dumps((ctx, value, repr(ctx), repr(value))))

    record.__name__ = hook
    return record


for _hook in HOOKS:
    setattr(Everything, _hook, _recorder(_hook))


def lookup_rating(company: str) -> str:
    """Credit rating of a company."""
    return "BBB+"


def test_no_api_key_or_resumption_handle_reaches_a_plugin() -> None:
    spy = Everything()
    with FakeProvider() as fake, phloem.Tree.start() as tree:
        fake.add(gemini_call("lookup_rating", {"company": "Acme"}), gemini_text("Acme is BBB+."))
        tree.add_plugin("spy", spy)
        model = GeminiModel("gemini-test", API_KEY, base_url=fake.base_url)
        agent = LlmAgent("analyst", "", model, "Rate {company}.", tools=[lookup_rating])
        state = {"company": "Acme", "resumption_handle": HANDLE, "api_key": API_KEY}
        run = tree.run_agent(agent, input="How risky is Acme?", state=state)
        assert run.ok, run.outcome
        assert fake.requests[0].query.find(API_KEY) >= 0 or any(
            API_KEY in v for v in fake.requests[0].headers.values()
        )  # the key did go to the provider
    hooks_seen = len(spy.seen)
    assert hooks_seen >= 8
    blob = b"".join(spy.seen)
    assert API_KEY.encode() not in blob and HANDLE.encode() not in blob


def test_call_metadata_loses_credentials_and_handles_before_a_plugin_sees_it() -> None:
    spy = Everything()
    info = CallInfo(
        kind="model",
        agent="a",
        metadata=MappingProxyType(
            {
                "api_key": API_KEY,
                "resumption_handle": HANDLE,
                "session_handle": HANDLE,
                "region": "eu",
            }
        ),
    )
    chain(slot("spy", spy)).model(info, ModelRequest(), lambda r: _answer())
    contexts = [dill.loads(b)[0] for b in spy.seen]
    assert contexts and all(dict(c.metadata) == {"region": "eu"} for c in contexts)


def _answer() -> Any:
    from phloem.protocols.content import ModelResponse

    return ModelResponse.from_text("ok")
