"""`python -m tests.docs` (`make docs`): write docs/reference/ from the code.

`python -m tests.docs --check` writes nothing and exits 1 when a page differs (for CI and
hooks; `tests/docs/test_reference.py` does the same inside the suite)."""

from __future__ import annotations

import argparse
import sys

from tests.docs.reference import REFERENCE_DIR, ROOT, stale_pages, write_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report pages that differ")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages(REFERENCE_DIR)
        for page, reason in stale:
            print(f"{page.relative_to(ROOT)}: {reason}", file=sys.stderr)
        return 1 if stale else 0
    for path in write_all(REFERENCE_DIR):
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
