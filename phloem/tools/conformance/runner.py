"""Run every case of a fixture pack and report pass or fail per case.

A pack is a directory of `AREA/CASE/` directories (see the plasmid-v1 README): each holds
`case.json`, `input.json` (or `input/`), `expected.json` and optionally `warnings.json`.
Goldens are compared structurally after expanding `${HOME}`, `${WORKDIR}` and
`${CONFIG_DIR}` and renaming the `[plasmid:truncated` marker to phloem's.
"""

from __future__ import annotations

import json
import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phloem.tools.conformance.cases import RUNNERS, scratch_dir
from phloem.tools.conformance.compare import first_difference, substitute
from phloem.tools.outputlimit import MARKER_PRODUCT

FOREIGN_MARKER = "plasmid:truncated"


@dataclass(frozen=True)
class CaseResult:
    """One case's outcome: `pass`, `fail` or `skip`, with the first difference."""

    area: str
    id: str
    kind: str
    status: str
    detail: str = ""

    def line(self) -> str:
        name = f"{self.area}/{self.id}"
        if self.status == "pass":
            return f"PASS {name}"
        return f"{self.status.upper()} {name}: {self.detail}"

    def as_failure(self) -> CaseResult:
        return CaseResult(self.area, self.id, self.kind, "fail", self.detail)

    def to_dict(self) -> dict[str, str]:
        return {
            "area": self.area,
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "detail": self.detail,
        }


def discover(pack: Path, area: str | None = None) -> list[Path]:
    """Case directories of `pack` (optionally one area), sorted by area then id."""
    if not pack.is_dir():
        raise FileNotFoundError(f"pack directory not found: {pack}")
    cases = []
    for area_dir in sorted(p for p in pack.iterdir() if p.is_dir()):
        if area is not None and area_dir.name != area:
            continue
        cases.extend(sorted(c for c in area_dir.iterdir() if (c / "case.json").is_file()))
    return cases


def _expected(case_dir: Path, name: str, workdir: Path) -> Any:
    value = json.loads((case_dir / name).read_text(encoding="utf-8"))
    replacements = {
        FOREIGN_MARKER: f"{MARKER_PRODUCT}:truncated",
        "${HOME}": os.path.expanduser("~"),
        "${WORKDIR}": str(workdir),
        "${CONFIG_DIR}": str(workdir / ".config"),
    }
    return substitute(value, replacements)


def run_case(case_dir: Path) -> CaseResult:
    """Run one case directory and compare its outcome with the goldens."""
    case = json.loads((case_dir / "case.json").read_text(encoding="utf-8"))
    area = str(case.get("area", case_dir.parent.name))
    ident = str(case.get("id", case_dir.name))
    kind = str(case.get("kind", ""))
    runner = RUNNERS.get((area, kind))
    if runner is None:
        return CaseResult(area, ident, kind, "skip", f"no runner for kind {kind!r}")
    with scratch_dir() as scratch:
        workdir = Path(scratch)
        try:
            actual, warnings = runner(case_dir, case, workdir)
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            detail = f"runner raised {type(exc).__name__}: {exc} ({where.name}:{where.lineno})"
            return CaseResult(area, ident, kind, "fail", detail)
        expected = _expected(case_dir, "expected.json", workdir)
        difference = first_difference(expected, actual)
        if difference is None and (case_dir / "warnings.json").is_file():
            wanted = _expected(case_dir, "warnings.json", workdir)
            difference = first_difference(wanted, warnings or [], "warnings")
        elif difference is None and warnings:
            difference = f"warnings: unexpected {json.dumps(warnings)}"
    if difference is not None:
        return CaseResult(area, ident, kind, "fail", difference)
    return CaseResult(area, ident, kind, "pass")


def run_pack(pack: Path, area: str | None = None) -> list[CaseResult]:
    return [run_case(case_dir) for case_dir in discover(pack, area)]


def summary(results: list[CaseResult]) -> str:
    passed = sum(1 for r in results if r.status == "pass")
    failed = sum(1 for r in results if r.status == "fail")
    return f"{passed} passed, {failed} failed"
