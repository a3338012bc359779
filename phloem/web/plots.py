"""Plots drawn on the server as inline SVG: no client library, no script, nothing fetched.

`sparkline` is the small line in a tree row; `chart` a titled line chart with its scale
and time span; `bars` a bar chart of per-minute counts. Every one carries
`data-points="N"` (the points drawn) so a reader — or a test — can tell an empty plot
from a drawn one. Labels are escaped like every other value on a page.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from html import escape

Point = tuple[float, float]
Format = Callable[[float], str]
SPARK_W, SPARK_H = 90, 18
CHART_W, CHART_H = 520, 120
PAD_L, PAD_R, PAD_T, PAD_B = 56, 8, 18, 18
MAX_DOTS = 60  # a plot with more points marks only its last one


def number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.2f}"


def _scale(points: Sequence[Point], start: float, end: float) -> tuple[float, float, float]:
    top = max((v for _, v in points), default=0.0)
    return start, max(end - start, 1e-9), top if top > 0 else 1.0


def _start(points: Sequence[Point], start: float, end: float) -> float:
    """Where a plot begins: `start`, or its first point when the history is shorter (so a
    few minutes of history fill the plot; its time axis says so)."""
    first = min((t for t, _ in points if start <= t <= end), default=start)
    return first if first < end else start


def _dots(
    points: Sequence[Point], start: float, end: float, top: float, box: tuple[int, int, int, int]
) -> str:
    """A dot on each point while there are few (`MAX_DOTS`), else on the last one."""
    x0, y0, w, h = box
    span = max(end - start, 1e-9)
    shown = [p for p in points if start <= p[0] <= end]
    marked = shown if len(shown) <= MAX_DOTS else shown[-1:]
    return "".join(
        f'<circle cx="{x0 + (t - start) / span * w:.1f}" cy="{y0 + h - v / top * h:.1f}" r="1.8"/>'
        for t, v in marked
    )


def _polyline(
    points: Sequence[Point], start: float, end: float, top: float, box: tuple[int, int, int, int]
) -> str:
    x0, y0, w, h = box
    span = max(end - start, 1e-9)
    coords = " ".join(
        f"{x0 + (t - start) / span * w:.1f},{y0 + h - v / top * h:.1f}"
        for t, v in points
        if start <= t <= end
    )
    return coords


def sparkline(points: Sequence[Point], end: float, span_s: float, what: str) -> str:
    """A small line of `points` over the last `span_s` up to `end` (0 at the bottom)."""
    shown = [p for p in points if end - span_s <= p[0] <= end]
    start = _start(shown, end - span_s, end)
    _, _, top = _scale(shown, start, end)
    box = (2, 2, SPARK_W - 4, SPARK_H - 4)
    coords = _polyline(shown, start, end, top, box)
    last = number(shown[-1][1]) if shown else "none"
    return (
        f'<svg class="spark" width={SPARK_W} height={SPARK_H} viewBox="0 0 {SPARK_W} {SPARK_H}"'
        f' data-points="{len(shown)}" role=img aria-label="{escape(what)}: {last}">'
        f"<title>{escape(what)}: last {last}, max {number(top) if shown else 'none'}</title>"
        f'<polyline points="{coords}"/>{_dots(shown[-1:], start, end, top, box)}</svg>'
    )


def _frame(title: str, top: float, start: float, end: float, fmt: Format, n: int) -> str:
    bottom = PAD_T + CHART_H - PAD_T - PAD_B
    left = time.strftime("%H:%M:%S", time.gmtime(start))
    right = time.strftime("%H:%M:%S", time.gmtime(end))
    return (
        f'<svg class=chart width={CHART_W} height={CHART_H} viewBox="0 0 {CHART_W} {CHART_H}"'
        f' data-points="{n}" role=img aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
        f"<text x=4 y={PAD_T + 4} class=axis>{escape(fmt(top))}</text>"
        f"<text x=4 y={bottom} class=axis>0</text>"
        f"<line x1={PAD_L} y1={bottom} x2={CHART_W - PAD_R} y2={bottom} class=base />"
        f"<text x={PAD_L} y={CHART_H - 3} class=axis>{left}</text>"
        f"<text x={CHART_W - PAD_R} y={CHART_H - 3} class=axis text-anchor=end>{right} UTC</text>"
    )


def chart(
    title: str,
    lines: Sequence[tuple[str, Sequence[Point]]],
    start: float,
    end: float,
    fmt: Format = number,
) -> str:
    """A line chart of each `(label, points)` between `start` and `end`, with a legend."""
    shown = [(label, [p for p in pts if start <= p[0] <= end]) for label, pts in lines]
    every = [p for _, pts in shown for p in pts]
    start = _start(every, start, end)
    _, _, top = _scale(every, start, end)
    box = (PAD_L, PAD_T, CHART_W - PAD_L - PAD_R, CHART_H - PAD_T - PAD_B)
    body = "".join(
        f'<polyline class="line{i}" points="{_polyline(pts, start, end, top, box)}"/>'
        f'<g class="line{i}">{_dots(pts, start, end, top, box)}</g>'
        for i, (_, pts) in enumerate(shown)
    )
    legend = "".join(
        f'<span class="key line{i}">{escape(label)}</span>' for i, (label, _) in enumerate(shown)
    )
    return (
        f"<figure class=plot><figcaption>{escape(title)} {legend}</figcaption>"
        f"{_frame(title, top, start, end, fmt, len(every))}{body}</svg></figure>"
    )


def bars(
    title: str, groups: Sequence[tuple[str, Sequence[Point]]], start: float, end: float
) -> str:
    """Bars of per-minute counts, the groups side by side in each minute."""
    every = [p for _, pts in groups for p in pts]
    top = max((v for _, v in every), default=0.0) or 1.0
    width = CHART_W - PAD_L - PAD_R
    height = CHART_H - PAD_T - PAD_B
    minutes = max(1, len(groups[0][1]) if groups else 1)
    slot = width / minutes
    bar = max(1.0, slot / (len(groups) + 1))
    rects = []
    for i, (_, pts) in enumerate(groups):
        for j, (_, value) in enumerate(pts):
            if value <= 0:
                continue
            h = value / top * height
            x = PAD_L + j * slot + i * bar
            rects.append(
                f'<rect class="line{i}" x="{x:.1f}" y="{PAD_T + height - h:.1f}"'
                f' width="{bar:.1f}" height="{h:.1f}"><title>{number(value)}</title></rect>'
            )
    legend = "".join(
        f'<span class="key line{i}">{escape(label)}</span>' for i, (label, _) in enumerate(groups)
    )
    return (
        f"<figure class=plot><figcaption>{escape(title)} {legend}</figcaption>"
        f"{_frame(title, top, start, end, number, len(rects))}{''.join(rects)}</svg></figure>"
    )
