"""The Runs page's filter and one run's page: its events as a timeline, its outcome, its
telemetry trace.

The filter (`?kind=agent&status=failed`) is applied by the server to the first page and
by the page's script to every update (each run's `data-kind` and `data-state`), so it
holds while the page updates live. A run's page draws each event of the record at its
time since the run started (a bar for what has a duration: a model call's wait, a
tool's run) and lists them with their content-free details; its trace id links to
`[web] trace_url` when one is set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from phloem.protocols.runs import OUTCOMES, RunSummary
from phloem.web.timeline import Step, steps
from phloem.web.views import MAX_ERROR_CHARS, clock, e

KINDS = ("agent", "session", "eval", "planning")
STATES = ("running", *OUTCOMES)
LANE_W, LANE_H, LANE_PAD = 720, 14, 110
MAX_TRACE_ID_CHARS = 64  # of a trace id shown or linked (W3C: 32 hex digits)


def state_of(run: RunSummary) -> str:
    return run.outcome or "running"


def wanted(query: Mapping[str, str]) -> tuple[str, str]:
    """The filter asked in a query (`kind`, `status`); an unknown value is no filter."""
    kind = query.get("kind", "")
    status = query.get("status", "")
    return (kind if kind in KINDS else "", status if status in STATES else "")


def matching(runs: Iterable[RunSummary], kind: str, status: str) -> list[RunSummary]:
    return [
        r for r in runs if (not kind or r.kind == kind) and (not status or state_of(r) == status)
    ]


def filter_form(kind: str, status: str) -> str:
    def select(name: str, values: tuple[str, ...], chosen: str) -> str:
        options = "".join(
            f'<option value="{e(v)}"{" selected" if v == chosen else ""}>{e(v or "any")}</option>'
            for v in ("", *values)
        )
        return f"<label>{name} <select name={name}>{options}</select></label> "

    return (
        '<form class=filter method=get action="/runs">'
        + select("kind", KINDS, kind)
        + select("status", STATES, status)
        + "<button>filter</button></form>"
    )


def filter_attrs(kind: str, status: str) -> str:
    """The `<body>` attributes the page's script filters every update by."""
    return f' data-filter-kind="{e(kind)}" data-filter-status="{e(status)}"'


def _trace(trace_id: str, trace_url: str) -> str:
    if not trace_id:
        return "no trace (telemetry off)"
    shown = e(trace_id[:MAX_TRACE_ID_CHARS])
    if not trace_url:
        return f"trace <code class=trace>{shown}</code>"
    href = e(trace_url.replace("{trace_id}", trace_id[:MAX_TRACE_ID_CHARS]))
    return f'trace <a class=trace href="{href}" rel="noreferrer">{shown}</a>'


def _lanes(run: RunSummary, drawn: list[Step], now: float) -> str:
    """An SVG timeline: one lane per kind of step, a bar (or a tick) per step."""
    lanes = [
        w
        for w in ("model", "tool", "plan", "step", "confirm", "case", "error", "other")
        if any(s.what == w for s in drawn)
    ]
    end = (run.ended_at or now) - run.started_at
    span = max(end, max((s.offset_s for s in drawn), default=0.0), 1e-3)
    width = LANE_W - LANE_PAD
    marks = []
    for s in drawn:
        y = lanes.index(s.what) * LANE_H + 2
        x1 = LANE_PAD + s.offset_s / span * width
        length = (s.duration_s or 0.0) / span * width
        title = f"{s.label} at +{s.offset_s:.3f} s" + (
            "" if s.duration_s is None else f", {s.duration_s:.3f} s"
        )
        marks.append(
            f'<rect class="w-{e(s.what)}" x="{max(LANE_PAD, x1 - length):.1f}" y="{y}"'
            f' width="{max(2.0, length):.1f}" height="{LANE_H - 4}">'
            f"<title>{e(title)}</title></rect>"
        )
    labels = "".join(
        f'<text x=4 y="{i * LANE_H + LANE_H - 3}" class=axis>{e(w)}</text>'
        for i, w in enumerate(lanes)
    )
    height = max(1, len(lanes)) * LANE_H + 16
    return (
        f'<svg class=timeline width={LANE_W} height={height} viewBox="0 0 {LANE_W} {height}"'
        f' data-points="{len(drawn)}" role=img aria-label="timeline">{labels}{"".join(marks)}'
        f"<text x={LANE_PAD} y={height - 3} class=axis>+0 s</text>"
        f"<text x={LANE_W - 4} y={height - 3} class=axis text-anchor=end>+{span:.3f} s</text>"
        "</svg>"
    )


def run_detail(run: RunSummary | None, run_id: str, trace_url: str, now: float) -> str:
    """One run: its outcome, times, owner, trace, and its events as a timeline."""
    if run is None:
        return (
            f'<p class=empty data-run="{e(run_id)}">run {e(run_id)} is not in the record '
            "(unknown, or forgotten: the record keeps the last runs only)</p>"
        )
    state = state_of(run)
    drawn = steps(run)
    took = "" if run.ended_at is None else f" · took {run.ended_at - run.started_at:.3f} s"
    why = f" · <span class=bad>{e((run.error or '')[:MAX_ERROR_CHARS])}</span>" if run.error else ""
    rows = "".join(
        f'<tr data-what="{e(s.what)}" data-kind="{e(s.note.kind)}"><td class=num>{s.note.seq}</td>'
        f"<td class=num>+{s.offset_s:.3f} s</td><td class=w-{e(s.what)}>{e(s.what)}</td>"
        f"<td>{e(s.label)}</td>"
        f"<td class=num>{'' if s.duration_s is None else f'{s.duration_s:.3f} s'}</td>"
        f"<td>{''.join(f' {e(k)}={e(v)}' for k, v in s.note.detail.items())}</td></tr>"
        for s in drawn
    )
    older = (
        f"<p class=empty>{run.events_dropped} older events are no longer kept</p>"
        if run.events_dropped
        else ""
    )
    return (
        f'<div class="run-detail" data-run="{e(run.id)}" data-kind="{e(run.kind)}"'
        f' data-state="{e(state)}" data-events="{run.event_count}">'
        f"<h2>{e(run.kind)} · {e(run.name)} <small>{e(run.id)}</small></h2>"
        f'<p><span class="st-{e(state)}">{e(state)}</span>{why} · started '
        f"{clock(run.started_at)} UTC{took} · {e(run.owner)} · {run.event_count} events · "
        f"{_trace(run.trace_id, trace_url)}</p>"
        f"{_lanes(run, drawn, now)}{older}"
        "<table><thead><tr><th>#</th><th>at</th><th>what</th><th>event</th><th>took</th>"
        f"<th>details</th></tr></thead><tbody>{rows}</tbody></table></div>"
    )
