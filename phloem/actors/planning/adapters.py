"""Planner and executor adapters: the contracts, and loading them by configured name only.

Adapters are trusted code named in the daemon configuration::

    [planning.planners]
    report = "phloem.examples.planning_report:ReportPlanner"
    [planning.executors]
    tools = "phloem.examples.planning_report:ToolExecutor"

The attribute is a class with a no-argument constructor or an object with the callbacks.
An executor may instead run an agent of the catalogue (`[planning.agents]`, executor
name = agent name): its steps run that agent, each as a run of its own (`callbacks`).
`AdapterRegistry.load` imports every configured adapter once, at start, and checks its
callbacks. A request then names an adapter as ``NAME`` or
``{"name": NAME, "target": JSON, "config": JSON}``; `AdapterRegistry.resolve` only looks the
name up — a name that is not configured is `invalid_planning_adapter` and nothing is
imported or resolved from request data, ever.

Each callback runs in a fresh process child (see `worker`), which obtains the adapter from
the same configured `module:attribute` spec, so adapter instances hold no state between
callbacks: everything a callback needs is in its arguments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from phloem.base.settings import COMPONENT_RE, ComponentError, load_component
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.jsonvalue import JsonValueError, json_size, json_value
from phloem.protocols.plan import Plan as PlanDoc, Step
from phloem.protocols.result import ExecutorOutcome, PlannerDecision, PlannerOutcome

__all__ = [
    "AdapterRef",
    "AdapterRegistry",
    "Executor",
    "Planner",
    "Role",
    "load_adapter",
]

Role = Literal["planner", "executor"]
CALLBACKS: dict[str, tuple[str, ...]] = {"planner": ("plan", "review"), "executor": ("execute",)}
# Adapter names in requests and config: short identifiers.
MAX_ADAPTER_NAME_CHARS = 64
MAX_ADAPTERS_PER_ROLE = 256
# Canonical JSON size of a request's adapter `target` plus `config`.
MAX_ADAPTER_DESCRIPTOR_BYTES = 256 * 1024
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
AGENT_SPEC_PREFIX = "agent:"
"""The spec of an executor that runs an agent (`[planning] agents`): `agent:<name>`."""


@runtime_checkable
class Planner(Protocol):
    """Makes the initial plan and reviews every observation.

    `plan` returns `Ok(plan)` (a `Plan` or equivalent JSON mapping), `Complete(value)` or
    `Error(reason)`. `review` returns `Continue()`, `Replan(plan)`, `Complete(value)`,
    `Fail(reason)` or `Error(reason)`. `observation` is the JSON form of an
    `Observation`; `plan` is a `Plan` and `step` a `Step`.
    """

    def plan(self, target: Any, goal: Any, context: Any, config: Any) -> PlannerOutcome: ...

    def review(
        self,
        target: Any,
        plan: PlanDoc,
        step: Step,
        observation: dict[str, Any],
        context: Any,
        config: Any,
    ) -> PlannerDecision: ...


@runtime_checkable
class Executor(Protocol):
    """Runs one step's opaque action: `Ok(output)` (JSON data) or `Error(reason)`."""

    def execute(self, target: Any, step: Step, context: Any, config: Any) -> ExecutorOutcome: ...


def _adapter_error(role: str, reason: str, message: str, name: str | None = None) -> PhloemError:
    details: dict[str, Any] = {"role": role, "reason": reason}
    if name is not None:
        details["name"] = name
    return PhloemError(ErrorKind.INVALID_PLANNING_ADAPTER, message, details)


def load_adapter(role: Role, spec: str) -> Any:
    """Import `module:attribute` from *configuration* and return the adapter object.

    A class is instantiated with no arguments. Raises `invalid_planning_adapter` with reason
    `unavailable` (cannot import or resolve) or `missing_callback`.
    """
    if not isinstance(spec, str) or not COMPONENT_RE.match(spec):
        raise _adapter_error(role, "unavailable", f"{role} spec must be 'module:attribute'")
    try:
        obj: Any = load_component(spec, what=role)
        if isinstance(obj, type):
            obj = obj()
    except ComponentError as exc:
        cause = exc.__cause__
        raise _adapter_error(
            role, "unavailable", f"{role} {spec} cannot be loaded: {type(cause).__name__}"
        ) from None
    except Exception as exc:
        raise _adapter_error(
            role, "unavailable", f"{role} {spec} cannot be loaded: {type(exc).__name__}"
        ) from None
    for callback in CALLBACKS[role]:
        if not callable(getattr(obj, callback, None)):
            raise _adapter_error(role, "missing_callback", f"{role} {spec} has no {callback}()")
    return obj


