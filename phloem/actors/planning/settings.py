"""The `[planning]` configuration section: trusted adapters by name, the run limit, and
durable runs (their journals and bounds, docs/durable-runs.md) — of planning runs and of
durable agent runs alike: one journal directory (a subdirectory per kind), one set of
bounds, so that one `[planning]` says where every durable run lives."""

from __future__ import annotations

import os
from pathlib import Path
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
    # Runs whose options do not say `durable` are journaled (and resumed after a crash).
    durable: bool = False
    # Where durable runs' journals live (planning/ and agent/ under it: durable agent runs
    # share these keys); empty: $XDG_STATE_HOME/phloem/runs, else ~/.local/state/phloem/runs.
    journal_dir: str = ""
    # fdatasync every journal append (off: a crash of the machine may lose the last steps).
    fsync: bool = True
    # Bytes one run's journal may hold; a step beyond it fails the run `run_journal_full`.
    max_journal_bytes: Annotated[int, msgspec.Meta(ge=64 * 1024, le=1024**3)] = 16 * 1024 * 1024
    # Seconds an ended durable run's journal (and result) is kept for its owner to reattach.
    retention_s: Annotated[float, msgspec.Meta(ge=0, le=365 * 24 * 3600)] = 24 * 3600.0
    # Ended durable runs kept at most; beyond it the oldest ended one's journal goes.
    max_retained_runs: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 1000
    # Unfinished durable runs a starting daemon resumes at once, of each kind (planning,
    # agent); the rest wait their turn.
    resume_concurrency: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 16

    def journals_dir(self) -> Path:
        """`journal_dir`, else `$XDG_STATE_HOME/phloem/runs`, else `~/.local/state/phloem/runs`."""
        if self.journal_dir:
            return Path(self.journal_dir).expanduser()
        state = os.environ.get("XDG_STATE_HOME")
        base = Path(state) if state else Path.home() / ".local" / "state"
        return base / "phloem" / "runs"
