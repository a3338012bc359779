"""OTP-style supervision for phloem: actors, process children, supervisors, monitors.

The public contract of this package (names may be extended, not changed):
`Actor`, `ActorHandle`, `ChildSpec`, `Limits`, `ProcessTarget`, `Command`,
`SupervisorSpec`, `SupervisorChild`, `Supervisor`, `SupervisorRef`, `ChildInfo`,
`monitor`, `demonitor`, `link`, `MonitorRef`, `Down`, `ExitReason`, `ExitKind`,
`OwnedRef` / `OwnerRegistry` (refs), `CreditWindow` and the credit stream (credit),
and `tree_snapshot()`.
"""

from phloem.supervision.actor import Actor, ActorHandle
from phloem.supervision.credit import CreditReceiver, CreditStream, CreditWindow
from phloem.supervision.handle import ChildHandle, ChildStartError, ChildState, HandleStats
from phloem.supervision.monitor import Link, MonitorRef, demonitor, link, monitor
from phloem.supervision.process import ProcessHandle, start_process
from phloem.supervision.reasons import Down, ExitKind, ExitReason
from phloem.supervision.refs import OwnedRef, Owner, OwnerRegistry, RefKind
from phloem.supervision.snapshot import NodeSnapshot, TreeSnapshot, snapshot_of, tree_snapshot
from phloem.supervision.spec import (
    ChildSpec,
    Command,
    Limits,
    ProcessTarget,
    Restart,
    Strategy,
    SupervisorChild,
    SupervisorSpec,
)
from phloem.supervision.supervisor import (
    ChildCounts,
    ChildInfo,
    Supervisor,
    SupervisorRef,
    root_supervisors,
    sibling_of,
)

__all__ = [
    "Actor",
    "ActorHandle",
    "ChildCounts",
    "ChildHandle",
    "ChildInfo",
    "ChildSpec",
    "ChildStartError",
    "ChildState",
    "Command",
    "CreditReceiver",
    "CreditStream",
    "CreditWindow",
    "Down",
    "ExitKind",
    "ExitReason",
    "HandleStats",
    "Limits",
    "Link",
    "MonitorRef",
    "NodeSnapshot",
    "OwnedRef",
    "Owner",
    "OwnerRegistry",
    "ProcessHandle",
    "ProcessTarget",
    "RefKind",
    "Restart",
    "Strategy",
    "Supervisor",
    "SupervisorChild",
    "SupervisorRef",
    "SupervisorSpec",
    "TreeSnapshot",
    "demonitor",
    "link",
    "monitor",
    "root_supervisors",
    "sibling_of",
    "snapshot_of",
    "start_process",
    "tree_snapshot",
]
