"""The CLI as a person meets it: rich views fitted to an 80-column terminal, plain text
when piped, NO_COLOR, global flags before the subcommand, Ctrl-C exiting 130, and shell
completion scripts that the shells accept."""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest
from rich.cells import cell_len

from phloem.cli.main import main
from tests.helpers import PY, ROOT, DaemonProc, wait_until

pytestmark = pytest.mark.timeout(60)

CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>78]")
COLOUR = re.compile(r"\x1b\[(?:[0-9]+;)*(?:3[0-9]|9[0-7])(?:;[0-9]+)*m")  # foreground colours


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _width(text: str) -> int:
    return max((cell_len(line) for line in CSI.sub("", text).splitlines()), default=0)


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> FakeTerminal:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "24")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    return FakeTerminal()


@pytest.mark.parametrize("command", ["status", "tree"])
def test_status_and_tree_on_an_80_column_terminal(
    shared_daemon: DaemonProc, terminal: FakeTerminal, command: str
) -> None:
    assert main([command, "--socket", str(shared_daemon.socket)], out=terminal) == 0
    text = terminal.getvalue()
    assert COLOUR.search(text), "colour on a terminal"
    assert _width(text) <= 80
    assert "echo" in text


@pytest.mark.parametrize("command", ["status", "tree"])
def test_no_color_turns_colour_off(
    shared_daemon: DaemonProc,
    terminal: FakeTerminal,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert main([command, "--socket", str(shared_daemon.socket)], out=terminal) == 0
    assert not COLOUR.search(terminal.getvalue())


@pytest.mark.parametrize("command", ["status", "tree", "top"])
def test_piped_output_is_plain_text(shared_daemon: DaemonProc, command: str) -> None:
    out = io.StringIO()
    extra = ["--iterations", "2", "--interval", "0.05"] if command == "top" else []
    assert main([command, "--socket", str(shared_daemon.socket), *extra], out=out) == 0
    text = out.getvalue()
    assert "\x1b" not in text and "echo" in text
    if command != "tree":  # a piped tree keeps whole lines (its depth sets the width)
        assert _width(text) <= 80
    if command == "top":
        assert text.count("NAME ") == 2 and "CPU%" in text  # a table per refresh


def test_global_flags_work_before_the_subcommand(
    shared_daemon: DaemonProc, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--json", "--socket", str(shared_daemon.socket), "status"]) == 0
    assert "echo" in json.loads(capsys.readouterr().out)["services"]
    assert main(["--socket", str(shared_daemon.socket), "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pid"] == shared_daemon.proc.pid
    assert main(["--socket", "/nonexistent/phloem.sock", "--json", "status"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["error"]["kind"] == "no_daemon"
    assert captured.err.startswith("phloem: ") and "[no_daemon]" in captured.err


def _pty_process(
    args: list[str], rows: int = 24, cols: int = 80
) -> tuple[subprocess.Popen[bytes], int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    proc = subprocess.Popen(
        [PY, "-m", "phloem", *args],
        cwd=ROOT,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    return proc, master


def _read_until(master: int, want: bytes, timeout: float = 30.0) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout
    os.set_blocking(master, False)
    while want not in data and time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except BlockingIOError:
            time.sleep(0.02)
            continue
        except OSError:  # the other side closed
            break
        data += chunk
    return data


def test_top_in_an_80x24_terminal_keeps_its_header_and_ctrl_c_exits_130(
    shared_daemon: DaemonProc,
) -> None:
    proc, master = _pty_process(["top", "--socket", str(shared_daemon.socket), "--interval", "0.1"])
    try:
        screen = _read_until(master, b"PID/THREAD")
        screen += _read_until(master, b"PID/THREAD")  # a second refresh: redrawn in place
        text = screen.decode(errors="replace")
        assert "\x1b[?1049h" in text  # the alternate screen: the terminal is restored after
        frames = [CSI.sub("", frame) for frame in text.split("\x1b[H")]  # each redraw
        last = frames[-1]
        assert "PID/THREAD" in last and "q quit" in last and "CPU%" in last
        assert len(frames) >= 3  # drawn, then redrawn from the top (the header stays)
        for frame in frames:
            assert all(cell_len(line) <= 80 for line in frame.splitlines()), frame
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the foreground group
        assert proc.wait(30) == 130
        tail = _read_until(master, b"\x1b[?1049l", timeout=5)
        assert b"\x1b[?1049l" in screen + tail and b"Traceback" not in screen + tail
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)


def test_ctrl_c_exits_130_for_a_command_waiting_on_the_daemon(shared_daemon: DaemonProc) -> None:
    from phloem.client.sync import Client

    with Client.connect(shared_daemon.socket) as client:
        before = client.status().connections
        never = '{"type": "cancelled", "wait_for": "never-recorded"}'  # replied at the deadline
        args = ["send", "--socket", str(shared_daemon.socket), "holder", never, "--timeout", "60"]
        proc, master = _pty_process(args)
        wait_until(lambda: client.status().connections > before, timeout=30, what="connected")
    try:
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)


def _bash_complete(script: str, words: list[str]) -> list[str]:
    array = " ".join(f"'{w}'" for w in words)
    program = (
        f"{script}\nCOMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; _phloem_complete; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    result = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, timeout=20, check=True
    )
    return result.stdout.split()


def test_bash_completion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert "complete -o default -F _phloem_complete phloem" in script
    assert _bash_complete(script, ["phloem", "st"]) == ["status", "stop", "start"]
    assert _bash_complete(script, ["phloem", "config", ""]) == ["check", "init", "--help"]
    assert "--interval" in _bash_complete(script, ["phloem", "--json", "top", "--"])
    assert _bash_complete(script, ["phloem", "completion", "z"]) == ["zsh"]
    assert _bash_complete(script, ["phloem", "status", "--config", ""]) == []  # files


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "zsh"]) == 0
    script = tmp_path / "_phloem"
    script.write_text(capsys.readouterr().out)
    assert script.read_text().startswith("#compdef phloem")
    subprocess.run(["zsh", "-n", str(script)], check=True, timeout=20)
    # run the way zsh's bashcompinit runs it (sh emulation: arrays from 0)
    program = (
        f"autoload -U compinit && compinit -u; source {script}; "
        "f() { emulate -L sh; COMP_WORDS=(phloem config ''); COMP_CWORD=2; "
        '_phloem_complete; echo "${COMPREPLY[@]}"; }; f'
    )
    out = subprocess.run(
        ["zsh", "-f", "-c", program], capture_output=True, text=True, timeout=20, check=True
    )
    assert out.stdout.split() == ["check", "--help"]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "fish"]) == 0
    script = tmp_path / "phloem.fish"
    script.write_text(capsys.readouterr().out)
    subprocess.run(["fish", "-n", str(script)], check=True, timeout=20)

    def complete(line: str) -> list[str]:
        out = subprocess.run(
            ["fish", "--no-config", "-c", f"source {script}; complete -C '{line}'"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return [row.split("\t")[0] for row in out.stdout.splitlines()]

    assert complete("phloem con") == ["config"]
    assert complete("phloem config ") == ["check"]
    assert "--iterations" in complete("phloem top --i")
    assert complete("phloem completion ") == ["bash", "fish", "zsh"]


def test_completion_needs_a_known_shell(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "tcsh"]) == 2
    assert "invalid choice" in capsys.readouterr().err
