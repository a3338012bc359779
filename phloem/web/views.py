"""Server-rendered HTML: the page frame and one fragment per live section.

Every fragment is a pure function of data (what `phloem status --json`, `phloem tree
--json`, `phloem runs --json`, `phloem live list --json` and the sessions listing print,
eval reports), so the same code renders the first page and every update the browser
receives. Every value is escaped; only allow-listed, content-free fields are shown (ids,
names, states, counters), never inputs, outputs, prompts, media or credentials — but on
a transcript's own page (`sessionview`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from typing import Any

from phloem.protocols.evalreport import EvalReport
from phloem.protocols.runs import RunSummary

PAGES: list[tuple[str, str, list[str]]] = [
    # (path, title, live sections)
    ("/", "Supervision tree", ["summary", "tree"]),
    ("/runs", "Runs", ["summary", "runs"]),
    ("/sessions", "Sessions", ["summary", "sessions"]),
    ("/agents", "Agents", ["summary", "agents"]),
    ("/live", "Live sessions", ["summary", "live"]),
    ("/plots", "Plots", ["summary", "plots"]),
    ("/evals", "Evaluation reports", ["summary"]),
    ("/telemetry", "Telemetry", ["summary", "telemetry"]),
]
LIVE_FIELDS = ("session", "state", "model", "reconnects", "turn_epoch", "generation_epoch")
SESSION_FIELDS = ("id", "agent", "workdir", "events")
AGENT_FIELDS = ("name", "kind", "description")
MAX_ERROR_CHARS = 200  # of an error shown on a page
MAX_TREE_ROWS = 2000  # nodes drawn of one tree (every update resends the section)


def e(value: Any) -> str:
    return escape(str(value), quote=True)


def size(n: int | None) -> str:
    if n is None:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n = n / 1024  # type: ignore[assignment]
    return str(n)


def clock(at: float | None) -> str:
    return "" if at is None else time.strftime("%H:%M:%S", time.gmtime(at))


def span(seconds: float) -> str:
    s = int(seconds)
    return (
        f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"
        if s >= 3600
        else f"{s // 60}m{s % 60:02d}s"
    )


def page(
    path: str,
    body: str,
    sections: Mapping[str, str],
    *,
    live: Sequence[str] | None = None,
    title: str | None = None,
    attrs: str = "",
) -> str:
    """The whole page at `path`: nav, the live sections (`id="s-NAME"`: the page's own,
    or `live`), `body`. `attrs` are more attributes of `<body>` (already escaped)."""
    nav_path = "/" + path.split("/")[1] if path.count("/") > 1 else path
    title = title or next((t for p, t, _ in PAGES if p == nav_path), "phloem")
    wanted = (
        list(live) if live is not None else next((s for p, _, s in PAGES if p == path), ["summary"])
    )
    nav = "".join(
        f'<a href="{p}"{" class=here" if p == nav_path else ""}>{e(t)}</a>' for p, t, _ in PAGES
    )
    shown = "".join(
        f'<section id="s-{e(name)}" class="{e(name.partition(":")[0])}">'
        f"{sections.get(name, '')}</section>"
        for name in wanted
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>phloem · {e(title)}</title>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        '<link rel=stylesheet href="/static/phloem.css"></head>'
        f'<body data-sections="{e(",".join(wanted))}"{attrs}>'
        f"<header><b>phloem</b><nav>{nav}</nav><span id=conn class=conn>connecting…</span></header>"
        f"<main><h1>{e(title)}</h1>{shown}{body}</main>"
        '<script src="/static/phloem.js"></script></body></html>'
    )


def summary(
    status: Mapping[str, Any] | None, error: str | None, down_since: float | None = None
) -> str:
    """The daemon's status line; `data-daemon` says `connected` or `disconnected` (the
    page's connection badge follows it)."""
    if status is None or down_since is not None:
        reason = (error or "not connected")[:MAX_ERROR_CHARS]
        since = "" if down_since is None else f" since {clock(down_since)} UTC"
        return (
            f'<p class=bad data-daemon=disconnected data-since="{e(down_since or "")}">'
            f"daemon disconnected{since}: {e(reason)}</p>"
        )
    counts = status.get("telemetry")
    tele = "telemetry off"
    if isinstance(counts, Mapping) and _telemetry_on(counts):
        tele = (
            f"telemetry: {e(counts.get('exported', 0))} exported, "
            f"{e(counts.get('dropped', 0))} dropped"
        )
    return (
        f"<p data-daemon=connected>daemon pid {e(status.get('pid'))} · "
        f"v{e(status.get('version'))} · "
        f"{e(status.get('state'))} · up {span(float(status.get('uptime_s', 0)))} · "
        f"{e(status.get('actors'))} actors · {e(status.get('processes'))} processes · "
        f"<span data-restarts-total={e(status.get('restarts'))}>"
        f"{e(status.get('restarts'))} restarts</span> · "
        f"{size(status.get('rss_bytes'))} rss · {e(status.get('connections'))} clients · "
        f"<span class=tele>{tele}</span></p>"
    )


