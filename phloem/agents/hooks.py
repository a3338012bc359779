"""The plugin contract: `Plugin` hooks, their typed context, and the four outcomes.

A plugin is trusted code that sees every run, agent invocation, model call and tool call
of the tree (it is installed once, tree-wide) and answers each hook it implements with an
outcome:

- `None`: observe — keep the value, go on;
- `Amend(value)`: replace the value and go on through later plugins, the agent's local
  callback and the operation;
- `Return(value)`: skip the remaining plugins, the local callback and the guarded
  operation; the value stands in for the operation's result;
- `Halt(reason)`: stop the run with a redacted `plugin_halted` error.

Every hook is `hook(self, ctx, value)`: `ctx` is a `PluginContext` (run, agent,
invocation, hook; owner-free, never a credential), `value` the thing the hook guards
(`HOOK_VALUES` says which). `after_run`, `on_agent_error` and `on_run_error` are
notification-only: anything but `None` there breaks the contract. The same outcome types
answer the agents' local callbacks (`before_model_callback=...`).

Stateful plugins (`stateful = true`) are objects with `init(config) -> state`,
`handle(hook, ctx, value, state) -> (outcome, new_state)` and `terminate(state)`.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from phloem.models.interceptors import CallInfo, ToolCall
from phloem.protocols.content import Content, ModelRequest, ModelResponse, Part
from phloem.protocols.errors import ErrorKind, ErrorValue, PhloemError
from phloem.protocols.secrets import is_secret_key, redact

__all__ = [
    "HOOKS",
    "HOOK_VALUES",
    "NOTIFY_ONLY",
    "Amend",
    "Halt",
    "Outcome",
    "Plugin",
    "PluginContext",
    "Return",
    "RunSummary",
    "ToolCall",
    "ToolResult",
    "apply_local",
    "hooks_of",
]

HOOKS: Final = (
    "on_user_message",
    "before_run",
    "after_run",
    "before_agent",
    "after_agent",
    "before_model",
    "after_model",
    "on_model_error",
    "before_tool",
    "after_tool",
    "on_tool_error",
    "on_event",
    "on_agent_error",
    "on_run_error",
)
NOTIFY_ONLY: Final = frozenset({"after_run", "on_agent_error", "on_run_error"})

# What each hook guards (its `value`), for the documentation and `phloem plugin list`.
HOOK_VALUES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "on_user_message": "Content (the user's message)",
        "before_run": "Content | None (the run's input)",
        "after_run": "RunSummary",
        "before_agent": "str (the agent's name)",
        "after_agent": "Content | None (the agent's last content)",
        "before_model": "ModelRequest",
        "after_model": "ModelResponse",
        "on_model_error": "ErrorValue",
        "before_tool": "ToolCall (name, args, id)",
        "after_tool": "ToolResult (name, args, id, result)",
        "on_tool_error": "ToolResult (its result is the failure value)",
        "on_event": "Event",
        "on_agent_error": "ErrorValue",
        "on_run_error": "ErrorValue",
    }
)

# Metadata keys never handed to a plugin: credentials and session-resumption handles.
_HIDDEN_KEY = re.compile(r"resum|handle", re.IGNORECASE)


@dataclass(frozen=True)
class Amend:
    """Replace the guarded value and go on."""

    value: Any


@dataclass(frozen=True)
class Return:
    """Answer instead of the operation: skip later plugins, the local callback and it."""

    value: Any


@dataclass(frozen=True)
class Halt:
    """Stop the run (`plugin_halted`; the reason is redacted)."""

    reason: str = "halted by a plugin"


Outcome = Amend | Return | Halt | None


@dataclass(frozen=True)
class PluginContext:
    """What a hook is told about the call: owner-free and credential-free."""

    hook: str
    plugin: str
    run_id: str
    agent: str
    invocation_id: str = ""
    app: str = "phloem"
    user: str = "user"
    # The agent's class for agent and run hooks, the model's class for model hooks, the
    # tool's name for tool hooks.
    target: str = ""
    metadata: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, info: CallInfo, hook: str, plugin: str) -> PluginContext:
        metadata = {
            k: v
            for k, v in info.metadata.items()
            if not is_secret_key(k, v) and not _HIDDEN_KEY.search(k)
        }
        return cls(
            hook=hook,
            plugin=plugin,
            run_id=info.session_id,
            agent=info.agent,
            invocation_id=info.invocation_id,
            app=info.app,
            user=info.user,
            target=info.target,
            metadata=MappingProxyType(metadata),
        )


@dataclass(frozen=True)
class ToolResult:
    """A finished tool call: what was called and what it answered."""

    name: str
    args: Mapping[str, Any]
    id: str | None
    result: Any

    @property
    def failed(self) -> bool:
        return is_tool_failure(self.result)


@dataclass(frozen=True)
class RunSummary:
    """A finished run, content-free: its agent, status and how many events it made."""

    agent: str
    ok: bool
    status: str
    message: str
    events: int


class Plugin:
    """Base of plugins: override the hooks you need; the others are never called.

    `name` is set from the registration (`[plugins.NAME]`, `tree.add_plugin(NAME, ...)`).
    """

    name: str = ""

    def on_user_message(self, ctx: PluginContext, value: Content) -> Outcome:
        return None

    def before_run(self, ctx: PluginContext, value: Content | None) -> Outcome:
        return None

    def after_run(self, ctx: PluginContext, value: RunSummary) -> None:
        return None

    def before_agent(self, ctx: PluginContext, value: str) -> Outcome:
        return None

    def after_agent(self, ctx: PluginContext, value: Content | None) -> Outcome:
        return None

    def before_model(self, ctx: PluginContext, value: ModelRequest) -> Outcome:
        return None

    def after_model(self, ctx: PluginContext, value: ModelResponse) -> Outcome:
        return None

    def on_model_error(self, ctx: PluginContext, value: ErrorValue) -> Outcome:
        return None

    def before_tool(self, ctx: PluginContext, value: ToolCall) -> Outcome:
        return None

    def after_tool(self, ctx: PluginContext, value: ToolResult) -> Outcome:
        return None

    def on_tool_error(self, ctx: PluginContext, value: ToolResult) -> Outcome:
        return None

    def on_event(self, ctx: PluginContext, value: Any) -> Outcome:
        return None

    def on_agent_error(self, ctx: PluginContext, value: ErrorValue) -> None:
        return None

    def on_run_error(self, ctx: PluginContext, value: ErrorValue) -> None:
        return None


def hooks_of(plugin: Any) -> tuple[str, ...]:
    """The hooks `plugin` implements: a `Plugin`'s overridden methods; a stateful plugin's
    `hooks` attribute (all hooks when it has none); any other object's callable hooks."""
    if callable(getattr(plugin, "handle", None)) and callable(getattr(plugin, "init", None)):
        declared = getattr(plugin, "hooks", None)
        if declared is None:
            return HOOKS
        unknown = [h for h in declared if h not in HOOKS]
        if unknown:
            raise ValueError(f"unknown hooks: {', '.join(map(str, unknown))}")
        return tuple(h for h in HOOKS if h in declared)
    if isinstance(plugin, Plugin):
        cls = type(plugin)
        return tuple(h for h in HOOKS if getattr(cls, h) is not getattr(Plugin, h))
    return tuple(h for h in HOOKS if callable(getattr(plugin, h, None)))


