"""`make bench`: run every `tests/perf/bench_*.py`, print figures beside floors, write JSON.

Each module exposes `run() -> list[dict]`; a dict holds `name`, `value`, `unit`,
`floor_name`, `floor`, `ratio` (value / floor, lower is better) and `target` (the ratio
the issue asks for, or None). Floors are measured in the same run as the figures.
Usage: `python -m tests.perf [NAME ...]` (module names without `bench_` to run a subset).

Besides the JSON, the rows go as a Markdown table to `bench-results/bench.md`, and a full
run (no NAME) also rewrites the table in `docs/performance.md` between its two markers.
The load average before and after is recorded: on a shared machine it says how much the
absolute figures can be trusted (the ratios, each against a floor from the same run,
much more). Each module runs with `XDG_STATE_HOME` set to a temporary directory of its
own, so the default session store and journal locks are never the user's, and in an
interpreter of its own (`--module NAME --out FILE`), so no module's figures carry what an
earlier one left in the process (its heap for the collector to walk, its threads, its
imports).
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

OUT = Path("bench-results") / "bench.json"
TABLE = Path("bench-results") / "bench.md"
DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"


def _modules(selected: list[str]) -> list[str]:
    here = Path(__file__).parent
    names = sorted(p.stem for p in here.glob("bench_*.py"))
    if selected:
        names = [n for n in names if n.removeprefix("bench_") in selected or n in selected]
    return names


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _table(results: dict[str, Any]) -> str:
    """The rows as one Markdown table (with the run's date, CPUs and load averages)."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(results["started_at"]))
    load = "/".join(f"{x:.1f}" for x in results["load_before"])
    after = "/".join(f"{x:.1f}" for x in results["load_after"])
    lines = [
        f"Run {when}, Python {results['python']}, {results['cpus']} CPUs, load average "
        f"(1/5/15 min) {load} before and {after} after.",
        "",
        "| benchmark | figure | value | floor or peer | floor | ratio | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rows in results["benchmarks"].items():
        if isinstance(rows, dict):
            lines.append(f"| {name} | failed: see `bench.json` | | | | | |")
            continue
        for r in rows:
            target = r.get("target")
            verdict = ""
            if target is not None:
                verdict = f"<= {target} " + ("ok" if r["ratio"] <= target else "**above**")
            lines.append(
                f"| {name.removeprefix('bench_')} | {r['name']} | {_fmt(r['value'])} {r['unit']}"
                f" | {r['floor_name']} | {_fmt(r['floor'])} | {r['ratio']:.2f}x | {verdict} |"
            )
    return "\n".join(lines) + "\n"


def _run_isolated(name: str, state: Path) -> list[dict[str, Any]] | dict[str, str]:
    """Run one module in a fresh interpreter: its rows, or `{"error": ...}`."""
    out = state / f"{name}.json"
    # Each module's trees and daemons keep their sessions, journals and locks in a
    # directory of their own: a bench never meets the user's daemon (or another
    # module's leftovers) on the default state directory's locks.
    env = {**os.environ, "XDG_STATE_HOME": str(state / name)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.perf", "--module", name, "--out", str(out)],
        env=env,
        check=False,
    )
    if not out.exists():
        return {"error": f"{name} exited with {done.returncode} and no rows: see above"}
    outcome: list[dict[str, Any]] | dict[str, str] = json.loads(out.read_text())
    if done.returncode != 0 and not isinstance(outcome, dict):
        return {"error": f"{name} exited with {done.returncode}: see above"}
    return outcome


def _run_module(name: str, out: Path) -> int:
    """The child side of `_run_isolated`: run `name`, print its rows, write them to `out`."""
    from phloem.base.logs import configure_logging

    configure_logging("error", "console")
    try:
        module = importlib.import_module(f"tests.perf.{name}")
        rows = module.run()
    except Exception:
        traceback.print_exc()
        out.write_text(json.dumps({"error": traceback.format_exc(limit=3)}))
        return 1
    for row in rows:
        target = row.get("target")
        verdict = ""
        if target is not None:
            verdict = "  ok" if row["ratio"] <= target else "  ABOVE TARGET"
        print(
            f"  {row['name']:<48} {_fmt(row['value']):>10} {row['unit']:<8}"
            f" floor {row['floor_name']}: {_fmt(row['floor'])}"
            f"  ratio {row['ratio']:.2f}x"
            + (f" (target <= {target}x){verdict}" if target is not None else ""),
            flush=True,
        )
    out.write_text(json.dumps(rows))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--module"] and len(argv) == 4 and argv[2] == "--out":
        return _run_module(argv[1], Path(argv[3]))
    results: dict[str, Any] = {
        "started_at": time.time(),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
        "benchmarks": {},
    }
    failed = False
    state = Path(tempfile.mkdtemp(prefix="phloem-bench-state-"))
    for name in _modules(argv):
        print(f"== {name}", flush=True)
        outcome = _run_isolated(name, state)
        results["benchmarks"][name] = outcome
        failed = failed or isinstance(outcome, dict)
    shutil.rmtree(state, ignore_errors=True)
    results["load_after"] = os.getloadavg()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))
    table = _table(results)
    TABLE.write_text(table)
    print(f"wrote {OUT} and {TABLE}")
    if not argv and not failed and DOC.exists():
        text = DOC.read_text()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            DOC.write_text(head + BEGIN + "\n" + table + END + rest.split(END, 1)[1])
            print(f"updated the table in {DOC}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
