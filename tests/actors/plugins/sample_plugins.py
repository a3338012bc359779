"""Plugins the plugin tests load by `module:attribute` or pickle into process children."""

from __future__ import annotations

import os
import time
from typing import Any

from phloem.plugins import Amend, Plugin, PluginContext, Return


class Hog(Plugin):
    """Allocates far past any sane cap in before_model."""

    def before_model(self, ctx: PluginContext, value: Any) -> Any:
        blocks = []
        while True:
            blocks.append(bytearray(64 * 1024 * 1024))


class Hang(Plugin):
    def before_model(self, ctx: PluginContext, value: Any) -> Any:
        time.sleep(3600)


class Pid(Plugin):
    """Answers its own pid in a model response (intervene)."""

    def before_model(self, ctx: PluginContext, value: Any) -> Any:
        return Return(f"pid {os.getpid()}")


class Observe(Plugin):
    def before_model(self, ctx: PluginContext, value: Any) -> Any:
        return None

    def after_model(self, ctx: PluginContext, value: Any) -> Any:
        return None


class Shout(Plugin):
    """Upper-cases the system instruction."""

    def before_model(self, ctx: PluginContext, value: Any) -> Any:
        import msgspec

        system = (value.system_instruction or "").upper() or "SHOUT"
        return Amend(msgspec.structs.replace(value, system_instruction=system))


class Counter:
    """A stateful plugin: counts model calls; `handle` raises on a `boom` prompt."""

    hooks = ("before_model",)

    def init(self, config: dict[str, Any]) -> dict[str, Any]:
        return {"count": int(config.get("start", 0)), "pad": ""}

    def handle(self, hook: str, ctx: PluginContext, value: Any, state: dict[str, Any]) -> Any:
        text = value.contents[-1].text if value.contents else ""
        if "boom" in text:
            raise RuntimeError("boom")
        if "hog" in text:
            blocks = []
            while True:
                blocks.append(bytearray(64 * 1024 * 1024))
        if "sleep" in text:
            time.sleep(float(text.split()[-1]))
        if "grow" in text:
            return None, {"count": state["count"], "pad": "x" * int(text.split()[-1])}
        return None, {"count": state["count"] + 1, "pad": state["pad"]}

    def terminate(self, state: dict[str, Any]) -> None:
        return None


def audit_factory(config: dict[str, Any]) -> Plugin:
    """A factory `[plugins.NAME] plugin = ...` may name: called with the config table."""
    plugin = Observe()
    plugin.label = config.get("label", "")  # type: ignore[attr-defined]
    return plugin


class Overlap:
    """A stateful plugin that records how many of its calls ever ran at once."""

    hooks = ("before_model",)
    active = 0
    most = 0

    def init(self, config: dict[str, Any]) -> int:
        if config.get("slow_init"):
            time.sleep(float(config["slow_init"]))
        return 0

    def handle(self, hook: str, ctx: PluginContext, value: Any, state: int) -> Any:
        cls = type(self)
        cls.active += 1
        cls.most = max(cls.most, cls.active)
        time.sleep(0.2)
        cls.active -= 1
        return None, state + 1


class Broken(Plugin):
    """Raises in before_agent (an open failure: the run goes on with a warning)."""

    def before_agent(self, ctx: PluginContext, value: Any) -> Any:
        raise RuntimeError("broken plugin")


def one() -> int:
    """A function agent's function."""
    return 1


def failing_factory(config: dict[str, Any]) -> Plugin:
    raise ValueError("bad plugin config, api_key=sk-abcdefghijklmnopqrstu")
