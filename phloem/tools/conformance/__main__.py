"""`python -m phloem.tools.conformance PACK_DIR [--area A] [--json]`.

Prints `PASS area/id` or `FAIL area/id: first difference` per case (`SKIP` for kinds with
no runner), then exactly `N passed, M failed`; exits 1 when any case failed, 2 on usage
errors or when no case is found. With `--json`, prints one JSON document instead;
`--strict` counts a case whose kind has no runner as a failure.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from phloem.tools.conformance.runner import run_pack, summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phloem.tools.conformance")
    parser.add_argument("pack", type=Path, help="fixture pack directory")
    parser.add_argument("--area", help="run only this area (e.g. tools)")
    parser.add_argument("--json", action="store_true", help="print a JSON report")
    parser.add_argument(
        "--strict", action="store_true", help="count cases without a runner as failures"
    )
    options = parser.parse_args(argv)
    try:
        results = run_pack(options.pack, options.area)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not results:
        where = f" in area {options.area}" if options.area else ""
        print(f"error: no cases found{where} under {options.pack}", file=sys.stderr)
        return 2
    if options.strict:
        results = [r.as_failure() if r.status == "skip" else r for r in results]
    failed = any(r.status == "fail" for r in results)
    if options.json:
        document = {"cases": [r.to_dict() for r in results], "summary": summary(results)}
        print(json.dumps(document, indent=2))
    else:
        for result in results:
            print(result.line())
        print(summary(results))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
