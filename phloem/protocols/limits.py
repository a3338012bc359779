"""The one range check for configurable numbers (named limits, sizes, timeouts).

`check_range(name, value, low, high)` returns `value` if it is a number of the right
kind within `[low, high]`, and otherwise raises a `PhloemError` whose message is always
one of::

    {name} must be an int          (or: must be a number, with integer=False)
    {name} must be between {low} and {high}
    {name} must be at least {low}  (high=None: no upper limit)
    {name} must be at most {high}  (low=None: no lower limit)

Bounds print as plain numbers: an int as itself, an integral float without its `.0`
(`86400.0` → `86400`), any other float as Python writes it (`0.001`). NaN is never in
range; with a bound left out, infinity is (on that side).

The errors are also the built-in exceptions such code has always raised — `RangeError`
is a `ValueError`, `RangeTypeError` a `TypeError` — so callers that catch those, and
msgspec (which turns them into a `ValidationError` when a struct's `__post_init__`
raises them), keep working. `kind` (default `invalid_argument`) lets a caller say what
the bad value is, e.g. `ErrorKind.CONFIG_INVALID`; `details` carry the field and its
bounds. A caller that must raise its own error class (a `ModelError`, a `UsageError`)
catches these and re-raises with the same `message`.
"""

from __future__ import annotations

from typing import Literal, overload

from phloem.protocols.errors import ErrorKind, PhloemError

INVALID_ARGUMENT = ErrorKind.INVALID_ARGUMENT.value

_EXACT_INTEGRAL_FLOAT = 2.0**53
"""Integral floats below this print as ints (`3600`); larger ones keep Python's form."""


class RangeError(PhloemError, ValueError):
    """A number outside its accepted range."""


class RangeTypeError(PhloemError, TypeError):
    """Not a number (or not an int where one is required); bools never count."""


@overload
def check_range(
    name: str,
    value: object,
    low: int | None,
    high: int | None,
    *,
    kind: str = ...,
    integer: Literal[True] = ...,
) -> int: ...


@overload
def check_range(
    name: str,
    value: object,
    low: float | None,
    high: float | None,
    *,
    kind: str = ...,
    integer: Literal[False],
) -> float: ...


def check_range(
    name: str,
    value: object,
    low: float | None,
    high: float | None,
    *,
    kind: str = INVALID_ARGUMENT,
    integer: bool = True,
) -> float:
    """`value` if it is an int (or, with `integer=False`, an int or a float) with
    `low <= value <= high`; `RangeTypeError` / `RangeError` (kind `kind`) otherwise.
    Leave out one bound (`None`) for a one-sided limit; at least one must be given."""
    if low is None and high is None:
        raise TypeError("check_range needs low, high or both")
    wanted: type | tuple[type, ...] = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, wanted):
        what = "an int" if integer else "a number"
        raise RangeTypeError(kind, f"{name} must be {what}", {"field": name})
    assert isinstance(value, int | float)
    # Written so that NaN fails every comparison, one-sided or not.
    if (low is None or low <= value) and (high is None or value <= high):
        return value
    details: dict[str, object] = {"field": name}
    if low is None:
        assert high is not None
        message = f"{name} must be at most {format_number(high)}"
    elif high is None:
        message = f"{name} must be at least {format_number(low)}"
    else:
        message = f"{name} must be between {format_number(low)} and {format_number(high)}"
    if low is not None:
        details["low"] = low
    if high is not None:
        details["high"] = high
    raise RangeError(kind, message, details)


def format_number(bound: float) -> str:
    """A bound as people write it: `600`, not `600.0`; `0.001`; a huge float as `1e+300`."""
    if isinstance(bound, float) and bound.is_integer() and abs(bound) < _EXACT_INTEGRAL_FLOAT:
        return str(int(bound))
    return str(bound)
