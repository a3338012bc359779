"""`make bench`: run every `tests/perf/bench_*.py`, print figures beside floors, write JSON.

Each module exposes `run() -> list[dict]`; a dict holds `name`, `value`, `unit`,
`floor_name`, `floor`, `ratio` (value / floor, lower is better) and `target` (the ratio
the issue asks for, or None). Floors are measured in the same run as the figures.
Usage: `python -m tests.perf [NAME ...]` (module names without `bench_` to run a subset).
"""

from __future__ import annotations

import importlib
import json
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

OUT = Path("bench-results") / "bench.json"


def _modules(selected: list[str]) -> list[str]:
    here = Path(__file__).parent
    names = sorted(p.stem for p in here.glob("bench_*.py"))
    if selected:
        names = [n for n in names if n.removeprefix("bench_") in selected or n in selected]
    return names


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def main(argv: list[str]) -> int:
    from phloem.logs import configure_logging

    configure_logging("error", "console")
    results: dict[str, Any] = {
        "started_at": time.time(),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "benchmarks": {},
    }
    failed = False
    for name in _modules(argv):
        print(f"== {name}", flush=True)
        try:
            module = importlib.import_module(f"tests.perf.{name}")
            rows = module.run()
        except Exception:
            traceback.print_exc()
            results["benchmarks"][name] = {"error": traceback.format_exc(limit=3)}
            failed = True
            continue
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
        results["benchmarks"][name] = rows
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))
    print(f"wrote {OUT}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
