"""phloem.limits.check_range: one range check, one message style, PhloemError kinds."""

from __future__ import annotations

import math

import msgspec
import pytest

from phloem.limits import RangeError, RangeTypeError, check_range
from phloem.protocols.errors import PhloemError
from phloem.supervision.credit import CreditWindow


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
        check_range("timeout", 0, 1, 5, kind="invalid_config")
    assert info.value.kind == "invalid_config"


def test_a_struct_checked_in_post_init_still_fails_decoding_with_a_validation_error() -> None:
    with pytest.raises(msgspec.ValidationError, match="messages must be between 1 and 65536"):
        msgspec.json.decode(b'{"messages": 0}', type=CreditWindow)
