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
from tests.helpers import (
    PY,
    ROOT,
    DaemonProc,
    run_cli,
    running_daemon,
    short_tmpdir,
    wait_until,
)

pytestmark = pytest.mark.timeout(90)

CONFIG = """
[services]
disabled = ["echo"]
[agents.components]
helpdesk = "phloem.examples.helpdesk_eval:helpdesk"
echo_agent = "tests.actors.eval.fixtures:EchoAgent"
home = "tests.actors.eval.fixtures:home_agent"
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
    # off a terminal: where it runs first, then one line per finished case
    first, *rest = err.splitlines()
    assert first == f"eval helpdesk: 4 cases, agent helpdesk, daemon at {daemon.socket}"
    lines = sorted(rest)
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


LAMP = {
    "schema_version": 2,
    "id": "home",
    "version": "1",
    "cases": [
        {
            "id": "lamp",
            "turns": [
                {
                    "id": "t1",
                    "input": "Turn on the lamp",
                    "expected_response": "The lamp is off.",
                    "expected_trajectory": [
                        {"name": "set_device", "args": {"device": "lamp", "on": False}},
                        {"name": "get_status"},
                    ],
                }
            ],
        },
        {
            "id": "fan",
            "turns": [{"input": "Is the fan on?", "expected_response": "The fan is off."}],
        },
    ],
}


def test_a_failing_case_shows_expected_against_actual_everywhere(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    path = write_json(tmp_path / "home.json", LAMP)
    out_json, out_xml = tmp_path / "r.json", tmp_path / "r.xml"
    code, out, err = cli(
        daemon, "eval", "run", str(path), "--agent", "home", "--json", str(out_json),
        "--junit", str(out_xml),
    )  # fmt: skip
    assert code == 2, err
    on = 'set_device({"device":"lamp","on":true})'
    off = 'set_device({"device":"lamp","on":false})'
    # Markdown: a Failures section, expected next to actual, the scores against thresholds
    failures = out.split("## Failures\n", 1)[1]
    assert "### `lamp`: failed" in failures and "`fan`" not in failures
    assert "| response | `The lamp is off.` | `The lamp is on.` |" in failures
    scores = "Scores: tool_trajectory_avg_score 0.000 < 1, response_match_score 0.750 < 0.8."
    assert scores in failures
    assert "Trajectory (exact, args exact):" in failures
    assert f"| ~ | `{off}` | `{on}` | args differ: on |" in failures
    assert "| - | `get_status({})` |  | missing |" in failures
    # the terminal (stderr): the same, as the case ends
    explained = err.split("case lamp: failed\n", 1)[1]
    assert '    expected response: "The lamp is off."' in explained
    assert '    actual response:   "The lamp is on."' in explained
    assert "response_match_score 0.750 < 0.8" in explained
    assert f"        ~ expected {off}\n          actual   {on}  [args differ: on]" in explained
    assert "        - get_status({})" in explained
    assert "case fan: passed" in err
    # JUnit: the <failure>'s message and body
    suite = next(iter(JUnitXml.fromfile(str(out_xml))))
    lamp = next(c for c in suite if c.name == "lamp")
    [failure] = lamp.result
    assert 'expected "The lamp is off."; actual "The lamp is on."' in failure.message
    assert "trajectory 1 mismatch, 1 missing" in failure.message
    assert f"~ expected {off}" in failure.text and "- get_status({})" in failure.text
    # JSON: the diagnosis itself
    sample = json.loads(out_json.read_bytes())["cases"][0]["samples"][0]
    turn = sample["diagnosis"]["turns"][0]
    assert turn["expected_response"] == "The lamp is off."
    assert turn["actual_response"] == "The lamp is on."
    assert [s["status"] for s in turn["trajectory"]] == ["mismatch", "missing"]
    assert turn["trajectory"][0]["differs"] == ["on"]
    assert sample["diagnosis"]["thresholds"]["response_match_score"] == 0.8


def test_an_errored_case_shows_its_first_error(daemon: DaemonProc, tmp_path: Path) -> None:
    crit = write_json(tmp_path / "c.json", EXACT)
    path = write_json(tmp_path / "f.json", phloem_set([case("boom", {"input": "fail"})]))
    xml = tmp_path / "f.xml"
    code, out, err = cli(
        daemon, "eval", "run", str(path), "--agent", "echo_agent", "--criteria", str(crit),
        "--junit", str(xml),
    )  # fmt: skip
    assert code == 2
    assert "### `boom`: error" in out and "First error: `agent_error`: asked to fail" in out
    assert "    first error: agent_error: asked to fail" in err
    [error] = next(c for c in next(iter(JUnitXml.fromfile(str(xml)))) if c.name == "boom").result
    assert "first error: agent_error: asked to fail" in error.text


def _case_ids(report: Path) -> list[str]:
    return [c["id"] for c in json.loads(report.read_bytes())["cases"]]


def test_case_globs_and_rerun_failed(daemon: DaemonProc, tmp_path: Path) -> None:
    crit = write_json(tmp_path / "c.json", EXACT)
    path = echo_set(tmp_path, "e.json", {"a": "a", "b1": "b1", "b2": "wrong", "c": "wrong"})
    report = tmp_path / "r.json"
    base = ("eval", "run", str(path), "--agent", "echo_agent", "--criteria", str(crit))
    code, _, err = cli(daemon, *base, "--case", "b*", "--json", str(report))
    assert code == 2 and _case_ids(report) == ["b1", "b2"], err
    assert err.splitlines()[0].startswith("eval echo: 2 cases, agent echo_agent, daemon at")
    code, _, _ = cli(daemon, *base, "--case", "a", "--case", "b?", "--json", str(report))
    assert _case_ids(report) == ["a", "b1", "b2"]
    code, out, err = cli(daemon, *base, "--case", "z*")
    assert code == 1 and out == "" and "--case 'z*' matches no case of eval set 'echo'" in err
    full = tmp_path / "full.json"
    code, _, _ = cli(daemon, *base, "--json", str(full))
    assert code == 2 and _case_ids(full) == ["a", "b1", "b2", "c"]
    code, _, err = cli(daemon, *base, "--rerun-failed", str(full), "--json", str(report))
    assert code == 2 and _case_ids(report) == ["b2", "c"], err
    code, _, _ = cli(
        daemon, *base, "--rerun-failed", str(full), "--case", "c", "--json", str(report)
    )
    assert _case_ids(report) == ["c"]
    passing = tmp_path / "passing.json"
    assert cli(daemon, *base, "--case", "a", "--json", str(passing))[0] == 0
    code, _, err = cli(daemon, *base, "--rerun-failed", str(passing))
    assert code == 1 and "nothing to re-run: no case of the report failed" in err
    other = write_json(tmp_path / "o.json", phloem_set([case("a", {"input": "a"})], "other"))
    code, _, err = cli(
        daemon, "eval", "run", str(other), "--agent", "echo_agent", "--rerun-failed", str(full)
    )
    assert code == 1 and "the report to re-run is of eval set 'echo', not 'other'" in err
    code, _, err = cli(daemon, *base, "--rerun-failed", str(tmp_path / "missing.json"))
    assert code == 1 and "[eval_baseline_invalid]" in err


def _standalone_config(socket: Path) -> str:
    return CONFIG + f'[daemon]\nsocket = "{socket}"\n'


def test_eval_run_with_config_runs_embedded_without_a_daemon_and_on_one_with_it(
    tmp_path: Path,
) -> None:
    d = short_tmpdir()
    socket = d / "phloem.sock"
    config = d / "phloem.toml"
    config.write_text(_standalone_config(socket))
    crit = write_json(tmp_path / "c.json", EXACT)
    good = echo_set(tmp_path, "good.json", {"a": "a", "b": "b"})
    bad = echo_set(tmp_path, "bad.json", {"a": "a", "b": "not b"})

    def run(path: Path) -> tuple[int, str, str]:
        done = run_cli(
            "eval", "run", str(path), "--agent", "echo_agent", "--criteria", str(crit),
            "--config", str(config), timeout=120,
        )  # fmt: skip
        return done.returncode, done.stdout, done.stderr

    assert not socket.exists()
    code, embedded_good, err = run(good)
    assert code == 0, err
    assert (
        err.splitlines()[0] == f"eval echo: 2 cases, agent echo_agent, embedded tree from {config}"
    )
    code, embedded_bad, err = run(bad)
    assert code == 2 and "| b | failed |" in embedded_bad and "## Failures" in embedded_bad, err
    assert not socket.exists()  # nothing left listening
    daemon = DaemonProc(socket, config).wait_ready()
    try:
        code, daemon_good, err = run(good)
        assert code == 0, err
        assert err.splitlines()[0] == f"eval echo: 2 cases, agent echo_agent, daemon at {socket}"
        code, daemon_bad, _ = run(bad)
        assert code == 2
    finally:
        assert daemon.stop() == 0
    assert embedded_good == daemon_good and embedded_bad == daemon_bad  # the same reports


def test_unimplemented_adk_fields_are_named_once_as_a_warning(
    daemon: DaemonProc, tmp_path: Path
) -> None:
    fixtures = ROOT / "tests" / "actors" / "eval" / "adk_fixtures"
    code, out, err = cli(
        daemon, "eval", "run", str(fixtures / "home.evalset.json"), "--agent", "home",
        "--criteria", str(fixtures / "test_config.json"),
    )  # fmt: skip
    assert code == 0, err
    [warning] = [line for line in err.splitlines() if line.startswith("warning:")]
    for name in ("user_simulator_config", "final_response_match_v2", "conversation_scenario"):
        assert warning.count(name) == 1 and out.count(f"`{name}`") == 1
    assert "| simulated_user | not_evaluated |" in out


def test_ctrl_c_stops_an_embedded_eval_and_its_children(tmp_path: Path) -> None:
    d = short_tmpdir()
    config = d / "phloem.toml"
    config.write_text(_standalone_config(d / "phloem.sock"))
    pid_file = tmp_path / "pids"
    c = case("c0", {"input": "go", "expected_response": "woke"})
    c["session_input"] = {"state": {"seconds": 60, "pid_file": str(pid_file)}}
    path = write_json(tmp_path / "slow.json", phloem_set([c]))
    proc = subprocess.Popen(
        [PY, "-m", "phloem", "eval", "run", str(path), "--agent", "sleepy", "--timeout", "300",
         "--case-timeout", "200", "--config", str(config)],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() != "", 60)
    [pid] = [int(p) for p in pid_file.read_text().split()]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 130
    assert proc.stderr is not None and "embedded tree from" in proc.stderr.read().decode()
    wait_until(lambda: not alive(pid), 30, "the case's child gone with the embedded tree")
