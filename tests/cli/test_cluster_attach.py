"""The lines of `phloem cluster status` that lead to Ray's own tools (no Ray needed:
the command is built from the daemon's environment and the GCS address)."""

from __future__ import annotations

from typing import Any

from phloem.cli.cluster import status_rows
from phloem.cli.rows import View, plain
from phloem.cluster.backend import ray_status_command


def render_status(status: dict[str, Any]) -> str:
    """The plain text `phloem cluster status` prints for `status`."""
    return plain(View("fields", tuple(status_rows(status))))


def test_the_attach_command_carries_rays_token_mode_only_when_it_is_on() -> None:
    assert ray_status_command("10.0.0.5:6379", {}) == "ray status --address 10.0.0.5:6379"
    assert ray_status_command("10.0.0.5:6379", {"RAY_AUTH_MODE": "TOKEN"}) == (
        "RAY_AUTH_MODE=token ray status --address 10.0.0.5:6379"
    )
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/srv/my token"}
    assert ray_status_command("h:1", env) == (
        "RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH='/srv/my token' ray status --address h:1"
    )
    assert ray_status_command("", env) == ""  # Ray Client: no GCS address to give


def test_status_ends_with_the_attach_and_logs_lines_when_ray_says() -> None:
    status = {
        "backend": "ray",
        "address": "(local)",
        "namespace": "phloem",
        "remote": ["tools"],
        "connected": True,
        "cpus": 2.0,
        "cpus_available": 1.5,
        "in_flight": 0,
        "nodes": [],
        "workers": {},
        "ray_status": "ray status --address h:1",
        "session_dir": "/tmp/ray/session_x",
    }
    assert render_status(status).splitlines()[-2:] == [
        "attach     ray status --address h:1",
        "ray logs   /tmp/ray/session_x/logs",
    ]
    quiet = {**status, "ray_status": "", "session_dir": ""}
    assert "attach" not in render_status(quiet) and "ray logs" not in render_status(quiet)
