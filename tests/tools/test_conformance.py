from __future__ import annotations

import json
from pathlib import Path

import pytest

from phloem.tools.conformance import run_pack, summary
from phloem.tools.conformance.__main__ import main

pytestmark = pytest.mark.timeout(60)

PACK = Path(__file__).resolve().parents[2] / ".." / "shared" / "conformance" / "plasmid-v1"
AREAS = ("tools", "outputlimit", "pathglob")


@pytest.mark.skipif(not PACK.is_dir(), reason=f"shared fixture pack not found at {PACK}")
def test_every_tools_outputlimit_and_pathglob_case_of_the_shared_pack_passes() -> None:
    results = [r for area in AREAS for r in run_pack(PACK, area)]
    failures = [r.line() for r in results if r.status != "pass"]
    assert failures == []
    assert len(results) >= 50


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
