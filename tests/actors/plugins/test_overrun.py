"""An in-process hook past its deadline is abandoned but keeps running (Python cannot stop
a thread): the run goes on at the deadline, and the slot counts the call as overrunning
until it returns — `phloem plugin list` shows the count. `isolate = true` kills instead."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from phloem.actors.plugins.service import info_of
from phloem.agents import LlmAgent
from phloem.agents.hooks import PluginContext
from phloem.cli.plugins import describe
from phloem.models import ScriptedModel
from phloem.plugins import Plugin
from tests.helpers import wait_until

from .helpers import chain, run, slot

pytestmark = pytest.mark.timeout(60)


class Slow(Plugin):
    """A before_model hook that blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.finished = threading.Event()

    def before_model(self, ctx: PluginContext, value: Any) -> Any:
        self.release.wait(30)
        self.finished.set()
        return None


def test_an_abandoned_in_process_hook_is_counted_until_it_returns() -> None:
    plugin = Slow()
    slow = slot("slow", plugin, timeout_ms=200)
    started = time.monotonic()
    result = run(LlmAgent("f", "", ScriptedModel(["fine"])), chain(slow))
    assert result.ok and result.events[-1].text == "fine"  # failure "open": the run went on
    assert time.monotonic() - started < 20  # it did not wait for the hook
    assert slow.failures == 1 and slow.last_failure.startswith("plugin_timeout")
    assert slow.overrunning == 1 and not plugin.finished.is_set()  # still running
    assert "overrunning=1" in describe(info_of(slow))
    plugin.release.set()
    wait_until(lambda: slow.overrunning == 0, 30)
    assert plugin.finished.is_set()
    assert "overrunning" not in describe(info_of(slow))


def test_a_hook_answering_in_time_is_never_counted() -> None:
    plugin = Slow()
    plugin.release.set()
    quick = slot("quick", plugin, timeout_ms=20_000)
    assert run(LlmAgent("f", "", ScriptedModel(["fine"])), chain(quick)).ok
    assert quick.overrunning == 0 and quick.failures == 0
