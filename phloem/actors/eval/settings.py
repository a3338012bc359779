"""The `[eval]` configuration section (gathered by `phloem.config`).

[eval]
max_active_evals = 16      # eval runs live at once; one more is refused (backpressure)
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from phloem.base.settings import Section


class EvalConfig(Section, kw_only=True):
    # Eval runs live at once; one more is refused with `backpressure`.
    max_active_evals: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 16