Spark = Callable[[str], str]  # a node's path → its history cell


def _tree_rows(
    node: Mapping[str, Any], path: str, depth: int, out: list[str], spark: Spark | None = None
) -> int:
    """Append the rows of `node` and its subtree, at most `MAX_TREE_ROWS` in all; the
    number of nodes left out."""
    if len(out) >= MAX_TREE_ROWS:
        return 1 + sum(_count(c) for c in node.get("children", ()))
    where = f"{path}/{node['id']}" if path else str(node["id"])
    state = str(node.get("state"))
    who = f"pid {node['pid']}" if node.get("pid") else node.get("thread") or ""
    if node.get("pid") and node.get("node"):  # a child on a cluster worker
        who += f" on {node['node']}"
    memory = size(node.get("rss_bytes"))
    if node.get("rss_cap_bytes"):
        memory += f" (tree {size(node.get('tree_rss_bytes'))} / cap {size(node['rss_cap_bytes'])})"
    restarts = int(node.get("restarts", 0))
    out.append(
        f'<tr data-path="{e(where)}" data-state="{e(state)}" data-restarts="{restarts}">'
        f'<td style="padding-left:{0.4 + depth * 1.2:.1f}em">{e(node["id"])}</td>'
        f"<td>{e(node.get('type'))}{' ' + e(node['strategy']) if node.get('strategy') else ''}</td>"
        f'<td class="st-{e(state)}">{e(state)}</td>'
        f'<td class="{"warn" if restarts else ""} num">{restarts}</td>'
        f"<td>{e(who)}</td><td class=num>{e(memory)}</td>"
        f"<td class=num>{e(node.get('mailbox_depth', 0))}</td>"
        f"<td class=num>{e(node.get('credit_in_use', 0))}</td>"
        + ("" if spark is None else f"<td class=hist>{spark(where)}</td>")
        + "</tr>"
    )
    left_out = sum(
        _tree_rows(child, where, depth + 1, out, spark) for child in node.get("children", ())
    )
    more = int(node.get("unlisted_processes", 0))
    if more:  # the snapshot counted them, did not list them
        out.append(
            f'<tr data-unlisted="{more}"><td style="padding-left:{0.4 + (depth + 1) * 1.2:.1f}em"'
            f" colspan=9 class=warn>… {more} more process{'' if more == 1 else 'es'}"
            " (not listed)</td></tr>"
        )
    return left_out


def _count(node: Mapping[str, Any]) -> int:
    return 1 + sum(_count(c) for c in node.get("children", ()))


