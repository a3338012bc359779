"""The one range check for configurable numbers (named limits, sizes, timeouts).

`check_range(name, value, low, high)` returns `value` if it is a number of the right
kind within `[low, high]`, and otherwise raises a `PhloemError` whose message is always
one of::

    {name} must be an int          (or: must be a number, with integer=False)
    {name} must be between {low} and {high}

The errors are also the built-in exceptions such code has always raised — `RangeError`
is a `ValueError`, `RangeTypeError` a `TypeError` — so callers that catch those, and
msgspec (which turns them into a `ValidationError` when a struct's `__post_init__`
raises them), keep working. `kind` (default `invalid_argument`) lets a caller say what
the bad value is, e.g. `invalid_config`; `details` carry the field and its bounds.
"""

from __future__ import annotations

from typing import Literal, overload

from phloem.protocols.errors import PhloemError

INVALID_ARGUMENT = "invalid_argument"


class RangeError(PhloemError, ValueError):
    """A number outside its accepted range."""


class RangeTypeError(PhloemError, TypeError):
    """Not a number (or not an int where one is required); bools never count."""


@overload
def check_range(
    name: str,
    value: object,
    low: int,
    high: int,
    *,
    kind: str = ...,
    integer: Literal[True] = ...,
) -> int: ...


@overload
def check_range(
    name: str,
    value: object,
    low: float,
    high: float,
    *,
    kind: str = ...,
    integer: Literal[False],
) -> float: ...


def check_range(
    name: str,
    value: object,
    low: float,
    high: float,
    *,
    kind: str = INVALID_ARGUMENT,
    integer: bool = True,
) -> float:
    """`value` if it is an int (or, with `integer=False`, an int or a float) with
    `low <= value <= high`; `RangeTypeError` / `RangeError` (kind `kind`) otherwise."""
    wanted: type | tuple[type, ...] = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, wanted):
        what = "an int" if integer else "a number"
        raise RangeTypeError(kind, f"{name} must be {what}", {"field": name})
    assert isinstance(value, int | float)
    if not low <= value <= high:  # NaN fails this too
        raise RangeError(
            kind,
            f"{name} must be between {low} and {high}",
            {"field": name, "low": low, "high": high},
        )
    return value
