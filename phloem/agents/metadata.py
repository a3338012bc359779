"""`AgentMetadata`: an agent's contract for goal-oriented and peer-to-peer planning.

The contract names the state keys an agent reads (`input_keys`) and the one it writes
(`output_key`). An optional `validate` — a callable returning a truthy value for good
output, or a JSON schema — makes presence mean quality: a value that fails it counts as
missing, so replanning triggers on bad output, not only on absent output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from phloem.agents.agent import check_agent_name
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError

log = get_logger("phloem.agents")

Validator = Callable[[Any], object] | Mapping[str, Any]


@dataclass(frozen=True)
class AgentMetadata:
    """What `agent` reads and writes, and optionally what good output looks like."""

    agent: str
    input_keys: Sequence[str] = ()
    output_key: str = ""
    validate: Validator | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_agent_name(self.agent)
        if isinstance(self.input_keys, str):
            raise TypeError("input_keys must be a sequence of keys, not a str")
        object.__setattr__(self, "input_keys", tuple(self.input_keys))
        for key in self.input_keys:
            if not isinstance(key, str) or not key:
                raise ValueError("input_keys must be non-empty strings")
        if not isinstance(self.output_key, str) or not self.output_key:
            raise ValueError("output_key must be a non-empty string")
        if self.validate is not None and not callable(self.validate):
            if not isinstance(self.validate, Mapping):
                raise TypeError("validate must be a callable or a JSON schema mapping")
            import jsonschema  # loaded by the first schema contract, not with the engine

            try:
                schema = dict(self.validate)
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"validate is not a valid JSON schema: {exc.message}") from None

    def accepts(self, value: Any) -> bool:
        """True when `value` passes `validate` (always, without one)."""
        check = self.validate
        if check is None:
            return True
        if callable(check):
            try:
                return bool(check(value))
            except Exception as exc:
                log.warning("validator_raised", agent=self.agent, error=type(exc).__name__)
                return False
        import jsonschema

        schema = dict(check)
        return bool(jsonschema.validators.validator_for(schema)(schema).is_valid(value))


class OutputCheck:
    """Presence-with-quality checks over a set of contracts."""

    def __init__(self, metadata: Iterable[AgentMetadata]) -> None:
        self._by_key: dict[str, AgentMetadata] = {}
        for m in metadata:
            self._by_key.setdefault(m.output_key, m)

    def present(self, state: Mapping[str, Any], key: str) -> bool:
        """`key` is in state and, if some contract declares it, its value is valid."""
        if key not in state:
            return False
        meta = self._by_key.get(key)
        return meta is None or meta.accepts(state[key])

    def present_keys(self, state: Mapping[str, Any]) -> set[str]:
        return {k for k in state if self.present(state, k)}


def check_unique_outputs(metadata: Sequence[AgentMetadata]) -> None:
    """`plan_error` when two contracts declare the same output key or the same agent."""
    seen: dict[str, str] = {}
    agents: set[str] = set()
    for m in metadata:
        if m.agent in agents:
            raise PhloemError(ErrorKind.PLAN_ERROR, f"agent {m.agent!r} has more than one contract")
        agents.add(m.agent)
        other = seen.get(m.output_key)
        if other is not None:
            raise PhloemError(
                ErrorKind.PLAN_ERROR,
                f"duplicate output key {m.output_key!r} (agents {other!r} and {m.agent!r})",
                {"output_key": m.output_key, "agents": [other, m.agent]},
            )
        seen[m.output_key] = m.agent