def is_tool_failure(result: Any) -> bool:
    """Whether a tool answer is the tool contract's failure value `{"error", "message"}`."""
    return isinstance(result, dict) and isinstance(result.get("error"), str) and "message" in result


# --- the typed values outcomes may carry ------------------------------------------------


def violation(message: str) -> PhloemError:
    return PhloemError(ErrorKind.PLUGIN_CONTRACT_VIOLATION, message)


def as_content(value: Any, role: str = "model") -> Content:
    if isinstance(value, Content):
        return value
    if isinstance(value, str):
        return Content(role=role, parts=(Part.from_text(value),))
    raise violation(f"expected Content or str, got {type(value).__name__}")


def as_response(value: Any) -> ModelResponse:
    if isinstance(value, ModelResponse):
        return value
    if isinstance(value, str):
        return ModelResponse.from_text(value)
    raise violation(f"expected ModelResponse or str, got {type(value).__name__}")


def as_request(value: Any) -> ModelRequest:
    if isinstance(value, ModelRequest):
        return value
    raise violation(f"expected ModelRequest, got {type(value).__name__}")


def as_tool_call(value: Any, original: ToolCall) -> ToolCall:
    """An amended tool call: a `ToolCall` of the same tool, or new arguments (a mapping).
    The tool validates the arguments against its schema when it runs."""
    if isinstance(value, Mapping):
        return ToolCall(original.name, dict(value), original.id)
    if isinstance(value, ToolCall):
        if value.name != original.name:
            raise violation(f"a plugin may not rename tool call {original.name!r}")
        if not isinstance(value.args, Mapping):
            raise violation("tool arguments must be a mapping")
        return ToolCall(original.name, dict(value.args), original.id)
    raise violation(f"expected ToolCall or an argument mapping, got {type(value).__name__}")


def tool_answer(value: Any) -> Any:
    """A tool result a plugin supplies: a `ToolResult`'s result, or the value itself."""
    return value.result if isinstance(value, ToolResult) else value


# Plugin kinds that end an agent's turn with their own kind (not `model_failed`).
STOP_KINDS: Final = frozenset({ErrorKind.PLUGIN_HALTED, ErrorKind.PLUGIN_FAILED})

# Set (in the calling thread) when a global after-hook answered with `Return`: the agent
# then skips its local after-callback. `after_returned()` reads and clears it.
_after_returned: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "phloem_plugin_after_returned", default=False
)


def after_returned() -> bool:
    """Whether the last call's global after-hooks ended with a `Return` (and clear it)."""
    value = _after_returned.get()
    if value:
        _after_returned.set(False)
    return value


def mark_after_returned(value: bool) -> None:
    _after_returned.set(value)


# --- local callbacks --------------------------------------------------------------------

LocalCallback = Callable[[PluginContext, Any], Outcome]


def apply_local(
    callback: LocalCallback | None, hook: str, info: CallInfo, value: Any
) -> tuple[bool, Any]:
    """Run an agent's local callback: (False, value) to go on with a (possibly amended)
    value, (True, value) for a `Return`. `Halt` raises `plugin_halted`; any other answer
    is a contract violation. A callback that raises fails the call like the agent's code."""
    if callback is None:
        return False, value
    outcome = callback(PluginContext.of(info, hook, "local"), value)
    if outcome is None:
        return False, value
    if isinstance(outcome, Amend):
        return False, outcome.value
    if isinstance(outcome, Return):
        return True, outcome.value
    if isinstance(outcome, Halt):
        raise PhloemError(
            ErrorKind.PLUGIN_HALTED, redact(f"{info.agent}: {hook}_callback: {outcome.reason}")
        )
    raise violation(f"{hook}_callback returned {type(outcome).__name__}, not an outcome")
