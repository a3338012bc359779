"""The four built-in plugins (`builtin = "..."` in `[plugins.NAME]`).

- `global_instruction`: adds one instruction (≤ 64 KiB) to every model request's system
  instruction, before or after it (`position = "prepend" | "append"`, separated by a blank
  line).
- `context_filter`: trims the contents a model request carries: keeps roles in
  `include_roles` (all when empty) and not in `exclude_roles`, then the last
  `max_messages`; `preserve_latest_user` keeps the latest user message whatever the rules,
  `preserve_system` keeps the system instruction (else `exclude_roles = ["system"]` drops it).
- `tool_retry`: on a tool's failure value, adds a structured retry hint for the model
  (`retry = {attempt, max_attempts, guidance}`) until `max_attempts` failures of that tool
  in that run, then `retry = {exhausted: true}`. It never calls a tool itself.
- `logging`: one content-free line per hook (run, agent, hook, target, sizes and kinds —
  never a prompt, an answer or an argument) through the project's log pipeline (`phloem.base.logs`).

Each validates its `config` table (unknown keys are errors) when it is built.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Annotated, Any, Literal

import msgspec

from phloem.agents.hooks import (
    Amend,
    Outcome,
    Plugin,
    PluginContext,
    ToolResult,
)
from phloem.base.logs import get_logger
from phloem.base.settings import Section
from phloem.protocols.content import ModelRequest
from phloem.protocols.errors import ErrorKind, PhloemError

MAX_INSTRUCTION_BYTES = 64 * 1024
MAX_GUIDANCE_BYTES = 4096
MAX_ATTEMPTS_RANGE = (1, 16)
MAX_TRACKED_RUNS = 4096  # (run, tool) failure counters tool_retry keeps, oldest dropped
SEPARATOR = "\n\n"

Instruction = Annotated[str, msgspec.Meta(max_length=MAX_INSTRUCTION_BYTES)]
Guidance = Annotated[str, msgspec.Meta(max_length=MAX_GUIDANCE_BYTES)]
Role = Literal["user", "model", "system"]


class GlobalInstructionConfig(Section, kw_only=True):
    instruction: Instruction
    position: Literal["prepend", "append"] = "prepend"

    def __post_init__(self) -> None:
        if len(self.instruction.encode()) > MAX_INSTRUCTION_BYTES:
            raise ValueError(f"instruction is over {MAX_INSTRUCTION_BYTES} bytes")


class ContextFilterConfig(Section, kw_only=True):
    max_messages: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 50
    include_roles: list[Role] = []
    exclude_roles: list[Role] = []
    preserve_system: bool = True
    preserve_latest_user: bool = True


class ToolRetryConfig(Section, kw_only=True):
    max_attempts: Annotated[
        int, msgspec.Meta(ge=MAX_ATTEMPTS_RANGE[0], le=MAX_ATTEMPTS_RANGE[1])
    ] = 3
    guidance: Guidance = (
        "The tool call failed. Read the error, correct the arguments and try again."
    )

    def __post_init__(self) -> None:
        if len(self.guidance.encode()) > MAX_GUIDANCE_BYTES:
            raise ValueError(f"guidance is over {MAX_GUIDANCE_BYTES} bytes")


class LoggingConfig(Section, kw_only=True):
    level: Literal["debug", "info", "warning"] = "info"


class GlobalInstruction(Plugin):
    def __init__(self, config: GlobalInstructionConfig) -> None:
        self.config = config

    def before_model(self, ctx: PluginContext, value: ModelRequest) -> Outcome:
        own, extra = value.system_instruction or "", self.config.instruction
        if not own:
            combined = extra
        elif self.config.position == "prepend":
            combined = extra + SEPARATOR + own
        else:
            combined = own + SEPARATOR + extra
        return Amend(msgspec.structs.replace(value, system_instruction=combined))


class ContextFilter(Plugin):
    def __init__(self, config: ContextFilterConfig) -> None:
        self.config = config

    def before_model(self, ctx: PluginContext, value: ModelRequest) -> Outcome:
        cfg = self.config
        contents = list(value.contents)
        latest_user = next((c for c in reversed(contents) if c.role == "user"), None)
        kept = [
            c
            for c in contents
            if (not cfg.include_roles or c.role in cfg.include_roles)
            and c.role not in cfg.exclude_roles
        ]
        kept = kept[-cfg.max_messages :]
        if cfg.preserve_latest_user and latest_user is not None and latest_user not in kept:
            kept = (
                [*kept[1:], latest_user] if len(kept) >= cfg.max_messages else [*kept, latest_user]
            )
        system = value.system_instruction
        if not cfg.preserve_system and "system" in cfg.exclude_roles:
            system = None
        if tuple(kept) == value.contents and system == value.system_instruction:
            return None
        return Amend(
            msgspec.structs.replace(value, contents=tuple(kept), system_instruction=system)
        )


class ToolRetry(Plugin):
    def __init__(self, config: ToolRetryConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._failures: OrderedDict[tuple[str, str], int] = OrderedDict()

    def on_tool_error(self, ctx: PluginContext, value: ToolResult) -> Outcome:
        key = (ctx.run_id or ctx.invocation_id, value.name)
        with self._lock:
            attempt = self._failures.pop(key, 0) + 1
            self._failures[key] = attempt
            while len(self._failures) > MAX_TRACKED_RUNS:
                self._failures.popitem(last=False)
        result = dict(value.result)
        if attempt >= self.config.max_attempts:
            result["retry"] = {"exhausted": True, "attempts": attempt}
        else:
            result["retry"] = {
                "attempt": attempt,
                "max_attempts": self.config.max_attempts,
                "guidance": self.config.guidance,
            }
        return Amend(result)


class Logging(Plugin):
    """Logs every hook it sees, content-free."""

    def __init__(self, config: LoggingConfig) -> None:
        self.level = config.level
        self.log = get_logger("phloem.plugins.logging")

    def _line(self, ctx: PluginContext, **fields: Any) -> None:
        getattr(self.log, self.level)(
            "plugin_hook",
            hook=ctx.hook,
            run=ctx.run_id,
            agent=ctx.agent,
            invocation=ctx.invocation_id,
            target=ctx.target,
            **fields,
        )

    def on_user_message(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx, parts=len(value.parts))

    def before_run(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx)

    def after_run(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx, status=value.status, events=value.events)

    def before_agent(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx)

    def after_agent(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx)

    def before_model(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx, contents=len(value.contents), tools=len(value.tools))

    def after_model(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx, calls=len(value.function_calls), finish=value.finish_reason)

    def on_model_error(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx, kind=value.kind)

    def before_tool(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx, tool=value.name, args=len(value.args))

    def after_tool(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx, tool=value.name, failed=value.failed)

    def on_tool_error(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx, tool=value.name, code=value.result.get("error"))

    def on_event(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx, author=value.author, error=value.error is not None)

    def on_agent_error(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx, kind=value.kind)

    def on_run_error(self, ctx: PluginContext, value: Any) -> None:
        self._line(ctx, kind=value.kind)


_BUILTINS: dict[str, tuple[type[Section], Any, Literal["observe", "intervene"]]] = {
    "global_instruction": (GlobalInstructionConfig, GlobalInstruction, "intervene"),
    "context_filter": (ContextFilterConfig, ContextFilter, "intervene"),
    "tool_retry": (ToolRetryConfig, ToolRetry, "intervene"),
    "logging": (LoggingConfig, Logging, "observe"),
}


def build_builtin(
    name: str, config: dict[str, Any]
) -> tuple[Plugin, Literal["observe", "intervene"]]:
    """The built-in plugin `name` made from its `config` table, and its default mode."""
    try:
        config_type, plugin_type, mode = _BUILTINS[name]
    except KeyError:
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"no built-in plugin {name!r}") from None
    try:
        checked = msgspec.convert(config, config_type)
    except msgspec.ValidationError as exc:
        detail, _, where = str(exc).partition(" - at `$")
        key = "config" + ("." + where.rstrip("`").lstrip(".") if where else "")
        detail = detail[:1].lower() + detail[1:]
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"builtin {name}: {key}: {detail}") from None
    plugin: Plugin = plugin_type(checked)
    return plugin, mode
