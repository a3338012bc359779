"""`phloem top`: its arguments are checked before it connects (usage error, exit code 2)."""

from __future__ import annotations

import io

import pytest

from phloem.cli.main import main

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "0.04"], "interval must be between 0.05 and 3600"),
        (["--interval", "3601"], "interval must be between 0.05 and 3600"),
        (["--interval", "nan"], "interval must be between 0.05 and 3600"),
        (["--iterations", "0"], "iterations must be at least 1"),
    ],
)
def test_top_refuses_out_of_range_arguments_as_a_usage_error(args: list[str], message: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["top", *args, "--socket", "/nonexistent/phloem.sock"], out, err) == 2
    assert err.getvalue() == f"phloem top: {message}\n"
    assert out.getvalue() == ""
