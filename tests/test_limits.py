"""phloem.protocols.limits.check_range: one range check, one message style, PhloemError kinds."""

from __future__ import annotations

import math

import msgspec
import pytest

from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import RangeError, RangeTypeError, check_range, format_number


def test_values_at_both_edges_pass_and_come_back() -> None:
    assert check_range("n", 1, 1, 10) == 1
    assert check_range("n", 10, 1, 10) == 10
    assert check_range("t", 0.5, 0.001, 600.0, integer=False) == 0.5
    assert check_range("t", 3, 0.001, 600.0, integer=False) == 3


@pytest.mark.parametrize("value", [0, 11])
def test_a_value_outside_is_a_range_error(value: int) -> None:
    with pytest.raises(RangeError) as info:
        check_range("n", value, 1, 10)
    err = info.value
    assert isinstance(err, PhloemError) and isinstance(err, ValueError)
    assert (err.kind, err.message) == ("invalid_argument", "n must be between 1 and 10")
    assert str(err) == "invalid_argument: n must be between 1 and 10"
    assert err.details == {"field": "n", "low": 1, "high": 10}


def test_nan_is_out_of_range() -> None:
    with pytest.raises(RangeError, match=r"^invalid_argument: t must be between 0 and 1$"):
        check_range("t", math.nan, 0, 1, integer=False)


@pytest.mark.parametrize("value", [True, 1.0, "1", None])
def test_an_int_is_required_and_a_bool_is_not_one(value: object) -> None:
    with pytest.raises(RangeTypeError, match=r"^invalid_argument: n must be an int$") as info:
        check_range("n", value, 1, 10)
    assert isinstance(info.value, TypeError) and isinstance(info.value, PhloemError)


def test_a_number_is_required_when_floats_are_allowed() -> None:
    with pytest.raises(RangeTypeError, match=r"^invalid_argument: t must be a number$"):
        check_range("t", False, 0, 1, integer=False)


def test_the_caller_names_the_kind() -> None:
    with pytest.raises(RangeError) as info:
        check_range("timeout", 0, 1, 5, kind=ErrorKind.CONFIG_INVALID)
    assert info.value.kind == "config_invalid" and type(info.value.kind) is str
    with pytest.raises(RangeTypeError) as type_info:
        check_range("timeout", "0", 1, 5, kind=ErrorKind.BAD_MESSAGE)
    assert type_info.value.kind == "bad_message"


def test_float_edges_pass_and_just_beyond_them_fail() -> None:
    assert check_range("t", 0.001, 0.001, 600.0, integer=False) == 0.001
    assert check_range("t", 600.0, 0.001, 600.0, integer=False) == 600.0
    for bad in (0.0009, 600.0001, -math.inf, math.inf):
        with pytest.raises(
            RangeError, match=r"^invalid_argument: t must be between 0.001 and 600$"
        ):
            check_range("t", bad, 0.001, 600.0, integer=False)


# --- one-sided limits -----------------------------------------------------------------


def test_without_a_high_bound_only_the_low_one_counts() -> None:
    assert check_range("n", 0, 0, None) == 0
    assert check_range("n", 2**70, 0, None) == 2**70
    assert check_range("t", math.inf, 0, None, integer=False) == math.inf
    with pytest.raises(RangeError) as info:
        check_range("n", -1, 0, None)
    assert str(info.value) == "invalid_argument: n must be at least 0"
    assert info.value.details == {"field": "n", "low": 0}


def test_without_a_low_bound_only_the_high_one_counts() -> None:
    assert check_range("n", 10, None, 10) == 10
    assert check_range("n", -(2**70), None, 10) == -(2**70)
    with pytest.raises(RangeError) as info:
        check_range("n", 11, None, 10)
    assert str(info.value) == "invalid_argument: n must be at most 10"
    assert info.value.details == {"field": "n", "high": 10}


@pytest.mark.parametrize(
    ("low", "high", "message"),
    [(0, None, "t must be at least 0"), (None, 1, "t must be at most 1")],
)
def test_nan_is_out_of_a_one_sided_range_too(
    low: float | None, high: float | None, message: str
) -> None:
    with pytest.raises(RangeError, match=rf"^invalid_argument: {message}$"):
        check_range("t", math.nan, low, high, integer=False)


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None])
def test_one_sided_limits_check_the_type_first(value: object) -> None:
    with pytest.raises(RangeTypeError, match=r"^invalid_argument: n must be an int$"):
        check_range("n", value, 0, None)
    with pytest.raises(RangeTypeError, match=r"^invalid_argument: n must be an int$"):
        check_range("n", value, None, 0)


def test_at_least_one_bound_is_required() -> None:
    with pytest.raises(TypeError, match="needs low, high or both"):
        check_range("n", 1, None, None)


# --- how bounds print -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("bound", "text"),
    [
        (0, "0"),
        (-1, "-1"),
        (1 << 40, "1099511627776"),
        (0.0, "0"),
        (86_400.0, "86400"),
        (4 * 1024.0**3, "4294967296"),
        (0.001, "0.001"),
        (0.05, "0.05"),
        (2.5, "2.5"),
        (1e300, "1e+300"),
        (math.inf, "inf"),
    ],
)
def test_bounds_print_as_people_write_them(bound: float, text: str) -> None:
    assert format_number(bound) == text


def test_a_float_bound_prints_without_a_trailing_zero_in_the_message() -> None:
    with pytest.raises(RangeError, match=r"^invalid_argument: t must be between 0.01 and 86400$"):
        check_range("t", 0, 0.01, 86_400.0, integer=False)


def test_a_struct_checked_in_post_init_still_fails_decoding_with_a_validation_error() -> None:
    with pytest.raises(msgspec.ValidationError, match="messages must be between 1 and 65536"):
        msgspec.json.decode(b'{"messages": 0}', type=CreditWindow)
