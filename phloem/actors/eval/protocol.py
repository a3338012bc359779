"""Messages of the `eval` service, shared by the service and the client methods.

`StartEval` answers `EvalStarted(ref, stream)`: the ref is bound to the calling client
(another client gets `not_owner`; when the client goes away the eval and every case run
it started are cancelled). The stream `eval/<ref>` carries the run items of
`phloem.protocols.runs` (`EvalStreamItem`): a `case_done` `RunEvent` per finished case
(its data an `EvalProgress`), then one `RunEnd` with the report, under the subscriber's
credit.
"""

from __future__ import annotations

import msgspec

from phloem.actors.eval.options import EvalOptions
from phloem.protocols.evalcriteria import Criteria
from phloem.protocols.evalreport import EvalReport
from phloem.protocols.evalset import EvalSet
from phloem.protocols.runs import run_item_type


class StartEval(msgspec.Struct, frozen=True, tag="start"):
    evalset: EvalSet
    agent: str
    criteria: Criteria
    options: EvalOptions = msgspec.field(default_factory=EvalOptions)


class CancelEval(msgspec.Struct, frozen=True, tag="cancel"):
    ref: str


EvalRequest = StartEval | CancelEval


class EvalStarted(msgspec.Struct, frozen=True):
    ref: str
    stream: str
    total: int  # cases


class EvalProgress(msgspec.Struct, frozen=True):
    case_id: str
    status: str
    done: int
    total: int
    passed: int
    evaluated: int
    elapsed_s: float
    detail: str = ""  # why a case did not pass (`evalreport.diagnosis_lines`), else ""


EvalStreamItem = run_item_type(EvalProgress, EvalReport)
