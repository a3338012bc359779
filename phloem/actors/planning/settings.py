"""The `[planning]` configuration section: trusted adapters by name and the run limit."""

from __future__ import annotations

from typing import Annotated

import msgspec

from phloem.base.settings import Components, Section

AdapterName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
AgentName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")]


class PlanningConfig(Section):
    """`[planning]`: trusted planner and executor adapters by name (`module:attribute`),
    loaded when the planning service starts, executors that run an agent of the catalogue
    (`agents`: executor name = agent name), and the limit on concurrent runs."""

    planners: Components = {}  # planner adapters by name: `module:attribute`, trusted code
    executors: Components = {}  # executor adapters by name: `module:attribute`, trusted code
    # Executors whose steps each run an agent of [agents.*] as a run of its own: a step's
    # action `{"input": ..., "state": {...}}` is what the agent is asked.
    agents: dict[AdapterName, AgentName] = {}
    # Planning runs live at once; one more is refused with `backpressure`.
    max_active_runs: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1024
