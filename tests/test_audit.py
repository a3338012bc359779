"""`make audit`: the allowlist of known advisories has its shape, the Makefile target runs
the audit with it, and the verdict fails on what it must (an unlisted advisory, a
dependency not audited) while accepting what is listed. pip-audit itself is not run here:
it needs the vulnerability service (docs/development.md, "Dependency audit")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.audit import ALLOWLIST, Accepted, load_allowlist, runtime_dependencies, verdict

ROOT = Path(__file__).resolve().parent.parent


def test_the_allowlist_is_well_formed_and_the_makefile_target_names_it() -> None:
    accepted = load_allowlist(ALLOWLIST)
    assert all(a.id and a.package and a.reason for a in accepted)
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^audit:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert target is not None, "make audit is missing"
    assert "tests.audit" in target[1] and "deploy/audit-allowlist.toml" in target[1]
    assert "audit" not in (ROOT / ".ci" / "run").read_text()  # network-bound: kept out of CI


@pytest.mark.parametrize(
    "text",
    [
        '[[advisory]]\nid = "GHSA-1"\npackage = "x"\n',  # no reason
        '[[advisory]]\nid = "GHSA-1"\npackage = "x"\nreason = ""\n',  # empty reason
        '[[advisory]]\nid = "GHSA-1"\npackage = "x"\nreason = "r"\nextra = 1\n',
        '[[advisory]]\nid = "A"\npackage = "x"\nreason = "r"\n' * 2,  # listed twice
        'ignore = ["GHSA-1"]\n',  # a blanket list is not an explained entry
    ],
)
def test_a_malformed_allowlist_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "allow.toml"
    path.write_text(text)
    with pytest.raises(ValueError):
        load_allowlist(path)


def test_the_audit_covers_runtime_dependencies_only() -> None:
    deps = runtime_dependencies()
    assert {"aiohttp", "msgspec", "websockets", "mcp"} <= set(deps)
    assert "pytest" not in deps and "mypy" not in deps and "phloem" not in deps
    assert all(v and v[0].isdigit() for v in deps.values())


def _dep(name: str, *vulns: dict[str, object], skip: str = "") -> dict[str, object]:
    if skip:
        return {"name": name, "skip_reason": skip}
    return {"name": name, "version": "1.0", "vulns": list(vulns)}


def test_the_verdict_fails_on_an_unlisted_advisory_or_an_unaudited_dependency() -> None:
    listed = Accepted("GHSA-aaaa", "cowlib", "no fixed release")
    report = {
        "dependencies": [
            _dep("Cowlib", {"id": "PYSEC-1", "aliases": ["GHSA-aaaa"], "fix_versions": []}),
            _dep("other", {"id": "GHSA-bbbb", "aliases": [], "fix_versions": ["2.0"]}),
            _dep("gone", skip="Dependency not found on PyPI"),
            _dep("clean"),
        ]
    }
    failures, notes = verdict(report, [listed, Accepted("GHSA-old", "x", "fixed since")])
    assert failures == [
        "other 1.0: GHSA-bbbb (fixed in 2.0) is not allowed",
        "gone: not audited (Dependency not found on PyPI)",
    ]
    assert notes == [
        "Cowlib 1.0: GHSA-aaaa accepted: no fixed release",
        "stale allowlist entry GHSA-old (x)",
    ]
    # the same id accepted for another package does not excuse it here
    wrong = verdict(
        {"dependencies": [report["dependencies"][0]]}, [Accepted("GHSA-aaaa", "y", "r")]
    )
    assert wrong[0] == ["Cowlib 1.0: PYSEC-1 (fixed in none) is not allowed"]
    assert verdict({"dependencies": [_dep("clean")]}, []) == ([], [])
