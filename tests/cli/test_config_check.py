"""`phloem config check` catches what would fail only at start, and every command finds
its config by the one search order (`--config`, `$PHLOEM_CONFIG`, `./phloem.toml`, ...)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from phloem.base.paths import SYSTEM_CONFIG
from tests.helpers import PY, ROOT, short_tmpdir, wait_until

pytestmark = pytest.mark.timeout(60)

GOOD = """
[providers.local]
protocol = "openai-chat"
model = "m"
base_url = "http://127.0.0.1:9/v1"
chat_token_limit = "max_tokens"

[agents.functions.news]
fn = "phloem.examples.supplier_risk:fetch_news"
input_keys = ["company"]
output_key = "news"

[agents.llm.writer]
provider = "local"

[agents.planners.brief]
planner = "sequential"
sub_agents = ["news", "writer"]
"""


@pytest.fixture
def d() -> Iterator[Path]:
    path = short_tmpdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _env(d: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PHLOEM_CONFIG", "PHLOEM_SOCKET")}
    env.update(XDG_CONFIG_HOME=str(d / "xdg"), PYTHONPATH=str(ROOT), **extra)
    return env


def _phloem(
    d: Path, *args: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "phloem", *args],
        cwd=cwd or d,
        env=_env(d, **env),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _check(d: Path, text: str) -> subprocess.CompletedProcess[str]:
    (d / "phloem.toml").write_text(text)
    return _phloem(d, "config", "check", "--config", str(d / "phloem.toml"))


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and result.stdout == "", result.stderr
    return lines[0]


def test_a_good_config_checks_ok(d: Path) -> None:
    result = _check(d, GOOD)
    assert result.returncode == 0, result.stderr
    assert "[agents.planners.brief]" in result.stdout


def test_a_typo_in_a_component_path_is_one_line_with_file_line_and_key(d: Path) -> None:
    line = _one_error_line(_check(d, GOOD.replace(":fetch_news", ":fetch_newz")))
    assert f"{d / 'phloem.toml'}:9: agents.functions.news.fn: cannot load" in line
    assert "fetch_newz" in line and "[config_invalid]" in line


def test_a_wrong_provider_name_is_caught(d: Path) -> None:
    line = _one_error_line(_check(d, GOOD.replace('provider = "local"', 'provider = "lokal"')))
    assert f"{d / 'phloem.toml'}:14: agents.llm.writer.provider: no provider named 'lokal'" in line
    assert "(configured: local)" in line


def test_a_wrong_agent_name_is_caught(d: Path) -> None:
    line = _one_error_line(_check(d, GOOD.replace('"writer"]', '"writter"]')))
    assert f"{d / 'phloem.toml'}:18: agents.planners.brief.sub_agents[1]: no agent named" in line


def test_a_wrong_service_name_in_disabled_is_caught(d: Path) -> None:
    line = _one_error_line(_check(d, '[services]\ndisabled = ["ehco"]\n'))
    assert f"{d / 'phloem.toml'}:2: services.disabled[0]: no service named 'ehco'" in line


@pytest.mark.skipif(SYSTEM_CONFIG.is_file(), reason=f"{SYSTEM_CONFIG} exists on this machine")
def test_no_config_anywhere_is_an_error_not_a_check_of_the_defaults(d: Path) -> None:
    line = _one_error_line(_phloem(d, "config", "check"))
    assert "no config file to check" in line and "PHLOEM_CONFIG" in line


def test_config_check_follows_the_search_order(d: Path) -> None:
    (d / "xdg" / "phloem").mkdir(parents=True)
    (d / "xdg" / "phloem" / "phloem.toml").write_text('[daemon]\nsocket = "/tmp/from-xdg.sock"\n')
    assert "/tmp/from-xdg.sock" in _phloem(d, "config", "check").stdout
    (d / "phloem.toml").write_text('[daemon]\nsocket = "/tmp/from-cwd.sock"\n')
    assert "/tmp/from-cwd.sock" in _phloem(d, "config", "check").stdout
    (d / "env.toml").write_text('[daemon]\nsocket = "/tmp/from-env.sock"\n')
    out = _phloem(d, "config", "check", PHLOEM_CONFIG=str(d / "env.toml")).stdout
    assert "/tmp/from-env.sock" in out
    (d / "flag.toml").write_text('[daemon]\nsocket = "/tmp/from-flag.sock"\n')
    out = _phloem(
        d, "config", "check", "--config", str(d / "flag.toml"), PHLOEM_CONFIG=str(d / "env.toml")
    ).stdout
    assert "/tmp/from-flag.sock" in out


def test_daemon_and_client_commands_use_phloem_config(d: Path) -> None:
    sock = d / "run" / "s.sock"
    (d / "env.toml").write_text(f'[daemon]\nsocket = "{sock}"\n')
    env = _env(d, PHLOEM_CONFIG=str(d / "env.toml"))
    daemon = subprocess.Popen(
        [PY, "-m", "phloem", "daemon"],
        cwd=d,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(sock.exists, timeout=30, what="the socket named by $PHLOEM_CONFIG")
        status = _phloem(d, "status", "--json", PHLOEM_CONFIG=str(d / "env.toml"))
        assert status.returncode == 0 and str(sock) in status.stdout, status.stderr
    finally:
        daemon.terminate()
        assert daemon.wait(30) == 0


def test_model_commands_find_dot_phloem_toml_not_conf(d: Path) -> None:
    (d / "phloem.toml").write_text(GOOD)
    no_daemon = str(d)  # `model list` asks a running daemon first: none runs under here
    result = _phloem(d, "model", "list", "--json", XDG_RUNTIME_DIR=no_daemon)
    assert result.returncode == 0 and '"local"' in result.stdout, result.stderr
    elsewhere = d / "xdg"
    elsewhere.mkdir()
    result = _phloem(d, "model", "list", "--json", cwd=elsewhere, XDG_RUNTIME_DIR=no_daemon)
    assert result.returncode == 0 and '"local"' not in result.stdout
