"""OTP-style supervision for phloem: actors, process children, supervisors, monitors.

The public contract of this package:
`Actor`, `ActorHandle`, `ChildSpec`, `Limits`, `ProcessTarget`, `Command`,
`SupervisorSpec`, `SupervisorChild`, `Supervisor`, `SupervisorRef`, `ChildInfo`,
`monitor`, `demonitor`, `link`, `MonitorRef`, `Down`, `ExitReason`, `ExitKind`,
`Owner` / `OwnerRegistry` (refs), the credit stream (credit), and `tree_snapshot()`.
The values these speak in — `CreditWindow`, `RefKind` / `OwnedRef`, `TreeSnapshot` — are
wire types, in `phloem.protocols` (`credit`, `refs`, `snapshot`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from phloem.protocols.exports import lazy_exports

# `monitor` is also the name of a submodule, which would replace a lazily bound name as
# soon as anything imported it: the function is bound here at once (its module is light).
from phloem.supervision.monitor import monitor as monitor

if TYPE_CHECKING:
    from phloem.supervision.actor import (
        Actor as Actor,
        ActorHandle as ActorHandle,
    )
    from phloem.supervision.credit import (
        CreditReceiver as CreditReceiver,
        CreditStream as CreditStream,
    )
    from phloem.supervision.handle import (
        ChildHandle as ChildHandle,
        ChildStartError as ChildStartError,
        ChildState as ChildState,
        HandleStats as HandleStats,
    )
    from phloem.supervision.monitor import (
        Link as Link,
        MonitorRef as MonitorRef,
        demonitor as demonitor,
        link as link,
    )
    from phloem.supervision.process import (
        ProcessHandle as ProcessHandle,
        start_process as start_process,
    )
    from phloem.supervision.reasons import (
        Down as Down,
        ExitKind as ExitKind,
        ExitReason as ExitReason,
    )
    from phloem.supervision.refs import (
        Owner as Owner,
        OwnerRegistry as OwnerRegistry,
    )
    from phloem.supervision.snapshot import (
        snapshot_of as snapshot_of,
        tree_snapshot as tree_snapshot,
    )
    from phloem.supervision.spec import (
        ChildSpec as ChildSpec,
        Command as Command,
        Limits as Limits,
        ProcessTarget as ProcessTarget,
        Restart as Restart,
        Strategy as Strategy,
        SupervisorChild as SupervisorChild,
        SupervisorSpec as SupervisorSpec,
    )
    from phloem.supervision.supervisor import (
        ChildCounts as ChildCounts,
        ChildInfo as ChildInfo,
        Supervisor as Supervisor,
        SupervisorRef as SupervisorRef,
        root_supervisors as root_supervisors,
        sibling_of as sibling_of,
    )

_EXPORTS: dict[str, str] = {
    "Actor": "phloem.supervision.actor",
    "ActorHandle": "phloem.supervision.actor",
    "ChildCounts": "phloem.supervision.supervisor",
    "ChildHandle": "phloem.supervision.handle",
    "ChildInfo": "phloem.supervision.supervisor",
    "ChildSpec": "phloem.supervision.spec",
    "ChildStartError": "phloem.supervision.handle",
    "ChildState": "phloem.supervision.handle",
    "Command": "phloem.supervision.spec",
    "CreditReceiver": "phloem.supervision.credit",
    "CreditStream": "phloem.supervision.credit",
    "Down": "phloem.supervision.reasons",
    "ExitKind": "phloem.supervision.reasons",
    "ExitReason": "phloem.supervision.reasons",
    "HandleStats": "phloem.supervision.handle",
    "Limits": "phloem.supervision.spec",
    "Link": "phloem.supervision.monitor",
    "MonitorRef": "phloem.supervision.monitor",
    "Owner": "phloem.supervision.refs",
    "OwnerRegistry": "phloem.supervision.refs",
    "ProcessHandle": "phloem.supervision.process",
    "ProcessTarget": "phloem.supervision.spec",
    "Restart": "phloem.supervision.spec",
    "Strategy": "phloem.supervision.spec",
    "Supervisor": "phloem.supervision.supervisor",
    "SupervisorChild": "phloem.supervision.spec",
    "SupervisorRef": "phloem.supervision.supervisor",
    "SupervisorSpec": "phloem.supervision.spec",
    "demonitor": "phloem.supervision.monitor",
    "link": "phloem.supervision.monitor",
    "root_supervisors": "phloem.supervision.supervisor",
    "sibling_of": "phloem.supervision.supervisor",
    "snapshot_of": "phloem.supervision.snapshot",
    "start_process": "phloem.supervision.process",
    "tree_snapshot": "phloem.supervision.snapshot",
}

__all__ = sorted([*_EXPORTS, "monitor"])  # noqa: PLE0605 (the one export table)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
