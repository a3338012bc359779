"""Language servers' limits with a real server child (`servers.py`): the memory cap of
its process tree, the idle shutdown, the config keys' edges."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

from phloem.actors.lsp.hub import LspHub
from phloem.actors.lsp.settings import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_MEMORY_BYTES,
    IDLE_TIMEOUT_RANGE,
    MEMORY_BYTES_RANGE,
    LspConfig,
    LspServerConfig,
)
from phloem.config import Config
from phloem.tools.contract import ToolContext
from phloem.tools.registry import ToolRegistry, coding_tools
from phloem.tools.workspace import Workspace
from phloem.tree import Tree
from tests.helpers import ROOT, pids_alive, tree_node, wait_until

pytestmark = pytest.mark.timeout(120)

MIB = 1024 * 1024
SERVER = [sys.executable, str(ROOT / "tests" / "actors" / "lsp" / "servers.py")]


def server_config(**kw: object) -> LspConfig:
    server = LspServerConfig(
        command=SERVER,
        patterns=["*.txt"],
        language_id="plaintext",
        initialize_timeout_s=60,  # generous: a loaded machine starts Python slowly
        settle_s=30,
        **kw,  # type: ignore[arg-type]
    )
    return LspConfig(servers={"t": server})


def tools_with(hub: LspHub) -> ToolRegistry:
    return ToolRegistry(hub.decorate(t) for t in coding_tools())


def bad_lines(result: dict[str, object]) -> list[int]:
    return [d["line"] for d in result["diagnostics"]]  # type: ignore[attr-defined, index]


def test_a_server_over_its_memory_cap_is_killed_reported_and_restarted(tmp_path: Path) -> None:
    cap = 128 * MIB
    tree = Tree.start(Config(lsp=server_config(max_memory_bytes=cap)))
    try:
        tools = tree.tool_registry()
        ctx = ToolContext(workspace=Workspace(tmp_path))
        first = tools.run("write", {"path": "a.txt", "content": "ok\nBAD\n"}, ctx)
        assert bad_lines(first) == [2]
        hub = tree.resources.lsp
        assert isinstance(hub, LspHub)
        (record,) = hub._servers.values()
        bridge = record.client.pid
        assert bridge is not None
        # the bridge under lsp/servers carries the cap; the server is listed under it
        (child,) = tree_node(tree.snapshot(), "phloem/lsp/servers").children
        assert child.pid == bridge and child.rss_cap_bytes == cap
        (program,) = child.children
        assert program.pid and program.rss_bytes
        hog = tools.run("write", {"path": "a.txt", "content": "HOG 1024\nBAD\n"}, ctx)
        assert hog["bytes_written"] == 13 and "diagnostics" not in hog  # the write stands
        wait_until(lambda: not pids_alive(program.pid), timeout=30, what="the hog killed")
        (warning,) = [w for w in hub.warnings.drain() if w.code == "lsp_server_memory_exceeded"]
        assert f"max_memory_bytes = {cap}" in warning.message and "rss " in warning.message
        print(f"\nlanguage server killed over its cap: {warning.message}")
        with tree.client() as client:
            (listed,) = client.ask("lsp/service", {"type": "list"})["servers"]
        assert listed["failures"] == 1 and "memory cap" in listed["error"]
        again = tools.run("write", {"path": "a.txt", "content": "BAD\n"}, ctx)
        assert bad_lines(again) == [1]  # restarted
        assert record.client.pid not in (None, bridge)
    finally:
        tree.stop()


def test_an_unused_server_shuts_down_after_its_idle_timeout_and_restarts_on_the_next_write(
    tmp_path: Path,
) -> None:
    hub = LspHub(server_config(idle_timeout_s=1.0))
    try:
        tools = tools_with(hub)
        ctx = ToolContext(workspace=Workspace(tmp_path))
        assert bad_lines(tools.run("write", {"path": "a.txt", "content": "BAD\n"}, ctx)) == [1]
        (record,) = hub._servers.values()
        bridge = record.client.pid
        assert bridge is not None and hub.info()[0]["state"] == "running"
        wait_until(lambda: hub.info()[0]["state"] == "idle", timeout=60, what="idle shutdown")
        wait_until(lambda: not pids_alive(bridge), timeout=30, what="the idle server's child")
        assert hub.info()[0]["pid"] is None
        again = tools.run("write", {"path": "a.txt", "content": "x\nBAD\n"}, ctx)
        assert bad_lines(again) == [2]  # started again, transparently
        assert hub.info()[0]["state"] == "running" and record.client.pid != bridge
        assert record.failures == 0 and not hub.warnings.drain()  # an idle stop is no failure
    finally:
        hub.close()


def test_the_default_idle_timeout_keeps_a_server_running(tmp_path: Path) -> None:
    hub = LspHub(server_config())
    try:
        tools = tools_with(hub)
        ctx = ToolContext(workspace=Workspace(tmp_path))
        tools.run("write", {"path": "a.txt", "content": "BAD\n"}, ctx)
        (record,) = hub._servers.values()
        assert record.timer is not None and record.timer.scheduled
        # (two clock readings apart, by however long the machine took between them)
        assert record.timer.when - record.used_at == pytest.approx(DEFAULT_IDLE_TIMEOUT_S, abs=1.0)
    finally:
        hub.close()
    assert not record.timer.scheduled  # closing cancels it


@pytest.mark.parametrize(
    ("key", "edge", "over"),
    [
        ("max_memory_bytes", MEMORY_BYTES_RANGE[0], MEMORY_BYTES_RANGE[0] - 1),
        ("max_memory_bytes", MEMORY_BYTES_RANGE[1], MEMORY_BYTES_RANGE[1] + 1),
        ("idle_timeout_s", IDLE_TIMEOUT_RANGE[0], IDLE_TIMEOUT_RANGE[0] - 0.01),
        ("idle_timeout_s", IDLE_TIMEOUT_RANGE[1], IDLE_TIMEOUT_RANGE[1] + 1),
    ],
)
def test_limit_keys_accept_their_edges_and_refuse_one_past(
    key: str, edge: float, over: float
) -> None:
    base = {"command": ["x"], "patterns": ["*.py"], "language_id": "python"}
    assert getattr(msgspec.convert({**base, key: edge}, LspServerConfig), key) == edge
    with pytest.raises(msgspec.ValidationError, match=key):
        msgspec.convert({**base, key: over}, LspServerConfig)
    default = msgspec.convert(base, LspServerConfig)
    assert (default.max_memory_bytes, default.idle_timeout_s) == (
        DEFAULT_MAX_MEMORY_BYTES,
        DEFAULT_IDLE_TIMEOUT_S,
    )


def test_the_lsp_block_keys_failure_threshold_diagnostics_per_file_and_disabled(
    tmp_path: Path,
) -> None:
    from lsprotocol import types as lsp

    from phloem.actors.lsp.hub import LspHub, render
    from phloem.actors.lsp.settings import (
        DEFAULT_FAILURE_THRESHOLD,
        DEFAULT_MAX_DIAGNOSTICS,
        FAILURE_THRESHOLD_RANGE,
        MAX_DIAGNOSTICS_RANGE,
        LspConfig,
    )
    from phloem.tools import ToolContext, Workspace
    from phloem.tools.registry import coding_tools

    assert (
        (LspConfig().failure_threshold, LspConfig().max_diagnostics_per_file)
        == (
            DEFAULT_FAILURE_THRESHOLD,
            DEFAULT_MAX_DIAGNOSTICS,
        )
        == (3, 20)
    )
    for key, (low, high) in (
        ("failure_threshold", FAILURE_THRESHOLD_RANGE),
        ("max_diagnostics_per_file", MAX_DIAGNOSTICS_RANGE),
    ):
        assert getattr(msgspec.convert({key: low}, LspConfig), key) == low
        assert getattr(msgspec.convert({key: high}, LspConfig), key) == high
        for bad in (low - 1, high + 1):
            with pytest.raises(msgspec.ValidationError, match=key):
                msgspec.convert({key: bad}, LspConfig)
    many = [
        lsp.Diagnostic(range=lsp.Range(lsp.Position(i, 0), lsp.Position(i, 1)), message="m")
        for i in range(9)
    ]
    assert len(render("x.py", many, 4)[0]) == 4
    missing = {
        "command": ["no-such-language-server-xyz"],
        "patterns": ["*.py"],
        "language_id": "python",
    }
    hub = LspHub(msgspec.convert({"failure_threshold": 1, "servers": {"x": missing}}, LspConfig))
    off = LspHub(msgspec.convert({"servers": {"x": {**missing, "disabled": True}}}, LspConfig))
    try:
        ctx = ToolContext(workspace=Workspace(tmp_path))
        write = next(t for t in coding_tools() if t.name == "write")
        hub.decorate(write).run({"path": "a.py", "content": "x = 1\n"}, ctx)
        (warning,) = hub.warnings.drain()  # disabled at its first failure
        assert warning.code == "lsp_server_disabled"
        assert off.server_for("a.py") is None  # a disabled server is never started
        off.decorate(write).run({"path": "b.py", "content": "x = 1\n"}, ctx)
        assert off.warnings.drain() == () and off.status(str(tmp_path)) == "LSP: none detected"
    finally:
        hub.close()
        off.close()
