"""`make run`'s example workload, the systemd unit and the container recipe."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import psutil
import pytest

import phloem
from phloem.examples import run_all
from tests.helpers import PY, ROOT, doc_section, wait_until

pytestmark = pytest.mark.timeout(60)

DOCKERFILE_INSTRUCTIONS = {
    "FROM",
    "RUN",
    "CMD",
    "LABEL",
    "EXPOSE",
    "ENV",
    "ADD",
    "COPY",
    "ENTRYPOINT",
    "VOLUME",
    "USER",
    "WORKDIR",
    "ARG",
    "ONBUILD",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
}


def test_make_run_starts_the_daemon_runs_every_example_and_stops_it(
    tmp_short: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_all.main(
        ["--config", str(ROOT / "conf" / "phloem.toml"), "--socket", str(tmp_short / "r.sock")]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    for step in run_all.all_steps():
        assert f"== {step.name}" in out
    assert "├── echo  actor  running" in out
    assert "daemon stopped cleanly; 0 of" in out
    assert not (tmp_short / "r.sock").exists()


def _bind_if_free(sock: socket.socket, port: int) -> None:
    """Hold `port` (if something else already holds it, it is held all the same)."""
    with contextlib.suppress(OSError):
        sock.bind(("127.0.0.1", port))
        sock.listen()


@pytest.mark.timeout(180)
def test_make_run_writes_only_to_its_temporary_state_and_runs_each_example_once(
    tmp_short: Path,
) -> None:
    home, tmp = tmp_short / "home", tmp_short / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_RUNTIME_DIR": str(home / "run"),
        "TMPDIR": str(tmp),
        "PYTHONPATH": str(ROOT),
    }
    # the stand-in model's port of conf/phloem.toml, held: make run must not need it
    with socket.socket() as held:
        _bind_if_free(held, 18765)
        done = subprocess.run(
            [PY, "-m", "phloem.examples.run_all", "--config", "conf/phloem.toml"],
            check=False,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=170,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    headings = [line for line in done.stdout.splitlines() if line.startswith("== ")]
    names = [f"== {step.name}" for step in run_all.all_steps()]
    assert [h for h in headings if h in names] == names  # each example, once, in order
    state = re.search(r"state in (\S+)\)", done.stdout)
    assert state and Path(state.group(1)).parent == tmp, done.stdout
    assert sorted(home.rglob("*")) == []  # nothing in the user's directories
    assert sorted(tmp.iterdir()) == []  # and the state directory is gone


def test_a_failing_example_makes_run_all_exit_non_zero(
    tmp_short: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(client: object) -> None:
        raise RuntimeError("example broke")

    monkeypatch.setattr(run_all, "STEPS", [run_all.Step("broken", broken)])
    monkeypatch.setattr(run_all, "EXAMPLE_MODULES", [])
    code = run_all.main(
        ["--config", str(ROOT / "conf" / "phloem.toml"), "--socket", str(tmp_short / "f.sock")]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED [RuntimeError]: example broke" in out
    assert "daemon stopped cleanly; 1 of 1 examples failed" in out


# The real runner with a step that never ends, so it can be interrupted mid-way.
_INTERRUPTIBLE_RUNNER = """
import sys, time
from phloem.examples import run_all

def forever(client):
    for i in range(1_000_000):
        print(f"tick {i}", flush=True)
        time.sleep(0.02)

