"""No traceback reaches a user: every command of the CLI's command table (found from the
parser, so a new command is covered without a change here), run with its stdout's reader
gone, ends quietly (exit 141, as shells report SIGPIPE); `phloem web` on a port in use
says so in one line (exit 1)."""

from __future__ import annotations

import argparse
import io
import os
import socket
import subprocess
from collections.abc import Iterator, Sequence

import pytest

from phloem.cli.commands import EXIT_BROKEN_PIPE
from phloem.cli.eval import EXIT_EVAL_USAGE
from phloem.cli.main import build_parser, main
from tests.helpers import PY, ROOT, DaemonProc

pytestmark = pytest.mark.timeout(300)

RUN_TIMEOUT_S = 60.0
AT_ONCE = 4  # commands run side by side (the machine is shared)


def leaf_commands() -> list[list[str]]:
    """Every command path of the parser: `status`, `config check`, ..."""
    found: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found.append(path)
            return
        for name, sub in subs[0].choices.items():
            walk(sub, [*path, name])

    walk(build_parser(), [])
    return found


def _run_all(commands: Sequence[list[str]]) -> Iterator[tuple[list[str], int, str]]:
    """Run each `phloem` command with stdout a pipe whose reader has closed, stdin empty;
    (args, exit code, stderr) for each."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pending = list(commands)
    while pending:
        batch, pending = pending[:AT_ONCE], pending[AT_ONCE:]
        running = []
        for args in batch:
            read, write = os.pipe()
            os.close(read)  # the reader is gone before the command writes anything
            proc = subprocess.Popen(
                [PY, "-m", "phloem", *args],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=write,
                stderr=subprocess.PIPE,
            )
            os.close(write)
            running.append((args, proc))
        for args, proc in running:
            try:
                _, err = proc.communicate(timeout=RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
                raise AssertionError(f"phloem {' '.join(args)} did not end") from None
            yield args, proc.returncode, err.decode(errors="replace")


def _quiet(stderr: str) -> bool:
    return "Traceback" not in stderr and "BrokenPipe" not in stderr and "Exception" not in stderr


def test_every_commands_help_to_a_closed_pipe_ends_quietly() -> None:
    commands = leaf_commands()
    assert ["status"] in commands and ["config", "check"] in commands and len(commands) > 20
    for args, code, err in _run_all([[*c, "--help"] for c in [[], *commands]]):
        # (argparse drops a failed write of its help itself, then exits 0)
        assert code in (0, EXIT_BROKEN_PIPE) and _quiet(err) and err == "", (args, code, err)


def test_every_command_without_a_daemon_ends_in_one_line_not_a_traceback(
    tmp_path: os.PathLike[str],
) -> None:
    """Bare, against no daemon: a usage error, `no_daemon` or its own error, one line
    each, never a traceback (whatever it would print goes to the closed pipe)."""
    missing = f"{tmp_path}/none.sock"
    skip = {("daemon",)}  # it would start a daemon (its errors are the daemon tests')
    commands = [c for c in leaf_commands() if tuple(c) not in skip]
    usage = (2, EXIT_EVAL_USAGE)  # `eval run` gives usage errors a code of their own
    for args, code, err in _run_all([[*c, "--socket", missing] for c in commands]):
        assert code in (1, *usage, EXIT_BROKEN_PIPE) and _quiet(err), (args, code, err)
        assert len(err.strip().splitlines()) <= 1 or code in usage, (args, err)  # 2 lines


def test_commands_that_print_end_quietly_when_the_reader_is_gone(
    shared_daemon: DaemonProc,
) -> None:
    s = ["--socket", str(shared_daemon.socket)]
    commands = [
        ["status", *s],
        ["status", "--json", *s],
        ["tree", *s],
        ["top", "--interval", "0.05", *s],  # forever, but for the closed pipe
        ["top", "--json", "--interval", "0.05", *s],
        ["runs", *s],
        ["send", "echo", '"hi"', *s],
        ["completion", "bash"],
    ]
    for args, code, err in _run_all(commands):
        assert code == EXIT_BROKEN_PIPE and _quiet(err) and err == "", (args, code, err)


@pytest.mark.parametrize("command", ["web", "api"])
def test_a_server_on_a_port_in_use_says_so_in_one_line(
    shared_daemon: DaemonProc, command: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        listen = f"127.0.0.1:{port}"
        done = subprocess.run(
            [
                PY,
                "-m",
                "phloem",
                command,
                "--socket",
                str(shared_daemon.socket),
                "--listen",
                listen,
            ],
            check=False,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr == (
        f"phloem: cannot listen on 127.0.0.1:{port}: address already in use [listen_failed]\n"
    )


def test_an_unexpected_error_is_one_line_with_exit_1(shared_daemon: DaemonProc) -> None:
    out, err = io.StringIO(), io.StringIO()
    out.close()  # writing raises ValueError: not a PhloemError, not a broken pipe
    assert main(["status", "--socket", str(shared_daemon.socket)], out, err) == 1
    assert err.getvalue() == (
        "phloem status: unexpected ValueError: I/O operation on closed file (a bug)\n"
    )
