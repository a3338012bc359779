"""A daemon that starts Ray itself: its stderr stays one JSON object per line (Ray's own
warnings included, as `foreign_log` lines), and `phloem cluster status` prints the
`ray status --address ...` command that attaches Ray's own tool to that Ray."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import PY, DaemonProc, run_cli, short_tmpdir

pytestmark = pytest.mark.timeout(240)

ATTACH_DEADLINE_S = 60.0
"""How long `ray status` may answer "No cluster status" before it shows the node."""

CONFIG = """
[services]
disabled = ["echo"]

[cluster]
backend = "ray"
address = ""
namespace = "phloem-logs"
remote = ["planning_callbacks"]
warm_at_start = true

[cluster.resources.planning_callbacks]
num_cpus = 0.5
max_workers = 1
"""


def test_a_daemon_on_ray_logs_only_json_and_names_the_ray_status_address() -> None:
    pytest.importorskip("ray")
    d = short_tmpdir()
    config = d / "c.toml"
    config.write_text(CONFIG)
    daemon = DaemonProc(d / "s" / "d.sock", config, env={"XDG_STATE_HOME": str(d / "state")})
    daemon.wait_ready()
    try:
        status = run_cli("cluster", "status", "--socket", str(daemon.socket), timeout=60)
        assert status.returncode == 0, status.stderr
        found = re.search(r"^attach     (.*ray status --address \S+)$", status.stdout, re.M)
        assert found, status.stdout
        logs = re.search(r"^ray logs   (\S+)$", status.stdout, re.M)
        assert logs and Path(logs.group(1)).is_dir(), status.stdout
        # the command as printed, as a shell would run it: VAR=value words, then `ray ...`
        words = shlex.split(found.group(1))
        assignments = [w for w in words if re.match(r"^[A-Z_]+=", w)]
        command = words[len(assignments) :]
        assert command[:2] == ["ray", "status"], words
        env = {**os.environ, **dict(a.split("=", 1) for a in assignments)}
        deadline = time.monotonic() + ATTACH_DEADLINE_S
        while True:  # Ray's own status may lag its start ("No cluster status ... yet")
            attached = subprocess.run(
                [str(Path(PY).parent / "ray"), *command[1:]],
                check=False,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert attached.returncode == 0, attached.stdout + attached.stderr
            if "Node status" in attached.stdout or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        assert "Node status" in attached.stdout, attached.stdout
    finally:
        code = daemon.stop(timeout=90)
    assert code == 0, "".join(daemon.lines)
    plain = [line for line in daemon.lines if not _is_json_object(line)]
    assert plain == []  # never Ray's plain text
    ray_lines = [json.loads(line) for line in daemon.lines if '"foreign_log"' in line]
    assert any(e["logger"].startswith("ray") for e in ray_lines), daemon.lines  # but Ray's


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False
