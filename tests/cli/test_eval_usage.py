"""`phloem eval run` answers a usage error with its own exit code (64), never with the 2
of a completed run whose gate failed; other commands keep 2 for usage errors."""

from __future__ import annotations

import io

import pytest

from phloem.cli.eval import EXIT_EVAL_USAGE, EXIT_GATE_FAILED
from phloem.cli.main import main

pytestmark = pytest.mark.timeout(30)

NO_DAEMON = ["--socket", "/nonexistent/phloem.sock"]
HELPDESK = "conf/examples/eval/helpdesk.evalset.json"  # parsed before the flag is checked


def run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, err.getvalue()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["eval", "run", "set.json", "--bogus"], "unrecognized arguments: --bogus"),
        (["--json", "eval", "run", "set.json", "--bogus", "x"], "unrecognized arguments"),
        (["eval", "run", "set.json", "--samples", "two"], "invalid int value"),
        (["eval", "run"], "the following arguments are required: evalset"),
        (
            ["eval", "run", HELPDESK, "--agent", "a", "--metric-tolerance", "answer=high"],
            "expected a number",
        ),
    ],
)
def test_a_usage_error_of_eval_run_exits_64(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(*argv, *NO_DAEMON)
    assert code == EXIT_EVAL_USAGE == 64 and code != EXIT_GATE_FAILED
    assert said in err + capsys.readouterr().err  # argparse writes to sys.stderr


def test_other_commands_keep_exit_2_for_usage_errors() -> None:
    assert run("eval", "validate", "--bogus", *NO_DAEMON)[0] == 2
    assert run("status", "--bogus", *NO_DAEMON)[0] == 2
    assert run("eval", "bogus")[0] == 2


def test_a_missing_eval_set_file_is_still_a_configuration_error() -> None:
    code, err = run("eval", "run", "/nonexistent/set.json", *NO_DAEMON)
    assert code == 1, err
