"""The two-command Ray demo of docs/cluster.md, run as written (a local Ray started by the
daemon)."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.helpers import ROOT, DaemonProc, doc_blocks, run_cli, short_tmpdir

pytestmark = pytest.mark.timeout(180)


def test_the_ray_demo_of_the_docs_runs_as_written() -> None:
    pytest.importorskip("ray")
    [block] = doc_blocks("docs/cluster.md", "A local demo in two commands", "sh")
    daemon_line, plan_line = block.strip().splitlines()
    assert daemon_line == ".venv/bin/phloem daemon --config conf/examples/ray.toml &"
    args = shlex.split(plan_line)
    assert args[:3] == [".venv/bin/phloem", "plan", "run"]
    socket = short_tmpdir() / "phloem.sock"
    daemon = DaemonProc(socket, ROOT / "conf/examples/ray.toml").wait_ready()
    try:
        plan = run_cli(*args[1:], "--socket", str(socket), timeout=120)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        assert "status: completed" in plan.stdout
        status = run_cli("cluster", "status", "--socket", str(socket))
        assert re.search(r"planning_callbacks: idle \d+ .* started [1-9]", status.stdout), (
            status.stdout
        )
        assert "namespace phloem-demo" in status.stdout
    finally:
        code = daemon.stop(timeout=60)
    assert code == 0, "".join(daemon.lines)