def tree(
    snapshot: Mapping[str, Any] | None, spark: Spark | None = None, down_since: float | None = None
) -> str:
    """The tree as a table, each row with its history (`spark`); once the daemon is gone
    (`down_since`), the last tree read, marked stale — never shown as running."""
    if snapshot is None:
        return "<p>no tree yet</p>"
    rows: list[str] = []
    left_out = sum(_tree_rows(root, "", 0, rows, spark) for root in snapshot.get("roots", ()))
    if left_out:
        rows.append(f"<tr><td colspan=9 class=warn>{left_out} more nodes not shown</td></tr>")
    stale = ""
    if down_since is not None:
        stale = (
            f"<p class=bad data-stale>daemon disconnected since {clock(down_since)} UTC: "
            "this is the last tree it gave, not its state now</p>"
        )
    return (
        f"{stale}<p>{e(snapshot.get('supervisors'))} supervisors · "
        f"{e(snapshot.get('actors'))} actors · "
        f"{e(snapshot.get('processes'))} processes · {e(snapshot.get('threads'))} threads · "
        f"taken {clock(snapshot.get('taken_at'))} UTC</p>"
        f"<table{' class=stale' if stale else ''}><thead><tr><th>name</th><th>type</th>"
        "<th>state</th><th>restarts</th><th>pid / thread</th><th>memory</th><th>mailbox</th>"
        "<th>credit</th>"
        + ("" if spark is None else "<th>memory · mailbox (15 min)</th>")
        + "</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def runs(views: Iterable[RunSummary], error: str | None = None) -> str:
    """One article per run: kind, name, id, outcome (or running), times, owner, and its
    last events with their content-free details."""
    blocks = []
    for run in views:
        state = run.outcome or "running"
        events = "".join(
            f'<li data-kind="{e(n.kind)}">{clock(n.at)} <b>{e(n.kind)}</b>'
            + "".join(f" {e(k)}={e(v)}" for k, v in n.detail.items())
            + "</li>"
            for n in run.events
        )
        more = f"<li>({run.events_dropped} older events)</li>" if run.events_dropped else ""
        took = "" if run.ended_at is None else f" · took {run.ended_at - run.started_at:.3f} s"
        why = f" · <span class=bad>{e(run.error)}</span>" if run.error else ""
        blocks.append(
            f'<article class="run {"ended" if run.outcome else "active"}" data-run="{e(run.id)}"'
            f' data-kind="{e(run.kind)}" data-state="{e(state)}"'
            f' data-events="{run.event_count}">'
            f'<h2><a href="/runs/{e(run.id)}">{e(run.kind)} · {e(run.name)}</a> '
            f"<small>{e(run.id)}</small></h2>"
            f'<p><span class="st-{e(state)}">{e(state)}</span>{why} · started '
            f"{clock(run.started_at)} UTC{took} · {e(run.owner)} · {run.event_count} events</p>"
            f"<ol>{more}{events}</ol></article>"
        )
    note = f"<p class=bad>runs unavailable: {e(error[:MAX_ERROR_CHARS])}</p>" if error else ""
    return note + ("".join(blocks) or "<p class=empty>no runs yet</p>")


def _cell(value: Any) -> str:
    return "&ndash;" if value is None else e(value)


def _missing(unavailable: bool, error: str | None, what: str, none: str) -> str:
    """What a listing with no rows shows: why it is unavailable, or that it is empty."""
    if unavailable:
        return f"<p>{what} unavailable: {e((error or '')[:MAX_ERROR_CHARS])}</p>"
    return f"<p class=empty>no {none}</p>"


def sessions(listed: Sequence[Mapping[str, Any]] | None, error: str | None = None) -> str:
    """The harness sessions: id, agent, workdir, events, and whether a turn runs now."""
    if not listed:
        return _missing(listed is None, error, "Sessions", "sessions")
    head = "".join(f"<th>{e(f)}</th>" for f in SESSION_FIELDS)
    rows = "".join(
        f'<tr data-session="{e(s.get("id"))}" data-busy="{"yes" if s.get("busy") else "no"}">'
        + f'<td><a href="/sessions/{e(s.get("id"))}">{_cell(s.get("id"))}</a></td>'
        + "".join(f"<td>{_cell(s.get(f))}</td>" for f in SESSION_FIELDS[1:])
        + f"<td>{'busy' if s.get('busy') else 'idle'}</td>"
        + f"<td>{clock(s.get('updated'))}</td></tr>"
        for s in listed
    )
    return (
        f"<table><thead><tr>{head}<th>state</th><th>updated (UTC)</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def agents(listed: Sequence[Mapping[str, Any]] | None, error: str | None = None) -> str:
    """The agent catalogue: each agent's name, kind, description and sub-agents."""
    if not listed:
        return _missing(listed is None, error, "Agents", "agents")
    head = "".join(f"<th>{e(f)}</th>" for f in AGENT_FIELDS)
    rows = "".join(
        f'<tr data-agent="{e(a.get("name"))}">'
        + "".join(f"<td>{e(a.get(f) or '')}</td>" for f in AGENT_FIELDS)
        + f"<td>{e(', '.join(a.get('sub_agents') or ())) or '&ndash;'}</td></tr>"
        for a in listed
    )
    return f"<table><thead><tr>{head}<th>sub-agents</th></tr></thead><tbody>{rows}</tbody></table>"


def live(sessions: Sequence[Mapping[str, Any]] | None, error: str | None = None) -> str:
    if not sessions:
        return _missing(sessions is None, error, "Live sessions", "Live sessions")
    head = "".join(f"<th>{e(f.replace('_', ' '))}</th>" for f in LIVE_FIELDS)
    rows = "".join(
        f'<tr data-session="{e(s.get("session"))}">'
        + "".join(f"<td>{e(s.get(f, ''))}</td>" for f in LIVE_FIELDS)
        + f"<td>{clock(s.get('opened_at'))}</td></tr>"
        for s in sessions
    )
    return (
        f"<table><thead><tr>{head}<th>opened (UTC)</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _telemetry_on(counters: Any) -> bool:
    """The status carries the export bus's counts and says the bus is running (a daemon
    without telemetry sends `enabled: false` with zeros, or an older one no key at all)."""
    return isinstance(counters, Mapping) and counters.get("enabled", True) is not False


def telemetry(status: Mapping[str, Any] | None) -> str:
    counters = None if status is None else status.get("telemetry")
    if not isinstance(counters, Mapping) or not _telemetry_on(counters):
        return '<p class="tele-off">telemetry off</p>'
    rows = "".join(
        f'<tr data-counter="{e(k)}"><td>{e(k)}</td><td class=num>{e(v)}</td></tr>'
        for k, v in sorted(counters.items())
        if isinstance(v, int | float | str | bool)
    )
    head = "<thead><tr><th>counter</th><th>value</th></tr></thead>"
    return f"<table>{head}<tbody>{rows}</tbody></table>"


def _score(value: float | None) -> str:
    return "&ndash;" if value is None else f"{value:.3f}"


def eval_list(entries: list[tuple[str, EvalReport | str]]) -> str:
    if not entries:
        return "<p class=empty>no eval reports (set [web] reports_dir, or --reports DIR)</p>"
    rows = []
    for name, report in entries:
        if isinstance(report, str):
            rows.append(f"<tr><td>{e(name)}</td><td colspan=4 class=bad>{e(report)}</td></tr>")
            continue
        rows.append(
            f'<tr data-report="{e(name)}"><td><a href="/evals/{e(name)}">{e(name)}</a></td>'
            f"<td>{e(report.eval_set_id)}</td>"
            f"<td class=st-{e(report.status)}>{e(report.status)}</td>"
            f"<td class=num>{report.pass_rate:.1%}</td><td class=num>{len(report.cases)}</td></tr>"
        )
    return (
        "<table><thead><tr><th>report</th><th>eval set</th><th>status</th><th>pass rate</th>"
        f"<th>cases</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def eval_report(name: str, report: EvalReport) -> str:
    metrics = sorted({m for c in report.cases for m in c.metrics} | set(report.metrics))
    overall = "".join(
        f"<tr><td>{e(m)}</td><td class=num>{_score(report.metrics.get(m))}</td>"
        f"<td class=num>{e(report.thresholds.get(m, ''))}</td></tr>"
        for m in metrics
    )
    cases = "".join(
        f'<tr data-case="{e(c.id)}" data-status="{e(c.status)}"><td>{e(c.id)}</td>'
        f"<td class=st-{e(c.status)}>{e(c.status)}</td>"
        f"<td class=num>{c.passed_samples}/{len(c.samples)}</td>"
        + "".join(f"<td class=num>{_score(c.metrics.get(m))}</td>" for m in metrics)
        + "</tr>"
        for c in report.cases
    )
    regressions = ""
    if report.baseline is not None:
        items = "".join(
            f"<li>{e(r.kind)}{' · ' + e(r.case_id) if r.case_id else ''}"
            f"{' · ' + e(r.metric) if r.metric else ''}</li>"
            for r in report.baseline.regressions
        )
        verdict = "holds" if report.baseline.passed else "regressed"
        regressions = f"<h2>Against the baseline: {verdict}</h2><ul>{items}</ul>"
    return (
        f'<p class=report data-status="{e(report.status)}">{e(name)} · eval set '
        f"<b>{e(report.eval_set_id)}</b> · agent {e(report.agent or '&ndash;')} · "
        f'<span class="st-{e(report.status)}">{e(report.status)}</span> · pass rate '
        f"<b class=pass-rate>{report.pass_rate:.1%}</b> · {len(report.cases)} cases &times; "
        f"{report.samples} samples · {report.duration_ms / 1000:.1f} s</p>"
        "<h2>Metrics</h2><table><thead><tr><th>metric</th><th>score</th><th>threshold</th></tr>"
        f"</thead><tbody>{overall}</tbody></table>{regressions}"
        "<h2>Cases</h2><table><thead><tr><th>case</th><th>status</th><th>samples passed</th>"
        + "".join(f"<th>{e(m)}</th>" for m in metrics)
        + f"</tr></thead><tbody>{cases}</tbody></table>"
    )


def message(title: str, text: str, form: bool = False) -> str:
    """A small standalone page (401, 404, the login form)."""
    login = (
        '<form method=post action="/login"><label>token <input type=password name=token '
        "autocomplete=current-password></label> <button>open</button></form>"
        if form
        else ""
    )
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>phloem · {e(title)}"
        '</title><link rel=stylesheet href="/static/phloem.css"></head>'
        f"<body><main><h1>{e(title)}</h1><p>{e(text)}</p>{login}</main></body></html>"
    )
