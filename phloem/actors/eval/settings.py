"""The `[eval]` configuration section (gathered by `phloem.config`).

[eval]
max_active_evals = 16      # eval runs live at once; one more is refused (backpressure)

[eval.scorers]             # trusted custom scorers, named by `"criterion": "custom"`
exact_len = "my_evals:length_score"   # score(case, outputs) -> float in [0, 1] or None
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from phloem.base.settings import ComponentPath, Section

MAX_SCORERS: Final = 64
_ScorerName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]


class EvalConfig(Section, kw_only=True):
    # Eval runs live at once; one more is refused with `backpressure`.
    max_active_evals: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 16
    # Custom scorers (trusted code, as [components]): name -> `module:function`, called as
    # `score(case, outputs)`; a criterion `{"criterion": "custom", "config": {"scorer":
    # NAME}}` uses one.
    scorers: Annotated[dict[_ScorerName, ComponentPath], msgspec.Meta(max_length=MAX_SCORERS)] = (
        msgspec.field(default_factory=dict)
    )
