"""One harness session's transcript, read-only, with its compaction decisions marked.

The transcript is untrusted text (what users typed, what models and tools answered):
every piece is escaped, cut to `MAX_PART_CHARS`, and at most the last
`MAX_TRANSCRIPT_EVENTS` events are read (the older ones are counted). A function
response the session's compaction elides from model requests is marked `elided`, an
event of a dropped turn `dropped` (the transcript keeps both whole; see
`phloem.protocols.compaction`). Inline media show as their type and size, never their
bytes. Secret-shaped state keys were pruned by the daemon before they left it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from phloem.web.views import MAX_ERROR_CHARS, clock, e

MAX_TRANSCRIPT_EVENTS = 500  # the last events of a transcript read for its page
MAX_PART_CHARS = 4000  # of one text, call or result shown (the rest counted)
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def _cut(text: str) -> str:
    if len(text) <= MAX_PART_CHARS:
        return e(text)
    return (
        f"{e(text[:MAX_PART_CHARS])}<span class=warn>… ({len(text) - MAX_PART_CHARS} more)</span>"
    )


def _json(value: Any) -> str:
    return _cut(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))


def _part(part: Mapping[str, Any], elided: bool) -> str:
    if part.get("function_call"):
        call = part["function_call"]
        return (
            f"<div class=call>call <b>{e(call.get('name'))}</b> "
            f"<code>{_json(call.get('args', {}))}</code></div>"
        )
    if part.get("function_response"):
        answer = part["function_response"]
        mark = " <span class=mark-elided>elided from model requests</span>" if elided else ""
        return (
            f"<div class=answer>result of <b>{e(answer.get('name'))}</b>{mark} "
            f"<code>{_json(answer.get('response', {}))}</code></div>"
        )
    if part.get("inline_data"):
        blob = part["inline_data"]
        size = len(str(blob.get("data", ""))) * 3 // 4  # base64 on the wire
        return f"<div class=media>[{e(blob.get('mime_type'))}, about {size} bytes]</div>"
    if part.get("text") is not None:
        cls = "thought" if part.get("thought") else "text"
        return f"<div class={cls}>{_cut(str(part['text']))}</div>"
    return ""


def transcript(detail: Mapping[str, Any]) -> str:
    """A `SessionDetail` (as plain data): the session's facts, then its events."""
    summary = detail.get("summary", {})
    marks = detail.get("compaction") or {}
    elided = set(marks.get("elided", ()))
    dropped = set(marks.get("dropped", ()))
    events = detail.get("events", [])
    count = int(detail.get("event_count", len(events)))
    rows = []
    for event in events:
        eid = str(event.get("id", ""))
        content = event.get("content") or {}
        parts = "".join(_part(p, eid in elided) for p in content.get("parts", ()))
        error = event.get("error")
        if error:
            message = str(error.get("message", ""))[:MAX_ERROR_CHARS]
            parts += f"<div class=bad>error {e(error.get('kind'))}: {e(message)}</div>"
        flags = []
        if eid in dropped:
            flags.append("<span class=mark-dropped>turn dropped from model requests</span>")
        classes = " ".join(
            c for c in ("dropped" if eid in dropped else "", "elided" if eid in elided else "") if c
        )
        rows.append(
            f'<li class="event {classes}" data-event="{e(eid)}"'
            f' data-role="{e(content.get("role", ""))}">'
            f"<p class=who>{clock(event.get('timestamp'))} <b>{e(event.get('author'))}</b>"
            f" {e(content.get('role', ''))} {''.join(flags)}</p>{parts}</li>"
        )
    older = count - len(events)
    more = f"<p class=empty>{older} older events not shown</p>" if older > 0 else ""
    decided = ""
    if marks:
        decided = (
            f"<p class=compaction>compaction: {len(elided)} events with elided results, "
            f"{len(dropped)} events in dropped turns · calibration "
            f"{float(marks.get('calibration', 1.0)):.2f}"
            + (" · <span class=warn>budget exhausted once</span>" if marks.get("exhausted") else "")
            + "</p>"
        )
    return (
        f'<div class=session data-session="{e(summary.get("id"))}">'
        f"<p>agent <b>{e(summary.get('agent'))}</b> · workdir <code>{e(summary.get('workdir'))}"
        f"</code> · {count} events · {'busy' if summary.get('busy') else 'idle'} · updated "
        f"{clock(summary.get('updated'))} UTC · model {e(detail.get('model') or 'none')}</p>"
        f"{decided}{more}<ol class=transcript>{''.join(rows)}</ol></div>"
    )
