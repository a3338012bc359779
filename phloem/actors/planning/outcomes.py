"""What a planning callback child answers: one tagged msgspec struct (field `tag`).

The child (`worker`) checks the adapter's return value and answers with one `Outcome`
as JSON; the parent (`callbacks`) decodes it with a typed decoder (`decode`), so only
these shapes, holding plain JSON data, ever reach the run:

- `OkOutcome(value)` / `CompleteOutcome(value)` (tags ``ok``, ``complete``),
  `ContinueOutcome()`, `ReplanOutcome(plan)`, `FailOutcome(reason)` /
  `ErrorOutcome(reason)` (``fail``, ``error``): the callback's own outcome;
- `InvalidResult(message)`: the callback returned something that is not one of its
  outcomes;
- `InvalidOutput(message, of)`: a right outcome holding non-JSON data (`of` names the
  outcome: ``ok``, ``complete``, ``replan``, ...), or an answer over the size limit
  (`of` None);
- `CallbackRaised(error_type, message)` (``exception``; message redacted);
- `MemoryExceeded()`: `MemoryError` under the run's memory cap (`MEMORY_EXCEEDED_JSON` is
  its encoding made ahead of time, so that answering it allocates little).

Lean on purpose: a callback child imports it (msgspec only).
"""

from __future__ import annotations

from typing import Any

import msgspec


class _Outcome(msgspec.Struct, frozen=True, tag_field="tag", forbid_unknown_fields=True):
    pass


class OkOutcome(_Outcome, frozen=True, tag="ok"):
    value: Any


class CompleteOutcome(_Outcome, frozen=True, tag="complete"):
    value: Any


class ContinueOutcome(_Outcome, frozen=True, tag="continue"):
    pass


class ReplanOutcome(_Outcome, frozen=True, tag="replan"):
    plan: Any


class FailOutcome(_Outcome, frozen=True, tag="fail"):
    reason: Any


class ErrorOutcome(_Outcome, frozen=True, tag="error"):
    reason: Any


class InvalidResult(_Outcome, frozen=True, tag="invalid_result"):
    message: str


class InvalidOutput(_Outcome, frozen=True, tag="invalid_output"):
    message: str
    of: str | None = None


class CallbackRaised(_Outcome, frozen=True, tag="exception"):
    error_type: str
    message: str


class MemoryExceeded(_Outcome, frozen=True, tag="memory_exceeded"):
    pass


Outcome = (
    OkOutcome
    | CompleteOutcome
    | ContinueOutcome
    | ReplanOutcome
    | FailOutcome
    | ErrorOutcome
    | InvalidResult
    | InvalidOutput
    | CallbackRaised
    | MemoryExceeded
)

_encoder = msgspec.json.Encoder(order="sorted")
_decoder = msgspec.json.Decoder(Outcome)


def encode(outcome: Outcome) -> bytes:
    """Canonical JSON (sorted keys, no whitespace) of `outcome`: what the child sends."""
    return _encoder.encode(outcome)


def decode(data: bytes) -> Outcome:
    """The outcome in `data`; `msgspec.DecodeError` / `ValidationError` if it is none."""
    return _decoder.decode(data)


def describe(outcome: Outcome) -> str:
    """The message of an invalid outcome, else its tag (for error reports)."""
    if isinstance(outcome, InvalidResult | InvalidOutput | CallbackRaised):
        return outcome.message
    return str(type(outcome).__struct_config__.tag)


MEMORY_EXCEEDED_JSON = encode(MemoryExceeded())
