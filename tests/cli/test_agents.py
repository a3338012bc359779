"""`phloem agent list | plan | run` against a real daemon running the supplier example."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from phloem.cli.agents import parse_state
from phloem.cli.commands import UsageError
from tests.helpers import ROOT, DaemonProc, run_cli, running_daemon

pytestmark = pytest.mark.timeout(60)

EXAMPLE_CONFIG = ROOT / "conf" / "examples" / "supplier_risk.toml"


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProc]:
    with running_daemon(EXAMPLE_CONFIG.read_text()) as daemon:
        yield daemon


def cli(daemon: DaemonProc, *args: str) -> tuple[int, str, str]:
    done = run_cli(*args, "--socket", str(daemon.socket))
    return done.returncode, done.stdout, done.stderr


def test_agent_list_and_plan_show_the_goap_groups(daemon: DaemonProc) -> None:
    code, out, err = cli(daemon, "agent", "list")
    assert code == 0, err
    assert "supplierBrief" in out and "planner" in out
    code, out, err = cli(daemon, "agent", "plan", "supplierBrief", "--state", "company=ACME")
    assert code == 0, err
    assert out.splitlines() == [
        "1. fetchFilings, fetchNews",
        "2. analyzeFinancials",
        "3. assessRisk",
        "4. writeBrief",
    ]


def test_agent_run_prints_events_then_the_outcome_and_exits_0(daemon: DaemonProc) -> None:
    code, out, err = cli(
        daemon,
        "agent",
        "run",
        "supplierBrief",
        "--state",
        "company=ACME Components",
        "--show",
        "brief",
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("fetch")
    assert any(line.startswith("writeBrief: [writes brief]") for line in lines)
    end = lines.index("brief:")
    assert lines[end - 2].startswith("outcome: done")
    assert lines[end + 1] == "Supplier risk brief: ACME Components"


def test_agent_run_json_and_a_failed_run_exits_1(daemon: DaemonProc) -> None:
    code, out, err = cli(
        daemon, "agent", "run", "supplierBrief", "--state", "company=Nobody", "--json"
    )
    assert code == 1, err
    docs = [json.loads(line) for line in out.splitlines()]
    assert docs[-1]["status"] == "agent_failed"
    assert any(d.get("error", {}).get("kind") == "agent_error" for d in docs[:-1])
    assert err.startswith("phloem: agent run agent_failed: ")  # the failure on stderr too


def test_state_arguments_parse_json_values_or_fall_back_to_strings() -> None:
    assert parse_state(["a=1", "b=ACME Components", 'c={"x": [1]}', "d="]) == {
        "a": 1,
        "b": "ACME Components",
        "c": {"x": [1]},
        "d": "",
    }
    with pytest.raises(UsageError, match="KEY=VALUE"):
        parse_state(["novalue"])


def test_the_example_config_file_exists_for_the_readme() -> None:
    assert Path(EXAMPLE_CONFIG).is_file()


def test_the_default_config_declares_the_same_supplier_example() -> None:
    from phloem.config import load_config

    main = load_config(ROOT / "conf" / "phloem.toml").agents
    example = load_config(EXAMPLE_CONFIG).agents
    assert main.functions == example.functions
    assert main.planners == example.planners
