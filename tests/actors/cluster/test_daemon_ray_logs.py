"""A daemon that starts Ray itself: its stderr stays one JSON object per line (Ray's own
warnings included, as `foreign_log` lines), and `phloem cluster status` prints the
`ray status --address ...` line that attaches Ray's own tool to that Ray."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers import PY, DaemonProc, run_cli, short_tmpdir

pytestmark = pytest.mark.timeout(240)

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
        found = re.search(r"^ray status (ray status --address \S+)$", status.stdout, re.M)
        assert found, status.stdout
        logs = re.search(r"^ray logs   (\S+)$", status.stdout, re.M)
        assert logs and Path(logs.group(1)).is_dir(), status.stdout
        ray_cli = Path(PY).parent / "ray"
        attached = subprocess.run(
            [str(ray_cli), *shlex.split(found.group(1))[1:]],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert attached.returncode == 0, attached.stdout + attached.stderr
        assert "Node status" in attached.stdout, attached.stdout
    finally:
        code = daemon.stop(timeout=90)
    assert code == 0, "".join(daemon.lines)
    for line in daemon.lines:
        assert isinstance(json.loads(line), dict), line  # never Ray's plain text
