"""The one bounded file reader: regular files only, never blocking, one byte past the limit."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from phloem.cli.main import main
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.files import UnreadableFile, read_bounded, read_prefix


def test_a_file_at_the_limit_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    at, over = tmp_path / "at", tmp_path / "over"
    at.write_bytes(b"x" * 100)
    over.write_bytes(b"x" * 101)
    assert read_bounded(at, 100, ErrorKind.INVALID_ARGUMENT) == b"x" * 100
    with pytest.raises(PhloemError) as info:
        read_bounded(over, 100, ErrorKind.CONFIG_INVALID)
    assert (info.value.kind, info.value.message) == (
        ErrorKind.CONFIG_INVALID,
        f"{over}: larger than 100 bytes",
    )
    assert read_prefix(over, 100) == (b"x" * 101, 101)  # the prefix says "larger"


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", ["fifo", "directory", "device", "missing"])
def test_what_is_not_a_regular_file_is_refused_without_blocking(tmp_path: Path, kind: str) -> None:
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)  # no writer: a plain open() would wait for ever
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        path = Path("/dev/zero")  # never ends
    with pytest.raises(UnreadableFile) as info:
        read_prefix(path, 1 << 20)
    expected = "cannot read: No such file" if kind == "missing" else "not a regular file"
    assert str(info.value).startswith(expected)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", ["fifo", "directory", "missing"])
def test_plan_validate_refuses_what_it_cannot_read_with_a_kind(tmp_path: Path, kind: str) -> None:
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    out, err = io.StringIO(), io.StringIO()
    assert main(["plan", "validate", str(path), "--json"], out, err) == 1
    error = json.loads(out.getvalue())["error"]
    assert error["kind"] == "invalid_argument" and error["message"].startswith(str(path))
    assert "Traceback" not in err.getvalue()
