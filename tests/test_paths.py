"""The default socket path never depends on the working directory, and every command
finds its config by one search order."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from phloem.base.paths import config_candidates, default_socket_path, find_config
from tests.helpers import PY, ROOT, short_tmpdir, wait_until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def d() -> Iterator[Path]:
    path = short_tmpdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_socket_rule_xdg_then_run_user_then_tmpdir(d: Path) -> None:
    runtime = d / "xdg"
    env = {"XDG_RUNTIME_DIR": str(runtime), "TMPDIR": str(d / "tmp")}
    assert default_socket_path(env, 1000, d / "run") == runtime / "phloem" / "phloem.sock"
    (d / "run" / "1000").mkdir(parents=True)
    env.pop("XDG_RUNTIME_DIR")
    assert default_socket_path(env, 1000, d / "run") == d / "run/1000/phloem/phloem.sock"
    assert default_socket_path(env, 1001, d / "run") == d / "tmp/phloem-1001/phloem.sock"
    assert default_socket_path({}, 1001, d / "run") == Path("/tmp/phloem-1001/phloem.sock")
    # relative values are ignored (the XDG rules), so the cwd never matters
    relative = {"XDG_RUNTIME_DIR": "rel", "TMPDIR": "rel"}
    assert default_socket_path(relative, 7, d / "run") == Path("/tmp/phloem-7/phloem.sock")


def test_the_default_socket_is_the_same_from_any_directory(
    d: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(d))
    first = default_socket_path()
    monkeypatch.chdir(d)
    assert default_socket_path() == first and first.is_absolute()


@pytest.mark.parametrize("xdg", [True, False], ids=["xdg_runtime_dir", "no_xdg_runtime_dir"])
def test_status_from_another_cwd_finds_the_daemon(d: Path, xdg: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "PHLOEM_SOCKET")}
    env["TMPDIR"] = str(d)
    env["XDG_CONFIG_HOME"] = str(d / "cfg")  # no user config file
    if xdg:
        env["XDG_RUNTIME_DIR"] = str(d / "xdg")
        expected = d / "xdg" / "phloem" / "phloem.sock"
    elif Path(f"/run/user/{os.getuid()}").is_dir():
        expected = Path(f"/run/user/{os.getuid()}/phloem/phloem.sock")
    else:
        expected = d / f"phloem-{os.getuid()}" / "phloem.sock"
    if expected.exists():
        pytest.skip(f"a daemon already uses the default socket {expected}")
    (d / "a").mkdir()
    (d / "b").mkdir()
    daemon = subprocess.Popen(
        [PY, "-m", "phloem", "daemon"],
        cwd=d / "a",
        env={**env, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(expected.exists, timeout=30, what=f"the socket at {expected}")
        status = subprocess.run(
            [PY, "-m", "phloem", "status", "--json"],
            cwd=d / "b",
            env={**env, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert status.returncode == 0, status.stderr
        assert str(expected) in status.stdout
    finally:
        daemon.terminate()
        assert daemon.wait(30) == 0


def test_config_search_order(d: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cwd, xdg = d / "cwd", d / "xdg"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    env = {"XDG_CONFIG_HOME": str(xdg)}
    candidates = config_candidates(env)
    assert candidates == [
        cwd / "phloem.toml",
        xdg / "phloem" / "phloem.toml",
        Path("/etc/phloem/phloem.toml"),
    ]
    expected_last = candidates[2] if candidates[2].is_file() else None
    assert find_config(None, env) == expected_last
    (xdg / "phloem").mkdir(parents=True)
    (xdg / "phloem" / "phloem.toml").write_text("")
    assert find_config(None, env) == xdg / "phloem" / "phloem.toml"
    (cwd / "phloem.toml").write_text("")
    assert find_config(None, env) == cwd / "phloem.toml"
    env["PHLOEM_CONFIG"] = str(d / "named.toml")  # named: used even before it exists
    assert find_config(None, env) == d / "named.toml"
    assert find_config("explicit.toml", env) == Path("explicit.toml")
    home = {"HOME": str(d / "home")}
    assert config_candidates(home)[1] == d / "home" / ".config" / "phloem" / "phloem.toml"
