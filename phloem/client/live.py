"""Gemini Live methods of `phloem.Client`, `tree.client()` and (as coroutines)
`phloem.AsyncClient`.

    ref = client.live_open({"response_modalities": ["TEXT"]})   # returns before `ready`
    events = client.live_events(ref, phloem.CreditWindow(64, 1 << 20))
    for event in events:                                         # LiveEvent
        if event.kind == "ready":
            client.live_send(ref, text="hello")
        elif event.kind == "turn_complete":
            client.live_close(ref)                               # then a `closed` event

The ref is opaque and bound to this client: its sessions close when the client does.
A subscriber sees events from its subscription on, within its credit window; one that
falls `max_subscriber_messages` behind is detached (`backpressure`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from phloem.actors.live.protocol import (
    LIVE_REF_KIND,
    SERVICE_PATH,
    LiveClose,
    LiveClosed,
    LiveEvent,
    LiveList,
    LiveOpen,
    LiveOpened,
    LiveSend,
    LiveSent,
    LiveStatus,
    ToolResponseIn,
    topic_name,
)
from phloem.client.base import AsyncClientBase, ClientBase, EventStream
from phloem.protocols.credit import CreditWindow
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.refs import parse_ref

if TYPE_CHECKING:
    from phloem.client.aiostream import AsyncEventStream

DEFAULT_LIVE_WINDOW = CreditWindow(256, 8 * 1024 * 1024)


def _unavailable(err: PhloemError) -> PhloemError:
    if err.kind != ErrorKind.UNKNOWN_ACTOR:
        return err
    return PhloemError(ErrorKind.LIVE_UNAVAILABLE, "the daemon runs no live service")


def _open(config: Mapping[str, Any] | None) -> LiveOpen:
    if config is not None and not isinstance(config, Mapping):
        raise PhloemError(ErrorKind.INVALID_LIVE_CONFIG, "live config must be a mapping")
    return LiveOpen(dict(config) if config is not None else None)


def _send(
    ref: str,
    text: str | None,
    audio: bytes | None,
    video: bytes | None,
    video_mime: str,
    activity: str | None,
    audio_stream_end: bool,
    tool_responses: Sequence[Mapping[str, Any]] | None,
) -> LiveSend:
    if activity not in (None, "start", "end"):
        raise PhloemError(ErrorKind.INVALID_LIVE_INPUT, "activity must be 'start' or 'end'")
    responses = None
    if tool_responses is not None:
        try:
            responses = [
                ToolResponseIn(str(r["id"]), str(r["name"]), dict(r["response"]))
                for r in tool_responses
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise PhloemError(
                ErrorKind.INVALID_LIVE_INPUT,
                f"tool_responses: each needs id, name and a response mapping ({exc})",
            ) from None
    return LiveSend(
        ref=ref,
        text=text,
        audio=bytes(audio) if audio is not None else None,
        video=bytes(video) if video is not None else None,
        video_mime=video_mime,
        activity=activity,  # type: ignore[arg-type]
        audio_stream_end=audio_stream_end,
        tool_responses=responses,
    )


def _topic(ref: str) -> str:
    parse_ref(ref, LIVE_REF_KIND)
    return topic_name(ref)


def _not_owner(err: PhloemError) -> PhloemError:
    if err.kind in (ErrorKind.NOT_OWNER, ErrorKind.UNKNOWN_STREAM):
        return PhloemError(ErrorKind.NOT_LIVE_OWNER, "live ref is not held by this owner")
    return err


class LiveMethods(ClientBase):
    """`live_open`, `live_send`, `live_events`, `live_status`, `live_close`, `live_list`."""

    def _live_ask(self, message: Any, reply_type: Any = Any) -> Any:
        try:
            return self.ask(SERVICE_PATH, message, reply_type=reply_type)
        except PhloemError as err:
            raise _unavailable(err) from None

    def live_open(self, config: Mapping[str, Any] | None = None) -> str:
        """Open a Live session; its opaque, owner-bound ref (before it is `ready`)."""
        opened: LiveOpened = self._live_ask(_open(config), LiveOpened)
        return opened.ref

    def live_send(
        self,
        ref: str,
        *,
        text: str | None = None,
        audio: bytes | None = None,
        video: bytes | None = None,
        video_mime: str = "image/jpeg",
        activity: str | None = None,
        audio_stream_end: bool = False,
        tool_responses: Sequence[Mapping[str, Any]] | None = None,
    ) -> LiveSent:
        """Queue input (`not_ready` before `ready`, `ingress_backpressure` when full)."""
        message = _send(
            ref, text, audio, video, video_mime, activity, audio_stream_end, tool_responses
        )
        sent: LiveSent = self._live_ask(message, LiveSent)
        return sent

    def live_events(
        self, ref: str, window: CreditWindow = DEFAULT_LIVE_WINDOW
    ) -> EventStream[LiveEvent]:
        """The session's events from now on, under `window` credit; ends after `closed`."""
        try:
            return self.subscribe(_topic(ref), window, event_type=LiveEvent)
        except PhloemError as err:
            raise _not_owner(err) from None

    def live_status(self, ref: str) -> dict[str, Any]:
        status: dict[str, Any] = self._live_ask(LiveStatus(ref))
        return status

    def live_close(self, ref: str) -> str:
        """Close the session cleanly; the close reason (`client_closed`)."""
        closed: LiveClosed = self._live_ask(LiveClose(ref), LiveClosed)
        return closed.reason

    def live_list(self) -> list[dict[str, Any]]:
        """Every Live session of the daemon: number, state, model, reconnects (no refs)."""
        sessions: list[dict[str, Any]] = self._live_ask(LiveList())
        return sessions


class AsyncLiveMethods(AsyncClientBase):
    """The same methods as coroutines, for `phloem.AsyncClient`."""

    async def _live_ask(self, message: Any, reply_type: Any = Any) -> Any:
        try:
            return await self.ask(SERVICE_PATH, message, reply_type=reply_type)
        except PhloemError as err:
            raise _unavailable(err) from None

    async def live_open(self, config: Mapping[str, Any] | None = None) -> str:
        opened: LiveOpened = await self._live_ask(_open(config), LiveOpened)
        return opened.ref

    async def live_send(
        self,
        ref: str,
        *,
        text: str | None = None,
        audio: bytes | None = None,
        video: bytes | None = None,
        video_mime: str = "image/jpeg",
        activity: str | None = None,
        audio_stream_end: bool = False,
        tool_responses: Sequence[Mapping[str, Any]] | None = None,
    ) -> LiveSent:
        message = _send(
            ref, text, audio, video, video_mime, activity, audio_stream_end, tool_responses
        )
        sent: LiveSent = await self._live_ask(message, LiveSent)
        return sent

    async def live_events(
        self, ref: str, window: CreditWindow = DEFAULT_LIVE_WINDOW
    ) -> AsyncEventStream[LiveEvent]:
        try:
            return await self.subscribe(_topic(ref), window, event_type=LiveEvent)
        except PhloemError as err:
            raise _not_owner(err) from None

    async def live_status(self, ref: str) -> dict[str, Any]:
        status: dict[str, Any] = await self._live_ask(LiveStatus(ref))
        return status

    async def live_close(self, ref: str) -> str:
        closed: LiveClosed = await self._live_ask(LiveClose(ref), LiveClosed)
        return closed.reason

    async def live_list(self) -> list[dict[str, Any]]:
        sessions: list[dict[str, Any]] = await self._live_ask(LiveList())
        return sessions
