"""Tool policy: which tools a turn may call, and the interceptor that enforces it.

A `ToolPolicy` is an allow set (`None`: every tool) and a deny set, over tool names.
Policies combine by intersection — allow sets intersect, deny sets unite — so adding a
policy can only take tools away, and a denial always wins over an allowance. The
sources that meet in one turn: the agent's `[agents.llm.NAME] tools_allow` /
`tools_deny`, the turn's own (`tools_allow=` / `tools_deny=` of a run or an ask), the
front matter of active instruction files (`allowed-tools` / `disallowed-tools`) and
loaded skills (`allowed-tools`).

`TurnPolicy` holds one turn's policy and narrows as the turn goes on (an instruction file
activates, a skill loads). `ToolPolicyInterceptor` sits on the tree's interceptor chain:
around a model call it drops the tools the policy refuses from the request, and around a
tool call it answers a refused call with the tool contract's failure value
`{"error": "denied", ...}` instead of calling `proceed` — so the tool never runs. A tool
result that carries `"tool_policy": {"allow": [...] | null, "deny": [...]}` (as
`load_skill` does) narrows the turn from then on.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from phloem.models.interceptors import JSON, CallInfo, Interceptor, ToolCall
from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.errors import ErrorKind, PhloemError

__all__ = [
    "MAX_POLICY_NAMES",
    "POLICY_RESULT_KEY",
    "ToolPolicy",
    "ToolPolicyInterceptor",
    "TurnPolicy",
    "denied",
]

MAX_POLICY_NAMES = 1_024
POLICY_RESULT_KEY = "tool_policy"
_TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")


def _names(what: str, values: Iterable[str] | None) -> frozenset[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"{what} must be a list of tool names")
    items = list(values)
    if len(items) > MAX_POLICY_NAMES:
        raise PhloemError(
            ErrorKind.INVALID_ARGUMENT, f"{what} must have at most {MAX_POLICY_NAMES} names"
        )
    for item in items:
        if not isinstance(item, str) or not _TOOL_NAME.match(item):
            raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"{what}: not a tool name: {item!r}")
    return frozenset(items)


@dataclass(frozen=True)
class ToolPolicy:
    """Allowed (`None`: all) and denied tool names; see the module docstring."""

    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> ToolPolicy:
        """A policy from name lists, checked (`invalid_argument` for a bad name)."""
        return cls(_names("tools_allow", allow), _names("tools_deny", deny) or frozenset())

    def allows(self, name: str) -> bool:
        return name not in self.deny and (self.allow is None or name in self.allow)

    def intersect(self, other: ToolPolicy) -> ToolPolicy:
        """Both policies at once: the allow sets intersect, the deny sets unite."""
        if self.allow is None:
            allow = other.allow
        elif other.allow is None:
            allow = self.allow
        else:
            allow = self.allow & other.allow
        return ToolPolicy(allow, self.deny | other.deny)

    @property
    def unrestricted(self) -> bool:
        return self.allow is None and not self.deny

    def to_dict(self) -> JSON:
        allow = None if self.allow is None else sorted(self.allow)
        return {"allow": allow, "deny": sorted(self.deny)}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> ToolPolicy:
        return cls.of(value.get("allow"), value.get("deny") or ())


def denied(name: str, why: str = "the tool policy") -> JSON:
    """The failure value of a call the policy refuses."""
    return {"error": "denied", "message": f"tool {name!r} is not allowed by {why}"}


class TurnPolicy:
    """One turn's policy: starts from a base and only ever narrows (thread-safe)."""

    def __init__(self, base: ToolPolicy | None = None) -> None:
        self._lock = threading.Lock()
        self._policy = base or ToolPolicy()

    @property
    def current(self) -> ToolPolicy:
        with self._lock:
            return self._policy

    def narrow(self, policy: ToolPolicy) -> ToolPolicy:
        """Intersect `policy` into the turn's; returns the result."""
        with self._lock:
            self._policy = self._policy.intersect(policy)
            return self._policy


class ToolPolicyInterceptor(Interceptor):
    """Enforces a `TurnPolicy` (and anything `extra()` adds, e.g. active instructions'
    front matter, and `by_agent[name]` for the calls of agent `name` — a planner's
    sub-agents keep their own policies) around model and tool calls; see the module
    docstring."""

    name = "tool-policy"

    def __init__(
        self,
        policy: TurnPolicy | ToolPolicy | None = None,
        *,
        extra: Callable[[], ToolPolicy] | None = None,
        by_agent: Mapping[str, ToolPolicy] | None = None,
    ) -> None:
        if isinstance(policy, ToolPolicy) or policy is None:
            policy = TurnPolicy(policy)
        self.turn = policy
        self._extra = extra
        self._by_agent = dict(by_agent or {})

    def effective(self, info: CallInfo | None = None) -> ToolPolicy:
        policy = self.turn.current
        if self._extra is not None:
            policy = policy.intersect(self._extra())
        own = self._by_agent.get(info.agent) if info is not None else None
        if own is not None:
            policy = policy.intersect(own)
        return policy

    def model_call(
        self,
        info: CallInfo,
        request: ModelRequest,
        proceed: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        policy = self.effective(info)
        if policy.unrestricted or not request.tools:
            return proceed(request)
        tools = tuple(t for t in request.tools if policy.allows(t.name))
        if len(tools) != len(request.tools):
            config = request.config
            if config.forced_function is not None and not policy.allows(config.forced_function):
                config = msgspec.structs.replace(config, forced_function=None)
            if not tools and config.tool_choice == "required":
                config = msgspec.structs.replace(config, tool_choice="auto")
            request = msgspec.structs.replace(request, tools=tools, config=config)
        return proceed(request)

    def tool_call(
        self, info: CallInfo, call: ToolCall, proceed: Callable[[ToolCall], JSON]
    ) -> JSON:
        if not self.effective(info).allows(call.name):
            return denied(call.name)
        result = proceed(call)
        narrowing = result.get(POLICY_RESULT_KEY) if isinstance(result, dict) else None
        if isinstance(narrowing, dict) and "error" not in result:
            try:
                self.turn.narrow(ToolPolicy.from_dict(narrowing))
            except PhloemError:
                self.turn.narrow(ToolPolicy(allow=frozenset()))  # unreadable: deny all
        return result
