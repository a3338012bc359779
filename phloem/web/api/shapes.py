"""ADK's JSON shapes: phloem's events and sessions as ADK's pydantic models dump them
(`by_alias=True, exclude_none=True`: camelCase keys, bytes as URL-safe base64), and ADK's
run request (`RunAgentRequest`) read into what a session turn takes.

phloem's content is ADK's content shape already, so the translation is names only. User
data — function call arguments, function responses, state values — is passed through as
it is: only the keys of ADK's own models are renamed. A removed state key (phloem's
`state_remove`) is `null` in `stateDelta`, as ADK deletes a key.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.jsonvalue import JsonValueError, parse_json_text

if TYPE_CHECKING:
    from phloem.actors.sessions.protocol import SessionDetail, SessionSummary
    from phloem.agents.events import Event, EventActions
    from phloem.protocols.content import Content, Part

JSON = dict[str, Any]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


def part_json(part: Part) -> JSON:
    """One `Part` as ADK (google-genai) dumps it."""
    out: JSON = {}
    if part.text is not None:
        out["text"] = part.text
        if part.thought:
            out["thought"] = True
    if part.thought_signature is not None:
        out["thoughtSignature"] = b64(part.thought_signature)
    if part.function_call is not None:
        call = part.function_call
        out["functionCall"] = {"name": call.name, "args": call.args}
        if call.id is not None:
            out["functionCall"]["id"] = call.id
    if part.function_response is not None:
        done = part.function_response
        out["functionResponse"] = {"name": done.name, "response": done.response}
        if done.id is not None:
            out["functionResponse"]["id"] = done.id
    if part.inline_data is not None:
        blob = part.inline_data
        out["inlineData"] = {"mimeType": blob.mime_type, "data": b64(blob.data)}
    return out


def content_json(content: Content) -> JSON:
    return {"role": content.role, "parts": [part_json(p) for p in content.parts]}


def actions_json(actions: EventActions | None = None) -> JSON:
    """ADK's `EventActions` (None: no actions); its always-present maps are here too."""
    delta: JSON = {} if actions is None else dict(actions.state_delta)
    for key in () if actions is None else actions.state_remove:
        delta[key] = None
    out: JSON = {
        "stateDelta": delta,
        "artifactDelta": {},
        "requestedAuthConfigs": {},
        "requestedToolConfirmations": {},
    }
    if actions is not None and actions.escalate:
        out["escalate"] = True
    return out


def event_json(event: Event) -> JSON:
    """One phloem `Event` as ADK's `Event` (errors as `errorCode` / `errorMessage`)."""
    out: JSON = {
        "id": event.id,
        "invocationId": event.invocation_id,
        "author": event.author,
        "timestamp": event.timestamp,
        "actions": actions_json(event.actions),
    }
    if event.content is not None:
        out["content"] = content_json(event.content)
    if event.partial:
        out["partial"] = True
    if event.error is not None:
        out["errorCode"] = str(event.error.kind)
        out["errorMessage"] = event.error.message
    return out


def session_json(summary: SessionSummary, user: str, detail: SessionDetail | None = None) -> JSON:
    """A session as ADK's `Session`: its app is its agent; a listing has no events and
    no state, as ADK's listings have none."""
    return {
        "id": summary.id,
        "appName": summary.agent,
        "userId": user,
        "state": {} if detail is None else dict(detail.state),
        "events": [] if detail is None else [event_json(e) for e in detail.events],
        "lastUpdateTime": summary.updated,
    }


# --- requests -----------------------------------------------------------------------------


def parse_body(data: bytes, what: str) -> JSON:
    """A request body: one JSON object (an empty body is `{}`); `invalid_argument` else."""
    if not data.strip():
        return {}
    try:
        value = parse_json_text(data, what)
    except JsonValueError as err:
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, str(err)) from None
    if not isinstance(value, dict):
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"{what} must be a JSON object")
    return value


def field(body: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A field given by its camelCase alias or its snake_case name (ADK accepts both)."""
    return body[camel] if camel in body else body.get(snake)


def _text(body: Mapping[str, Any], camel: str, snake: str, *, required: bool) -> str | None:
    value = field(body, camel, snake)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"{camel} must be a non-empty string")
    return value


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What a session turn takes from ADK's `RunAgentRequest`."""

    app: str
    user: str
    session_id: str
    prompt: str
    streaming: bool


# ADK request fields that phloem's turns have no counterpart for: given (not null, not
# empty), each is answered 501 naming it.
UNSUPPORTED_RUN_FIELDS = (
    ("stateDelta", "state_delta"),
    ("functionCallEventId", "function_call_event_id"),
    ("invocationId", "invocation_id"),
)


def run_request(body: Mapping[str, Any]) -> RunRequest:
    """ADK's `RunAgentRequest` → `RunRequest`: the new message's text parts are the
    prompt; any other part, and resuming or state-setting fields, are `unsupported`."""
    app = _text(body, "appName", "app_name", required=True)
    user = _text(body, "userId", "user_id", required=True)
    session_id = _text(body, "sessionId", "session_id", required=True)
    assert app is not None and user is not None and session_id is not None
    for camel, snake in UNSUPPORTED_RUN_FIELDS:
        if field(body, camel, snake):
            raise PhloemError(ErrorKind.UNSUPPORTED, f"{camel} is not supported by phloem api")
    streaming = field(body, "streaming", "streaming")
    if streaming is not None and not isinstance(streaming, bool):
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, "streaming must be true or false")
    return RunRequest(app, user, session_id, message_text(body), bool(streaming))


def message_text(body: Mapping[str, Any]) -> str:
    """The text of `newMessage` (its text parts, joined); other parts are `unsupported`."""
    message = field(body, "newMessage", "new_message")
    if not isinstance(message, dict):
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, "newMessage must be a content object")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, "newMessage.parts must be a non-empty list")
    texts = []
    for i, part in enumerate(parts):
        if not isinstance(part, dict):
            raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"newMessage.parts[{i}] is not an object")
        text = part.get("text")
        others = sorted(k for k, v in part.items() if k != "text" and v not in (None, False))
        if others or not isinstance(text, str):
            what = ", ".join(others) or "a part without text"
            raise PhloemError(
                ErrorKind.UNSUPPORTED,
                f"newMessage.parts[{i}]: {what} is not supported by phloem api (text only)",
            )
        texts.append(text)
    prompt = "\n".join(texts)
    if not prompt.strip():
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, "newMessage has no text")
    return prompt