@dataclass(frozen=True, slots=True)
class AdapterRef:
    """A resolved request descriptor: a configured adapter plus the request's target/config."""

    role: Role
    name: str
    spec: str
    target: Any = None
    config: Any = None
    agent: str | None = None  # an executor that runs this catalogue agent (no callback)


class AdapterRegistry:
    """The configured planners and executors, loaded and checked once at start."""

    def __init__(self) -> None:
        self._specs: dict[Role, dict[str, str]] = {"planner": {}, "executor": {}}
        self._agents: dict[str, str] = {}  # executor name -> the agent its steps run

    @classmethod
    def load(
        cls,
        planners: Mapping[str, str] | None = None,
        executors: Mapping[str, str] | None = None,
        agents: Mapping[str, str] | None = None,
    ) -> AdapterRegistry:
        """Register and load every adapter, and the executors that run an agent (`agents`:
        executor name -> agent name); config errors raise `invalid_planning_adapter`."""
        registry = cls()
        for role, table in (("planner", planners or {}), ("executor", executors or {})):
            for name, spec in table.items():
                registry.register(role, name, spec)  # type: ignore[arg-type]
        for name, agent in (agents or {}).items():
            registry.register_agent(name, agent)
        return registry

    def register_agent(self, name: str, agent: str) -> None:
        """Register the executor `name` whose steps each run the catalogue agent `agent`
        (checked against the catalogue when a step runs it: nothing is loaded here)."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise _adapter_error("executor", "unavailable", f"executor name {name!r} is not valid")
        if name in self._specs["executor"]:
            raise _adapter_error(
                "executor", "unavailable", f"executor {name!r} is both an adapter and an agent"
            )
        if len(self._specs["executor"]) >= MAX_ADAPTERS_PER_ROLE:
            raise _adapter_error("executor", "unavailable", f"more than {MAX_ADAPTERS_PER_ROLE}")
        self._specs["executor"][name] = f"{AGENT_SPEC_PREFIX}{agent}"
        self._agents[name] = agent

    def register(self, role: Role, name: str, spec: str) -> None:
        """Register `name` → `spec` after loading it once to check the callbacks."""
        if role not in CALLBACKS:
            raise ValueError("role must be 'planner' or 'executor'")
        if not isinstance(name, str) or not _NAME.match(name):
            raise _adapter_error(role, "unavailable", f"{role} name {name!r} is not valid")
        if len(self._specs[role]) >= MAX_ADAPTERS_PER_ROLE:
            raise _adapter_error(role, "unavailable", f"more than {MAX_ADAPTERS_PER_ROLE} {role}s")
        load_adapter(role, spec)
        self._specs[role][name] = spec

    def modules(self) -> list[str]:
        """The modules of every configured adapter (for the fork server to preload)."""
        specs = [*self._specs["planner"].values(), *self._specs["executor"].values()]
        specs = [spec for spec in specs if not spec.startswith(AGENT_SPEC_PREFIX)]
        return list(dict.fromkeys(spec.partition(":")[0] for spec in specs))

    def names(self, role: Role) -> list[str]:
        return sorted(self._specs[role])

    def resolve(self, role: Role, descriptor: Any) -> AdapterRef:
        """Look a request's descriptor up by name; never imports anything."""
        target: Any = None
        config: Any = None
        if isinstance(descriptor, Mapping):
            unknown = set(descriptor) - {"name", "target", "config"}
            if unknown:
                raise _adapter_error(
                    role, "invalid_descriptor", f"unknown {role} fields: {sorted(unknown)}"
                )
            name = descriptor.get("name")
            try:
                target = json_value(descriptor.get("target"), f"$.{role}.target")
                config = json_value(descriptor.get("config"), f"$.{role}.config")
            except JsonValueError as exc:
                raise _adapter_error(role, "invalid_descriptor", str(exc)) from None
            size = json_size([target, config])
            if size > MAX_ADAPTER_DESCRIPTOR_BYTES:
                raise _adapter_error(
                    role,
                    "invalid_descriptor",
                    f"{role} target and config must be <= {MAX_ADAPTER_DESCRIPTOR_BYTES} bytes",
                )
        else:
            name = descriptor
        if not isinstance(name, str) or len(name) > MAX_ADAPTER_NAME_CHARS:
            raise _adapter_error(role, "unavailable", f"{role} must be a configured name")
        spec = self._specs[role].get(name)
        if spec is None:
            raise _adapter_error(role, "unavailable", f"{role} {name!r} is not configured", name)
        agent = self._agents.get(name) if role == "executor" else None
        return AdapterRef(role, name, spec, target=target, config=config, agent=agent)
