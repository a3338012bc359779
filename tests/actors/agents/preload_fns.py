"""A function for isolated agents whose module tells which process imported it."""

from __future__ import annotations

import os

IMPORTED_IN = os.getpid()


def where() -> dict[str, int]:
    """The pid that imported this module and the pid that calls it."""
    return {"imported_in": IMPORTED_IN, "called_in": os.getpid()}
