"""`phloem config init [PATH]`, run as a user types it: the file it writes, where, what it
refuses, and that a daemon starts on it (and `model list` then asks that daemon)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import msgspec
import pytest

from phloem.cli.configinit import TEMPLATE
from phloem.config import Config, parse_config
from tests.helpers import PY, ROOT, DaemonProc

pytestmark = pytest.mark.timeout(90)


def _env(d: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PHLOEM_CONFIG", "PHLOEM_SOCKET")}
    env.update(
        HOME=str(d / "home"),
        XDG_CONFIG_HOME=str(d / "xdg"),
        XDG_STATE_HOME=str(d / "state"),
        XDG_RUNTIME_DIR=str(d / "run"),
        PYTHONPATH=str(ROOT),
    )
    return env


def _phloem(d: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (d / "work").mkdir(exist_ok=True)
    return subprocess.run(
        [PY, "-m", "phloem", *args],
        check=False,
        cwd=d / "work",  # no ./phloem.toml here
        env=_env(d),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_init_writes_the_user_config_once_and_refuses_to_overwrite(tmp_short: Path) -> None:
    done = _phloem(tmp_short, "config", "init")
    path = tmp_short / "xdg" / "phloem" / "phloem.toml"
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {path}")
    assert path.read_text() == TEMPLATE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.write_text("# mine\n")
    again = _phloem(tmp_short, "config", "init")
    assert again.returncode == 1
    assert again.stderr.splitlines() == [
        f"phloem: {path} exists; give --force to replace it [invalid_argument]"
    ]
    assert path.read_text() == "# mine\n"
    forced = _phloem(tmp_short, "config", "init", "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout) == {"written": str(path)}
    assert path.read_text() == TEMPLATE


def test_init_writes_a_given_path_and_refuses_a_directory(tmp_short: Path) -> None:
    target = tmp_short / "etc" / "p.toml"
    done = _phloem(tmp_short, "config", "init", str(target))
    assert done.returncode == 0, done.stderr
    assert target.read_text() == TEMPLATE
    assert not (tmp_short / "xdg").exists()
    refused = _phloem(tmp_short, "config", "init", str(tmp_short / "etc"))
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        f"phloem: {tmp_short / 'etc'} is a directory [invalid_argument]"
    ]


def test_the_values_it_shows_are_the_defaults() -> None:
    written = parse_config(TEMPLATE)
    defaults = Config()
    for section in ("daemon", "logging", "services", "sessions"):
        assert getattr(written, section) == getattr(defaults, section), section
    assert msgspec.to_builtins(written.providers["flash"])["api_key_env"] == (
        "PHLOEM_GEMINI_API_KEY"
    )


def test_the_written_file_passes_the_check_and_a_daemon_starts_on_it(tmp_short: Path) -> None:
    assert _phloem(tmp_short, "config", "init").returncode == 0
    check = _phloem(tmp_short, "config", "check")  # found by the search order
    assert check.returncode == 0, check.stderr
    config = tmp_short / "xdg" / "phloem" / "phloem.toml"
    socket = tmp_short / "s" / "d.sock"
    daemon = DaemonProc(socket, config, env=_env(tmp_short)).wait_ready()
    try:
        listed = _phloem(tmp_short, "model", "list", "--socket", str(socket))
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines()[0].startswith("flash ")
        assert listed.stdout.splitlines()[-1] == f"from the daemon on {socket}"
    finally:
        assert daemon.stop() == 0, "".join(daemon.lines)
