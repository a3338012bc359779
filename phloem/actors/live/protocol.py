"""The Live service's messages (client ↔ `live/service`) and the event envelope.

Requests carry the caller as owner: `LiveOpen` → `LiveOpened(ref)`; `LiveSend`,
`LiveStatus`, `LiveClose` name that ref; `LiveList` lists every session (no refs).
Events reach subscribers of the topic `live/<ref>` as `LiveEvent`s.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import msgspec

from phloem.protocols.errors import ErrorKind
from phloem.protocols.refs import RefKind

__all__ = [
    "EVENT_KINDS",
    "LIVE_REF_KIND",
    "SCHEMA_VERSION",
    "SERVICE_PATH",
    "LiveClose",
    "LiveClosed",
    "LiveEvent",
    "LiveList",
    "LiveOpen",
    "LiveOpened",
    "LiveRequest",
    "LiveSend",
    "LiveSent",
    "LiveStatus",
    "ToolResponseIn",
    "topic_name",
]

SCHEMA_VERSION: Final = 1
SERVICE_PATH: Final = "live/service"
LIVE_REF_KIND: Final = RefKind(
    name="live",
    prefix="live_",
    invalid_error=ErrorKind.INVALID_LIVE_REF,
    not_owner_error=ErrorKind.NOT_LIVE_OWNER,
    too_many_error=ErrorKind.TOO_MANY_LIVE_SESSIONS,
)
EVENT_KINDS: Final = (
    "ready",
    "text",
    "thought",
    "audio",
    "code",
    "input_transcription",
    "output_transcription",
    "tool_call",
    "tool_call_cancellation",
    "tool_result",
    "interrupted",
    "generation_complete",
    "turn_complete",
    "usage",
    "go_away",
    "reconnecting",
    "closed",
)


def topic_name(ref: str) -> str:
    """The event topic of the session behind `ref`."""
    return f"live/{ref}"


class LiveEvent(msgspec.Struct, frozen=True):
    """One event of a Live session, in the order the session saw them (`sequence`).

    `turn_epoch` counts completed turns, `generation_epoch` interruptions: an `audio`
    event of an older generation than the last `interrupted` is stale.
    """

    kind: str
    payload: dict[str, Any]
    sequence: int
    turn_epoch: int
    generation_epoch: int
    timestamp: float
    schema_version: int = SCHEMA_VERSION


class LiveOpen(msgspec.Struct, frozen=True, tag="open"):
    """Open a session (`config`: see `phloem.actors.live.options`)."""

    config: dict[str, Any] | None = None


class ToolResponseIn(msgspec.Struct, frozen=True):
    """The client's answer to one function call of a `tool_call` event."""

    id: str
    name: str
    response: dict[str, Any]


class LiveSend(msgspec.Struct, frozen=True, tag="send"):
    """Input for the session: each given field becomes one frame, all admitted or none."""

    ref: str
    text: str | None = None
    audio: bytes | None = None
    video: bytes | None = None
    video_mime: str = "image/jpeg"
    activity: Literal["start", "end"] | None = None
    audio_stream_end: bool = False
    tool_responses: list[ToolResponseIn] | None = None


class LiveStatus(msgspec.Struct, frozen=True, tag="status"):
    ref: str


class LiveClose(msgspec.Struct, frozen=True, tag="close"):
    ref: str


class LiveList(msgspec.Struct, frozen=True, tag="list"):
    pass


LiveRequest: TypeAlias = LiveOpen | LiveSend | LiveStatus | LiveClose | LiveList


class LiveOpened(msgspec.Struct, frozen=True):
    ref: str


class LiveSent(msgspec.Struct, frozen=True):
    """Frames admitted, and the queue behind them."""

    frames: int
    queued_messages: int
    queued_bytes: int


class LiveClosed(msgspec.Struct, frozen=True):
    reason: str
