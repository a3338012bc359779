"""`phloem eval run | validate` against a real daemon: reports and their files, exit codes
0/2/1, baselines, progress on and off a terminal, Ctrl-C, and the AsyncClient."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from junitparser import JUnitXml

import phloem
from tests.actors.eval.fixtures import ADK_LEGACY, case, phloem_set, write_json
from tests.helpers import PY, ROOT, DaemonProc, run_cli, running_daemon, wait_until

pytestmark = pytest.mark.timeout(90)

CONFIG = """
[services]
disabled = ["echo"]
[agents.components]
helpdesk = "phloem.examples.helpdesk_eval:helpdesk"
echo_agent = "tests.actors.eval.fixtures:EchoAgent"
[agents.functions.sleepy]
fn = "tests.actors.eval.fixtures:sleepy"
input_keys = ["seconds", "pid_file"]
output_key = "out"
isolate = true
"""
EVALSET = ROOT / "conf" / "examples" / "eval" / "helpdesk.evalset.json"
CRITERIA = ROOT / "conf" / "examples" / "eval" / "criteria.json"
EXACT = {"schema_version": 1, "criteria": [{"id": "exact", "criterion": "exact_response"}]}


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    with running_daemon(CONFIG) as daemon:
        yield daemon


def cli(daemon: DaemonProc, *args: str) -> tuple[int, str, str]:
    done = run_cli(*args, "--socket", str(daemon.socket), timeout=60)
    return done.returncode, done.stdout, done.stderr


def echo_set(tmp: Path, name: str, expected: dict[str, str]) -> Path:
    cases = [case(cid, {"input": cid, "expected_response": want}) for cid, want in expected.items()]
    return write_json(tmp / name, phloem_set(cases, "echo"))


def test_eval_run_passes_writes_three_reports_and_prints_the_markdown(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    out_json, out_md, out_xml = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "r.xml"
    code, out, err = cli(
        daemon,
        "eval",
        "run",
        str(EVALSET),
        "--agent",
        "helpdesk",
        "--criteria",
        str(CRITERIA),
        "--samples",
        "2",
        "--concurrency",
        "3",
        "--json",
        str(out_json),
        "--markdown",
        str(out_md),
        "--junit",
        str(out_xml),
    )
    assert code == 0, err
    assert out.encode() == out_md.read_bytes()  # stdout and file: the same bytes
    assert out.startswith("# Evaluation report\n") and "- Status: **PASSED**" in out
    report = json.loads(out_json.read_bytes())
    assert report["status"] == "passed" and report["pass_rate"] == 1.0
    assert len(report["cases"][0]["samples"]) == 2
    suite = next(iter(JUnitXml.fromfile(str(out_xml))))
    assert suite.tests == 4 and suite.failures == 0 and suite.errors == 0
    # off a terminal: one line per finished case
    lines = sorted(err.splitlines())
    assert lines == sorted(
        f"case {c}: passed"
        for c in ("weather-oslo", "weather-lisbon", "greeting-then-weather", "off-topic")
    )
    assert not list(tmp_path.glob(".r.*"))  # no temp files left by the atomic writes


def test_a_failed_gate_exits_2(daemon: DaemonProc, tmp_path: Path) -> None:
    path = echo_set(tmp_path, "e.json", {"a": "a", "b": "not b"})
    crit = write_json(tmp_path / "c.json", EXACT)
    junit = tmp_path / "e.xml"
    code, out, err = cli(
        daemon,
        "eval",
        "run",
        str(path),
        "--agent",
        "echo_agent",
        "--criteria",
        str(crit),
        "--junit",
        str(junit),
    )
    assert code == 2, err
    assert "- Status: **FAILED**" in out and "| b | failed |" in out
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    assert suite.failures == 1
    code, _, err = cli(
        daemon,
        "eval",
        "run",
        str(path),
        "--agent",
        "echo_agent",
        "--criteria",
        str(crit),
        "--pass-rate-threshold",
        "0.5",
    )
    assert code == 0, err
    flaky = write_json(tmp_path / "f.json", phloem_set([case("c", {"input": "fail"})]))
    args = ("eval", "run", str(flaky), "--agent", "echo_agent", "--criteria", str(crit))
    code, out, _ = cli(daemon, *args, "--samples", "2")
    assert code == 2 and "| c | error |" in out
    code, _, err = cli(daemon, *args, "--samples", "2", "--min-successful-samples", "3")
    assert code == 1 and "min_successful_samples must be between 1 and 2" in err
    code, _, err = cli(daemon, *args, "--sample-pass-rate-threshold", "1.5")
    assert code == 1 and "sample_pass_rate_threshold must be between 0 and 1" in err


def test_a_regression_against_the_baseline_exits_2(daemon: DaemonProc, tmp_path: Path) -> None:
    crit = write_json(tmp_path / "c.json", EXACT)
    good = echo_set(tmp_path, "good.json", {"a": "a", "b": "b"})
    baseline = tmp_path / "baseline.json"
    code, _, err = cli(
        daemon,
        "eval",
        "run",
        str(good),
        "--agent",
        "echo_agent",
        "--criteria",
        str(crit),
        "--json",
        str(baseline),
    )
    assert code == 0, err
    worse = echo_set(tmp_path, "worse.json", {"a": "a", "b": "changed"})
    result = tmp_path / "now.json"
    args = (
        "eval",
        "run",
        str(worse),
        "--agent",
        "echo_agent",
        "--criteria",
        str(crit),
        "--pass-rate-threshold",
        "0.5",
        "--json",
        str(result),
    )
    code, _, err = cli(daemon, *args)  # the absolute gate alone passes ...
    assert code == 0, err
    code, out, err = cli(daemon, *args, "--baseline", str(baseline))  # ... the baseline does not
    assert code == 2, err
    doc = json.loads(result.read_bytes())
    kinds = [r["kind"] for r in doc["baseline"]["regressions"]]
    assert kinds == ["pass_rate_drop", "metric_drop", "case_not_passing"]
    assert "## Baseline" in out
    code, _, err = cli(
        daemon,
        *args,
        "--baseline",
        str(baseline),
        "--max-pass-rate-drop",
        "0.5",
        "--metric-tolerance",
        "exact=0.5",
    )
    assert code == 2 and "case_not_passing" in json.dumps(json.loads(result.read_bytes()))


def test_errors_exit_1_with_one_line(daemon: DaemonProc, tmp_path: Path) -> None:
    code, _, err = cli(daemon, "eval", "run", str(tmp_path / "missing.json"), "--agent", "x")
    assert code == 1 and err.count("\n") == 1 and "[eval_set_invalid]" in err
    bad = write_json(tmp_path / "bad.json", {"criteria": []})
    code, _, err = cli(
        daemon, "eval", "run", str(EVALSET), "--agent", "helpdesk", "--criteria", str(bad)
    )
    assert code == 1 and "[eval_criteria_invalid]" in err
    code, _, err = cli(daemon, "eval", "run", str(EVALSET), "--agent", "nobody")
    assert code == 1 and "[unknown_agent]" in err
    # the global --socket, given before the command, reaches the same daemon
    before = run_cli("--socket", str(daemon.socket), "eval", "run", str(EVALSET), "--agent", "x")
    assert before.returncode == 1 and "[unknown_agent]" in before.stderr, before.stderr
    code, _, err = cli(daemon, "eval", "run", str(EVALSET))
    assert code == 1 and "--agent" in err
    code, _, err = cli(
        daemon, "eval", "run", str(EVALSET), "--agent", "helpdesk", "--concurrency", "300"
    )
    assert code == 1 and "concurrency must be between 1 and 256 [eval_options_invalid]" in err
    not_a_report = write_json(tmp_path / "old.json", {"status": "passed"})
    code, out, err = cli(
        daemon, "eval", "run", str(EVALSET), "--agent", "helpdesk", "--baseline", str(not_a_report)
    )
    assert code == 1 and "[eval_baseline_invalid]" in err and out == ""
    code, _, err = cli(
        daemon, "eval", "run", str(EVALSET), "--agent", "helpdesk", "--max-pass-rate-drop", "2"
    )
    assert code == 1 and "max_pass_rate_drop must be between 0 and 1" in err
    done = run_cli(
        "eval", "run", str(EVALSET), "--agent", "helpdesk", "--socket", str(tmp_path / "none.sock")
    )
    assert done.returncode == 1 and "[no_daemon]" in done.stderr


def test_eval_validate_reports_format_and_counts(daemon: DaemonProc, tmp_path: Path) -> None:
    legacy = write_json(tmp_path / "home.test.json", ADK_LEGACY)
    code, out, err = cli(daemon, "eval", "validate", str(legacy))
    assert code == 0, err
    assert out.startswith("adk_test eval set 'home': 1 cases, 2 turns")
    code, out, _ = cli(daemon, "eval", "validate", str(EVALSET), "--json")
    assert json.loads(out)["cases"] == 4
    code, _, err = cli(daemon, "eval", "validate", str(tmp_path))
    assert code == 1 and "not a regular file" in err


def test_progress_bar_on_a_terminal(daemon: DaemonProc) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [
            PY,
            "-m",
            "phloem",
            "eval",
            "run",
            str(EVALSET),
            "--agent",
            "helpdesk",
            "--criteria",
            str(CRITERIA),
            "--socket",
            str(daemon.socket),
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        assert ready, "no progress output"
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's last writer closed it
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.wait(60) == 0
    text = seen.decode()
    assert "\r[" in text and "4/4 cases" in text and "pass 100%" in text and "eta" in text
    assert "case weather-oslo" not in text


def test_ctrl_c_cancels_the_eval_and_leaves_no_child(daemon: DaemonProc, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    cases = []
    for i in range(3):
        c = case(f"c{i}", {"input": "go", "expected_response": "woke"})
        c["session_input"] = {"state": {"seconds": 60, "pid_file": str(pid_file)}}
        cases.append(c)
    path = write_json(tmp_path / "slow.json", phloem_set(cases))
    proc = subprocess.Popen(
        [
            PY,
            "-m",
            "phloem",
            "eval",
            "run",
            str(path),
            "--agent",
            "sleepy",
            "--concurrency",
            "2",
            "--timeout",
            "300",
            "--case-timeout",
            "200",
            "--socket",
            str(daemon.socket),
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until(lambda: pid_file.exists() and len(pid_file.read_text().split()) == 2, 30)
    pids = [int(p) for p in pid_file.read_text().split()]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 130  # every phloem command: 128 + SIGINT
    wait_until(
        lambda: not any(alive(p) for p in pids),
        30,
        "case children gone",
    )
    with phloem.Client.connect(daemon.socket) as client:
        wait_until(lambda: "eval-run:" not in json.dumps(_ids(client.tree())), 30)
    assert len(pid_file.read_text().split()) == 2


def _ids(snapshot: object) -> list[str]:
    out: list[str] = []

    def walk(node: object) -> None:
        out.append(getattr(node, "id", ""))
        for child in getattr(node, "children", ()):
            walk(child)

    for root in getattr(snapshot, "roots", ()):
        walk(root)
    return out


def test_async_client_run_eval(daemon: DaemonProc) -> None:
    async def main() -> object:
        seen: list[object] = []

        async def progress(item: object) -> None:
            seen.append(item)

        async with await phloem.AsyncClient.connect(daemon.socket) as client:
            report = await client.run_eval(
                EVALSET, agent="helpdesk", criteria=CRITERIA, on_progress=progress
            )
        assert len(seen) == 4
        return report

    report = asyncio.run(main())
    assert report.status == "passed"  # type: ignore[attr-defined]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, or a process gone while asked, does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize(
    ("name", "doc", "path"),
    [
        ("empty.json", {"schema_version": 2, "id": "e", "version": "1", "cases": []}, "$.cases"),
        ("empty.evalset.json", {"eval_set_id": "e", "eval_cases": []}, "$.eval_cases"),
    ],
)
def test_an_eval_set_without_cases_is_invalid_for_validate_and_run(
    daemon: DaemonProc, tmp_path: Path, name: str, doc: dict[str, object], path: str
) -> None:
    empty = write_json(tmp_path / name, doc)
    for command in (["validate", str(empty)], ["run", str(empty), "--agent", "helpdesk"]):
        code, out, err = cli(daemon, "eval", *command)
        assert code == 1 and out == "" and err.count("\n") == 1, (command, code, out, err)
        assert "[eval_set_invalid]" in err and f"{path} must not be empty" in err


def test_the_service_refuses_an_eval_set_struct_without_cases(daemon: DaemonProc) -> None:
    from phloem.protocols.evalset import EvalSet

    with phloem.Client.connect(daemon.socket) as client, pytest.raises(phloem.PhloemError) as info:
        client.run_eval(EvalSet(id="e", version="1", cases=[]), agent="helpdesk")
    assert info.value.kind == "eval_set_invalid" and "no cases" in info.value.message
