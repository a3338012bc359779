"""`make audit`: pip-audit over phloem's resolved runtime dependencies, judged against the
committed list of known, unresolved advisories (deploy/audit-allowlist.toml).

    python -m tests.audit [--allowlist FILE] [--service pypi|osv]

The runtime dependencies are phloem's `Requires-Dist` without extras, followed transitively
through the installed distributions, pinned at their installed versions (so the audit is
of what runs, not of what a resolver would pick today). The audit fails (exit 1) on any
advisory not in the allowlist and on any dependency pip-audit could not audit (a service
that cannot answer is not a pass); an allowlist entry that matched nothing is reported as
stale, so the list stays current. Exit 0 only when every dependency was audited and every
advisory found is listed with a reason.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import msgspec
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
ALLOWLIST = ROOT / "deploy" / "audit-allowlist.toml"
AUDIT_TIMEOUT_S = 600.0  # pip-audit asks the service once per dependency
ALLOWED_KEYS = frozenset({"id", "package", "reason"})


@dataclass(frozen=True)
class Accepted:
    """One known, unresolved advisory: why phloem ships with it for now."""

    id: str
    package: str
    reason: str


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def load_allowlist(path: Path) -> list[Accepted]:
    """The `[[advisory]]` entries; ValueError naming the first malformed one."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    if set(data) - {"advisory"}:
        raise ValueError(f"{path}: only [[advisory]] tables belong here, not {sorted(data)}")
    out: list[Accepted] = []
    for n, entry in enumerate(data.get("advisory", []), 1):
        if not isinstance(entry, dict) or set(entry) != ALLOWED_KEYS:
            raise ValueError(f"{path}: advisory {n} needs exactly id, package and reason")
        if not all(isinstance(entry[k], str) and entry[k].strip() for k in ALLOWED_KEYS):
            raise ValueError(f"{path}: advisory {n}: id, package and reason are non-empty text")
        out.append(Accepted(entry["id"], canonical(entry["package"]), entry["reason"]))
    ids = [a.id for a in out]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{path}: an advisory id is listed twice")
    return out


def runtime_dependencies(dist: str = "phloem") -> dict[str, str]:
    """Every installed distribution phloem needs at run time → its installed version."""
    versions: dict[str, str] = {}
    extras_seen: dict[str, frozenset[str]] = {}
    todo: list[tuple[str, frozenset[str]]] = [(dist, frozenset())]
    while todo:
        name, extras = todo.pop()
        key = canonical(name)
        if key in extras_seen and extras <= extras_seen[key]:
            continue
        try:
            found = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a marker-excluded or optional dependency that is not installed
        versions[key] = found.version
        extras_seen[key] = extras_seen.get(key, frozenset()) | extras
        for line in found.requires or []:
            req = Requirement(line)
            envs = [{"extra": e} for e in (extras or {""})]
            if req.marker is None or any(req.marker.evaluate(e) for e in envs):
                todo.append((req.name, frozenset(req.extras)))
    versions.pop(canonical(dist), None)
    return versions


def verdict(report: dict[str, Any], allowed: list[Accepted]) -> tuple[list[str], list[str]]:
    """pip-audit's JSON report → (failures, notes). Failures: an unlisted advisory, a
    dependency not audited. Notes: listed advisories found, stale entries."""
    by_id = {a.id: a for a in allowed}
    failures: list[str] = []
    notes: list[str] = []
    used: set[str] = set()
    for dep in report.get("dependencies", []):
        name, version = dep.get("name", "?"), dep.get("version", "?")
        if dep.get("skip_reason"):
            failures.append(f"{name}: not audited ({dep['skip_reason']})")
            continue
        for vuln in dep.get("vulns", []):
            ids = [vuln.get("id", "?"), *vuln.get("aliases", [])]
            match = next((by_id[i] for i in ids if i in by_id), None)
            fixed = ", ".join(vuln.get("fix_versions", [])) or "none"
            if match is None or match.package != canonical(name):
                failures.append(f"{name} {version}: {ids[0]} (fixed in {fixed}) is not allowed")
            else:
                used.add(match.id)
                notes.append(f"{name} {version}: {match.id} accepted: {match.reason}")
    notes += [f"stale allowlist entry {a.id} ({a.package})" for a in allowed if a.id not in used]
    return failures, notes


def run_pip_audit(deps: dict[str, str], service: str) -> dict[str, Any]:
    pins = "".join(f"{name}=={version}\n" for name, version in sorted(deps.items()))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(pins)
    cmd = [sys.executable, "-m", "pip_audit", "-r", req.name, "--no-deps", "--disable-pip"]
    cmd += ["-s", service, "-f", "json", "--progress-spinner", "off"]
    try:
        done = subprocess.run(
            cmd, check=False, capture_output=True, text=True, timeout=AUDIT_TIMEOUT_S
        )
    finally:
        Path(req.name).unlink()
    if not done.stdout.strip():  # the service did not answer, or pip-audit broke
        last = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        raise SystemExit(f"audit: pip-audit gave no report (exit {done.returncode}): {last}")
    report: dict[str, Any] = msgspec.json.decode(done.stdout)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.audit")
    parser.add_argument("--allowlist", type=Path, default=ALLOWLIST)
    parser.add_argument("--service", choices=("pypi", "osv"), default="pypi")
    args = parser.parse_args(argv)
    allowed = load_allowlist(args.allowlist)
    deps = runtime_dependencies()
    if not deps:
        print("audit: phloem is not installed in this interpreter", file=sys.stderr)
        return 1
    failures, notes = verdict(run_pip_audit(deps, args.service), allowed)
    for line in notes:
        print(f"audit: {line}")
    for line in failures:
        print(f"audit: FAIL {line}", file=sys.stderr)
    print(f"audit: {len(deps)} runtime dependencies, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