run_all.STEPS = [run_all.Step("echo", run_all._echo), run_all.Step("forever", forever)]
run_all.EXAMPLE_MODULES = []
sys.exit(run_all.main(sys.argv[1:]))
"""


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize(
    ("how", "code"),
    [
        ("SIGTERM", 128 + signal.SIGTERM),
        ("SIGINT", 128 + signal.SIGINT),
        ("SIGHUP", 128 + signal.SIGHUP),
        ("stdout closed", 128 + signal.SIGPIPE),
    ],
)
def test_an_interrupted_run_all_stops_the_daemon_it_started(
    tmp_short: Path, how: str, code: int
) -> None:
    sock = tmp_short / "r.sock"
    config = str(ROOT / "conf" / "phloem.toml")
    runner = subprocess.Popen(
        [PY, "-c", _INTERRUPTIBLE_RUNNER, "--config", config, "--socket", str(sock)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    daemon_pid = None
    try:
        assert runner.stdout is not None and runner.stderr is not None
        for line in runner.stdout:
            if line.startswith("tick 3"):
                break
        else:
            pytest.fail(f"the runner ended early: {runner.stderr.read()}")
        with phloem.Client.connect(sock) as client:
            daemon_pid = client.status().pid
        if how == "stdout closed":  # `make run | head`: the reader goes away
            runner.stdout.close()
        else:
            runner.send_signal(getattr(signal, how))
        returncode = runner.wait(40)
        stderr = runner.stderr.read()
        wait_until(lambda: not _running(daemon_pid), 5, f"(the daemon is still running) {stderr}")
        assert not sock.exists()
        assert returncode == code, stderr
        assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(10)
        if daemon_pid is not None and _running(daemon_pid):
            os.kill(daemon_pid, signal.SIGKILL)


def test_the_makefile_run_target_runs_the_examples() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "-m phloem.examples.run_all --config conf/phloem.toml" in makefile


SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
UNIT = ROOT / "deploy" / "phloem.service"
EXEC_START = "/opt/phloem/venv/bin/phloem"
SYSTEM_UNITS = Path("/usr/lib/systemd/system")
MAX_SECURITY_EXPOSURE = 3.0


def _systemd_root(root: Path) -> None:
    """A root for `systemd-analyze --root`: the system's own units, the unit as it is
    shipped, and an executable where ExecStart will find the installed `phloem`."""
    shutil.copytree(SYSTEM_UNITS, root / "usr/lib/systemd/system", symlinks=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(UNIT, root / "etc/systemd/system/phloem.service")
    exe = root / EXEC_START.lstrip("/")
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (root / "bin").mkdir()
    shutil.copy("/bin/kill", root / "bin/kill")


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_passes_on_the_unit(tmp_short: Path) -> None:
    """The file as shipped, unchanged (warnings count as failures: verify exits 0 on an
    unknown key or a bad value, it only says so)."""
    if not SYSTEM_UNITS.is_dir():
        pytest.skip(f"no system units at {SYSTEM_UNITS} to verify against")
    _systemd_root(tmp_short)
    result = subprocess.run(
        [str(SYSTEMD_ANALYZE), "verify", f"--root={tmp_short}", "phloem.service"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=tmp_short,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == "", result.stderr


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
def test_the_unit_security_score_is_below_3_and_the_docs_state_it() -> None:
    result = subprocess.run(
        [str(SYSTEMD_ANALYZE), "security", "--offline=yes", "--no-pager", str(UNIT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    match = re.search(r"Overall exposure level for phloem.service: (\d+\.\d)", result.stdout)
    assert match, result.stdout[-2000:] + result.stderr
    score = float(match.group(1))
    assert score < MAX_SECURITY_EXPOSURE
    service = doc_section("docs/operations.md", "As a service (systemd)")
    assert f"`systemd-analyze security` rates it {score:.1f}" in service
    assert f"rates this unit {score:.1f}" in UNIT.read_text()


def test_the_systemd_unit_is_notify_hardened_and_installs_without_dev_tools() -> None:
    unit = UNIT.read_text()
    for line in (
        "Type=notify",
        "NotifyAccess=main",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "KillSignal=SIGTERM",
        "RuntimeDirectory=phloem",
        "RuntimeDirectoryMode=0700",
        "StateDirectory=phloem",
        "User=phloem",
        "Restart=on-failure",
        "WantedBy=multi-user.target",
        f"ExecStart={EXEC_START} daemon --config /etc/phloem/phloem.toml"
        " --socket /run/phloem/phloem.sock",
    ):
        assert line in unit
    assert "pip install ." in unit and "-e " not in unit and "[dev]" not in unit


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or (stripped.startswith("#") and not current):
            continue
        current += stripped[:-1] + " " if stripped.endswith("\\") else stripped
        if not stripped.endswith("\\"):
            lines.append(current)
            current = ""
    assert not current, "the file ends inside a line continuation"
    return lines


def test_the_containerfile_is_well_formed() -> None:
    text = (ROOT / "deploy" / "Containerfile").read_text()
    lines = _logical_lines(text)
    instructions = [line.split(None, 1)[0].upper() for line in lines]
    assert instructions[0] == "FROM", "the first instruction must be FROM"
    unknown = set(instructions) - DOCKERFILE_INSTRUCTIONS
    assert not unknown, f"unknown instructions: {unknown}"
    for line in lines:
        keyword, _, rest = line.partition(" ")
        if keyword in ("CMD", "ENTRYPOINT", "VOLUME") or (
            keyword == "HEALTHCHECK" and " CMD [" in line
        ):
            exec_form = rest[rest.index("[") :] if "[" in rest else rest
            assert isinstance(json.loads(exec_form), list), line
        if keyword == "COPY":
            for source in rest.split()[:-1]:
                assert (ROOT / source).exists(), f"COPY source {source} is missing"
    entry = json.loads(re.search(r"^ENTRYPOINT (.*)$", text, re.M).group(1))  # type: ignore[union-attr]
    cmd = json.loads(re.search(r"^CMD (.*)$", text, re.M).group(1))  # type: ignore[union-attr]
    assert entry + cmd == [
        "phloem",
        "daemon",
        "--config",
        "/etc/phloem/phloem.toml",
        "--socket",
        "/run/phloem/phloem.sock",
    ]
    assert "STOPSIGNAL SIGTERM" in text and "USER phloem" in text
    assert text.startswith("# phloem") and "\nFROM python:3.11-slim\n" in text
    assert (
        "ENV PYTHONDONTWRITEBYTECODE=1" in text and "PHLOEM_SOCKET=/run/phloem/phloem.sock" in text
    )
    health = re.search(r"^HEALTHCHECK .* CMD (.*)$", text, re.M)
    assert health and json.loads(health.group(1)) == ["phloem", "status"]
    assert "pip install --no-cache-dir ." in text and "[dev]" not in text and " -e " not in text
