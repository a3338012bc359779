"""The `[planning]` configuration section: trusted adapters by name and the run limit."""

from __future__ import annotations

from typing import Annotated

import msgspec

from phloem.base.settings import Components, Section


class PlanningConfig(Section):
    """`[planning]`: trusted planner and executor adapters by name (`module:attribute`),
    loaded when the planning service starts, and the limit on concurrent runs."""

    planners: Components = {}
    executors: Components = {}
    max_active_runs: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1024
