"""Views as rows: the plain and the rich renderer show the same fields of one snapshot;
the table's columns are fitted fairly with the cut marked; top's CPU%, sort and filter
keys."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator

import pytest
from rich.console import Console

from phloem.cli.cluster import status_rows
from phloem.cli.render import status_view, tree_view
from phloem.cli.rows import Cell, Column, Row, View, cells, cut, fit, lines, plain, texts
from phloem.cli.runs import runs_view
from phloem.cli.screen import to_text, top_screen
from phloem.cli.top import MAX_FILTER_CHARS, TopState, apply_keys, cpu_percent, top_view
from phloem.client.sync import Client
from phloem.protocols.snapshot import NodeSnapshot, TreeSnapshot
from phloem.supervision import ChildSpec, Command, Supervisor, SupervisorSpec, tree_snapshot
from tests.helpers import FIXTURE_CONFIG, DaemonProc, running_daemon, wait_until

pytestmark = pytest.mark.timeout(60)

CONFIG = (
    FIXTURE_CONFIG
    + """
[agents.functions.quick]
fn = "tests.actors.runs_fixtures:quick"
input_keys = ["topic"]
output_key = "answer"
"""
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
WIDE = 400  # wide enough that nothing is cut or wrapped


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    with running_daemon(CONFIG) as d:
        yield d


def _rich(view: View, width: int) -> str:
    """What a colour terminal of `width` columns gets, escape codes removed."""
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=True, color_system="truecolor").print(
        to_text(view, width)
    )
    text = out.getvalue()
    assert "\x1b[" in text  # styled: this is the rich renderer
    return ANSI.sub("", text)


def _fields(text: str) -> set[str]:
    """The fields of rendered text: what stands between runs of two or more spaces."""
    found: set[str] = set()
    for line in text.splitlines():
        found.update(f for f in re.split(r"\s{2,}|[├└│─]+", line.strip()) if f.strip())
    return {f.strip() for f in found}


def test_plain_and_rich_show_the_same_fields_of_one_snapshot(daemon: DaemonProc) -> None:
    with Client.connect(daemon.socket) as client:
        assert client.run_agent("quick", state={"topic": "tea"}).ok  # a run with events
        status, first = client.status(), client.tree()
        time.sleep(0.2)
        snap = client.tree()
        runs = client.list_runs()
        cluster = client.cluster_status()
    views = {
        "cluster status": View("fields", tuple(status_rows(cluster))),
        "status": status_view(status),
        "tree": tree_view(snap),
        "top": top_view(snap, first),
        "runs": runs_view(runs),
    }
    for name, view in views.items():
        plain_text, rich_text = plain(view, WIDE), _rich(view, WIDE)
        assert _fields(plain_text) == _fields(rich_text), name
        for text in texts(view):
            assert text in plain_text and text in rich_text, (name, text)
    status_text = plain(views["status"])  # the fields the terminal had lost
    assert "telemetry  off" in status_text and "cluster    local" in status_text
    assert "CPU%" in plain(views["top"])


def test_a_snapshot_carries_cpu_time_and_top_shows_its_change_as_percent() -> None:
    burn = "end=$((SECONDS+2)); while [ $SECONDS -lt $end ]; do :; done; exec sleep 60"
    spec = ChildSpec("burner", Command(["bash", "-c", burn]), shutdown=1.0)
    sup = Supervisor.start(SupervisorSpec(), [spec], name="cpu")
    try:
        first = tree_snapshot([sup])
        (node,) = first.roots[0].children
        assert node.cpu_s is not None and first.roots[0].cpu_s is not None  # process, actor
        wait_until(
            lambda: (tree_snapshot([sup]).roots[0].children[0].cpu_s or 0) >= node.cpu_s + 0.3,
            timeout=30,
            what="the child used CPU",
        )
        later = tree_snapshot([sup])
        percent = cpu_percent(later, first)
        assert percent[node.handle or ""] > 0
        row = next(r for r in top_view(later, first).rows if "burner" in r.cells[0].text)
        assert float(row.cells[7].text) > 0
        assert cpu_percent(later, None) == {} and cpu_percent(first, later) == {}
    finally:
        sup.stop()


def test_columns_fit_the_width_fairly_and_mark_the_cut() -> None:
    columns = (Column("NAME", min_width=4), Column("WHERE"), Column("N", right=True))
    rows = (Row(cells("a" * 60, "b" * 60, "7")),)
    assert fit(columns, rows, None) == [60, 60, 1]
    assert fit(columns, rows, 123) == [60, 60, 1]  # exactly enough: nothing cut
    widths = fit(columns, rows, 122)  # one short: one column gives one column up
    assert sum(widths) + 2 == 122 and sorted(widths) == [1, 59, 60]
    widths = fit(columns, rows, 40)
    assert widths[0] in (widths[1], widths[1] + 1) and sum(widths) + 2 == 40  # a fair share
    (_, line) = ["".join(t for t, _ in ln) for ln in lines(View("table", rows, columns), 40)]
    assert len(line) == 40 and line.count("…") == 2 and line.endswith(" 7")
    assert cut("abcdef", 6) == "abcdef" and cut("abcdef", 5) == "abcd…"
    narrow = fit(columns, rows, 5)  # below every floor: the floors
    assert narrow == [4, 5, 1]


def test_top_on_a_small_screen_says_how_many_rows_are_not_shown(
    daemon: DaemonProc,
) -> None:
    with Client.connect(daemon.socket) as client:
        status, snap = client.status(), client.tree()
    rows = len(top_view(snap).rows)
    tall = top_screen(status, snap, None, TopState(), 120, 200).plain.splitlines()
    assert not any(line.startswith("+") for line in tall)
    small = top_screen(status, snap, None, TopState(), 80, 24).plain.splitlines()
    assert len(small) == 24 and all(len(line) <= 80 for line in small)
    shown = len(small) - small.index(next(x for x in small if x.startswith("NAME"))) - 2
    assert small[-1] == f"+{rows - shown} more"


def test_sort_keys_and_the_filter(daemon: DaemonProc) -> None:
    with Client.connect(daemon.socket) as client:
        snap = client.tree()
    state = TopState()

    def names() -> list[str]:
        return [r.cells[0].text for r in top_view(snap, None, state).rows]

    tree_order = names()
    assert apply_keys(state, "n") and names() == sorted(names()) != tree_order
    assert apply_keys(state, "r") and state.sort == "r"
    assert apply_keys(state, "t") and names() == tree_order
    assert apply_keys(state, "/ech")
    assert names() == tree_order and state.typing == "ech"  # not applied until Enter
    assert apply_keys(state, "o\r") and state.filter == "echo" and state.typing is None
    assert [n.strip() for n in names()] == ["echo"]
    assert apply_keys(state, "\x1b[A") and state.filter == "echo"  # an arrow key: nothing
    assert apply_keys(state, "\x1b") and state.filter == "" and names() == tree_order
    assert apply_keys(state, "/abc\x7f\x1b") and state.filter == "" and state.typing is None
    assert not apply_keys(state, "q")
    full = TopState(typing="")
    apply_keys(full, "x" * MAX_FILTER_CHARS)
    assert full.typing == "x" * MAX_FILTER_CHARS
    apply_keys(full, "y")  # one over: not taken
    assert full.typing == "x" * MAX_FILTER_CHARS


def test_a_tree_row_too_wide_wraps_under_its_guide() -> None:
    rows = (
        Row(cells(Cell("root", "bold"), "supervisor")),
        Row(cells("child", "a" * 20, "b" * 20), 1),
        Row((Cell("… 3 more processes (not listed)", "dim"),), 1, note=True),
    )
    out = plain(View("tree", rows), 40).splitlines()
    assert out[0] == "root  supervisor"
    assert out[1] == "├── child  " + "a" * 20 and out[2] == " " * 6 + "b" * 20
    assert out[-1] == "└── … 3 more processes (not listed)"


def _node(name: str, rss: int, restarts: int, cpu: float) -> NodeSnapshot:
    return NodeSnapshot(
        id=name,
        kind="worker",
        type="process",
        state="running",
        handle=f"h-{name}",
        rss_bytes=rss,
        restarts=restarts,
        cpu_s=cpu,
    )


def test_memory_cpu_and_restart_keys_put_the_most_first() -> None:
    def snap(at: float, cpu: dict[str, float]) -> TreeSnapshot:
        kids = [
            _node("a", 30, 0, cpu["a"]),
            _node("b", 10, 5, cpu["b"]),
            _node("c", 20, 1, cpu["c"]),
        ]
        root = NodeSnapshot(
            id="root", kind="supervisor", type="supervisor", state="running", children=kids
        )
        return TreeSnapshot(
            taken_at=at,
            pid=1,
            rss_bytes=1,
            threads=1,
            roots=[root],
            actors=0,
            processes=3,
            supervisors=1,
            restarts=6,
        )

    first = snap(100.0, {"a": 1.0, "b": 1.0, "c": 1.0})
    later = snap(102.0, {"a": 1.2, "b": 2.0, "c": 1.0})  # over 2 s: 10%, 50%, 0%

    def order(key: str) -> list[str]:
        view = top_view(later, first, TopState(sort=key))
        return [r.cells[0].text for r in view.rows if r.cells[0].text != "root"]

    assert order("m") == ["root/a", "root/c", "root/b"]
    assert order("c") == ["root/b", "root/a", "root/c"]
    assert order("r") == ["root/b", "root/c", "root/a"]
    assert order("n") == ["root/a", "root/b", "root/c"]
    cpu = {r.cells[0].text: r.cells[7].text for r in top_view(later, first).rows}
    assert cpu == {"root": "-", "  a": "10.0", "  b": "50.0", "  c": "0.0"}
