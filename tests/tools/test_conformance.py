from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from phloem.tools.conformance import run_pack, summary
from phloem.tools.conformance.__main__ import main

pytestmark = pytest.mark.timeout(120)

PACK_ENV = "PHLOEM_CONFORMANCE_PACK"
PACK = Path(
    os.environ.get(PACK_ENV)
    or Path(__file__).resolve().parents[2] / ".." / "shared" / "conformance" / "plasmid-v1"
)
AREAS = ("compaction", "outputlimit", "pathglob", "tokenestimate", "tools")


def test_every_case_of_the_shared_pack_passes_in_every_area() -> None:
    """The plasmid-v1 pack beside the checkout (or at $PHLOEM_CONFORMANCE_PACK): a clone
    without it fails here, loudly — it is never skipped — and so does a case kind with no
    runner, or an area with no case."""
    assert PACK.is_dir(), (
        f"the plasmid conformance pack is missing: expected it at {PACK.resolve()} "
        f"(../shared/conformance/plasmid-v1 beside the checkout), or set {PACK_ENV}"
    )
    results = run_pack(PACK)
    assert {r.area for r in results} >= set(AREAS)
    for area in AREAS:
        assert [r for r in results if r.area == area], f"no case in area {area}"
    failures = [r.line() for r in results if r.status != "pass"]  # a SKIP fails too
    assert failures == []
    assert len(results) >= 56


def _case(pack: Path, area: str, ident: str, case: dict[str, object], **files: object) -> None:
    directory = pack / area / ident
    directory.mkdir(parents=True)
    (directory / "case.json").write_text(json.dumps({"area": area, "id": ident, **case}))
    for name, value in files.items():
        (directory / f"{name}.json").write_text(json.dumps(value))


def test_the_runner_reports_the_first_difference_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _case(
        tmp_path,
        "pathglob",
        "good",
        {"kind": "split"},
        input={"list": "a, b"},
        expected=["a", "b"],
    )
    _case(
        tmp_path,
        "pathglob",
        "bad",
        {"kind": "split"},
        input={"list": "a, b"},
        expected=["a", "c"],
    )
    _case(tmp_path, "other", "unknown", {"kind": "mystery"}, input={}, expected={})
    assert main([str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "SKIP other/unknown: no runner for kind 'mystery'",
        'FAIL pathglob/bad: $[1]: expected "c", got "b"',
        "PASS pathglob/good",
        "1 passed, 1 failed",
    ]
    assert main([str(tmp_path), "--area", "pathglob", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["summary"] == "1 passed, 1 failed"
    assert main([str(tmp_path / "missing")]) == 2
    assert main([str(tmp_path), "--area", "nosuch"]) == 2
    capsys.readouterr()
    assert main([str(tmp_path), "--area", "other"]) == 0
    assert main([str(tmp_path), "--area", "other", "--strict"]) == 1
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "FAIL other/unknown: no runner for kind 'mystery'",
        "0 passed, 1 failed",
    ]


def test_the_marker_and_placeholders_are_expanded_in_goldens(tmp_path: Path) -> None:
    _case(
        tmp_path,
        "outputlimit",
        "marker",
        {"kind": "apply"},
        input={
            "input": "abcdef",
            "policy": {"head_fraction": 0.5, "max_bytes": 0, "max_line_bytes": 4, "max_lines": 0},
        },
        expected={
            "output": "ab[plasmid:truncated reason=line_length bytes=4/6 lines=1/1]ef",
            "report": {
                "kept_bytes": 4,
                "kept_lines": 1,
                "original_bytes": 6,
                "original_lines": 1,
                "reason": "line_length",
                "truncated": True,
            },
        },
    )
    results = run_pack(tmp_path)
    assert summary(results) == "1 passed, 0 failed"


def test_a_case_may_bring_an_input_tree_instead_of_input_json(tmp_path: Path) -> None:
    _case(
        tmp_path,
        "tools",
        "tree",
        {"kind": "walk", "filter": {"max_depth": -1, "skip_hidden": True}},
        expected={"error_code": "", "ordered_paths": ["d", "d/x.txt"]},
    )
    tree = tmp_path / "tools" / "tree" / "input" / "d"
    tree.mkdir(parents=True)
    (tree / "x.txt").write_text("x")
    assert summary(run_pack(tmp_path)) == "1 passed, 0 failed"


def test_marker_and_invalid_glob_and_schema_kinds_have_runners(tmp_path: Path) -> None:
    """The pack format's `outputlimit/markers`, `pathglob/invalid` and `tools/schema`."""
    _case(
        tmp_path,
        "outputlimit",
        "markers",
        {"kind": "markers"},
        input={
            "kept_bytes": 3,
            "kept_lines": 1,
            "orig_bytes": 9,
            "orig_lines": 4,
            "reasons": ["bytes", "budget", "file", "lines", "line_length"],
        },
        expected={
            "markers": {
                r: f"[plasmid:truncated reason={r} bytes=3/9 lines=1/4]"
                for r in ("bytes", "budget", "file", "lines", "line_length")
            }
        },
    )
    _case(
        tmp_path,
        "pathglob",
        "invalid",
        {"kind": "invalid"},
        input={"paths": ["x.py", "x"], "patterns": ["[oops", "{x,y}", "*.py", "a\\{b"]},
        expected={
            "error_count": 2,
            "matches": [True, False],
            "patterns": ["[oops", "{x,y}", "*.py", "a\\{b"],
        },
    )
    _case(
        tmp_path,
        "tools",
        "schema",
        {"kind": "schema"},
        input={"tool": "find"},
        expected={
            "type": "object",
            "description": "any wording",
            "additionalProperties": False,
            "required": ["glob"],
            "properties": {"type": {"enum": ["file", "dir", "symlink", "any"], "default": "any"}},
        },
    )
    _case(
        tmp_path,
        "tools",
        "schema-wrong",
        {"kind": "schema"},
        input={"tool": "ls"},
        expected={"required": ["path"]},
    )
    lines = [r.line() for r in run_pack(tmp_path)]
    assert lines == [
        "PASS outputlimit/markers",
        "PASS pathglob/invalid",
        "PASS tools/schema",
        "FAIL tools/schema-wrong: $.required: expected 1 items, got 0",
    ]


def test_a_checkout_without_the_pack_fails_loudly(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {**os.environ, PACK_ENV: str(tmp_path / "nowhere")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_every_case_of_the_shared_pack_passes_in_every_area",
        ],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=110,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 1, done.stdout
    assert "1 failed" in done.stdout and "conformance pack is missing" in done.stdout
