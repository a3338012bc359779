"""The log processor `redact_fields`: no log record carries a credential."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from phloem.base.logs import configure_logging, get_logger, redact_fields

SECRET = "s3cretLOGVALUE_123456"


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    configure_logging("debug", "json", out)
    try:
        yield out
    finally:
        configure_logging("warning", "console")  # what tests/conftest.py sets


def test_every_field_of_a_record_is_redacted(stream: io.StringIO) -> None:
    class Reason:
        def __repr__(self) -> str:
            return f"Reason(message='Authorization: Bearer {SECRET}')"

    log = get_logger("test")
    log.debug(
        "child_exited",
        reason=f"exception: RuntimeError: {{'api_key': '{SECRET}'}}",
        api_key=SECRET,
        nested={"headers": {"Authorization": f"Basic {SECRET}"}, "n": 1},
        items=[f'{{"token": "{SECRET}"}}'],
        obj=Reason(),
        count=3,
    )
    try:
        raise ValueError(f"refused password={SECRET}")
    except ValueError:
        log.exception("handler_failed")
    text = stream.getvalue()
    assert SECRET not in text, text
    first, second = (json.loads(line) for line in text.splitlines())
    assert first["api_key"] == "[redacted]" and first["count"] == 3
    assert first["nested"] == {"headers": {}, "n": 1}
    assert first["obj"] == "Reason(message='Authorization: Bearer [redacted]')"
    assert "password=[redacted]" in second["exception"]


def test_a_record_without_secrets_is_unchanged_and_the_processor_never_raises() -> None:
    record = {"event": "ok", "n": 1, "path": "/tmp/x", "obj": object, "none": None}
    assert redact_fields(None, "info", dict(record)) == record

    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    out = redact_fields(None, "info", {"event": "e", "x": Hostile(), "n": 2})
    assert out == {"event": "e", "x": "[unloggable: RuntimeError]", "n": 2}
