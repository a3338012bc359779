"""Language servers with the real `ruff server`: diagnostics on write and edit."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import psutil
import pytest
from lsprotocol import types as lsp

from phloem.actors.lsp.hub import LspHub, render
from phloem.actors.lsp.settings import LspConfig, LspServerConfig
from phloem.config import Config
from phloem.tools.contract import ToolContext
from phloem.tools.registry import ToolRegistry, coding_tools
from phloem.tools.workspace import Workspace
from phloem.tree import Tree
from tests.helpers import pids_alive, ps_args, tree_node, wait_until

pytestmark = pytest.mark.timeout(90)

RUFF = str(Path(sys.executable).parent / "ruff")


def ruff_config(**kw: object) -> LspConfig:
    server = LspServerConfig(command=[RUFF, "server"], patterns=["*.py"], language_id="python")
    return LspConfig(servers={"ruff": server}, **kw)  # type: ignore[arg-type]


@pytest.fixture
def hub() -> object:
    made = LspHub(ruff_config())
    yield made
    made.close()


def tools_with(hub: LspHub) -> ToolRegistry:
    return ToolRegistry(hub.decorate(t) for t in coding_tools())


def program_pid(bridge: int) -> int:
    """The language server's own pid: the child of its bridge process."""
    found: list[int] = []

    def one() -> bool:
        found[:] = [c.pid for c in psutil.Process(bridge).children()]
        return bool(found)

    wait_until(one, what="the server under its bridge")
    return found[0]


def test_an_unused_import_is_reported_for_that_version_and_a_fix_clears_it(
    hub: LspHub, tmp_path: Path
) -> None:
    tools = tools_with(hub)
    ctx = ToolContext(workspace=Workspace(tmp_path))
    clean = tools.run("write", {"path": "pkg/app.py", "content": "print(1)\n"}, ctx)
    assert clean["diagnostics"] == [] and clean["diagnostics_text"] == ""
    change = {"path": "pkg/app.py", "old_text": "print(1)\n", "new_text": "import os\n\nprint(1)\n"}
    edited = tools.run("edit", change, ctx)
    assert edited["diagnostics_text"].startswith("pkg/app.py:1:8: warning F401 (Ruff): ")
    (item,) = edited["diagnostics"]
    assert (item["line"], item["column"], item["code"]) == (1, 8, "F401")
    fixed = tools.run(
        "edit", {"path": "pkg/app.py", "old_text": "import os\n\n", "new_text": ""}, ctx
    )
    assert fixed["diagnostics"] == []
    failed = tools.run("edit", {"path": "pkg/app.py", "old_text": "nope", "new_text": ""}, ctx)
    assert failed["error"] == "no_match" and "diagnostics" not in failed  # only successes
    other = tools.run("write", {"path": "notes.md", "content": "import os\n"}, ctx)
    assert "diagnostics" not in other  # no server for the pattern


def test_a_stale_publication_is_ignored(hub: LspHub, tmp_path: Path) -> None:
    tools = tools_with(hub)
    ctx = ToolContext(workspace=Workspace(tmp_path))
    tools.run("write", {"path": "a.py", "content": "import os\n"}, ctx)
    (record,) = hub._servers.values()
    client = record.client
    uri = (tmp_path.resolve() / "a.py").as_uri()
    bogus = lsp.Diagnostic(
        range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 1)), message="stale", code="X1"
    )
    # a late publication for version 1 arrives while version 2 is being checked
    client.publish(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[bogus], version=1))
    result = tools.run("write", {"path": "a.py", "content": "import os\nimport re\n"}, ctx)
    codes = [d["code"] for d in result["diagnostics"]]
    assert codes == ["F401", "F401"] and "stale" not in result["diagnostics_text"]


def test_a_killed_server_is_restarted_then_disabled_after_three_failures(
    hub: LspHub, tmp_path: Path
) -> None:
    tools = tools_with(hub)
    ctx = ToolContext(workspace=Workspace(tmp_path))
    assert tools.run("write", {"path": "a.py", "content": "import os\n"}, ctx)["diagnostics"]
    (record,) = hub._servers.values()
    for failures in (1, 2):
        bridge = record.client.pid
        assert bridge is not None
        psutil.Process(program_pid(bridge)).send_signal(signal.SIGKILL)
        wait_until(lambda: not record.client.alive, what="the kill noticed")
        again = tools.run("write", {"path": "a.py", "content": f"import os  # {failures}\n"}, ctx)
        assert again["diagnostics"][0]["code"] == "F401"  # restarted
        assert record.failures == failures and record.client.pid != bridge
    psutil.Process(program_pid(record.client.pid)).send_signal(signal.SIGKILL)  # type: ignore[arg-type]
    wait_until(lambda: not record.client.alive, what="the kill noticed")
    off = tools.run("write", {"path": "a.py", "content": "import os\n"}, ctx)
    assert "diagnostics" not in off and off["bytes_written"] == 10
    assert record.disabled
    assert "lsp_server_disabled" in {w.code for w in hub.warnings.drain()}


def test_a_missing_program_is_disabled_after_three_attempts(tmp_path: Path) -> None:
    server = LspServerConfig(
        command=["no-such-language-server-xyz"], patterns=["*.py"], language_id="python"
    )
    hub = LspHub(LspConfig(servers={"x": server}))
    try:
        tools = tools_with(hub)
        ctx = ToolContext(workspace=Workspace(tmp_path))
        for _ in range(4):
            result = tools.run("write", {"path": "a.py", "content": "x = 1\n"}, ctx)
            assert "error" not in result and "diagnostics" not in result
        (warning,) = hub.warnings.drain()
        assert warning.code == "lsp_server_disabled" and "not on PATH" in warning.message
    finally:
        hub.close()


def test_no_language_server_survives_the_tree_stop(tmp_path: Path) -> None:
    tree = Tree.start(Config(lsp=ruff_config()))
    try:
        registry = tree.tool_registry()
        ctx = ToolContext(workspace=Workspace(tmp_path))
        result = registry.run("write", {"path": "m.py", "content": "import sys\n"}, ctx)
        assert result["diagnostics"][0]["code"] == "F401"
        with tree.client() as client:
            listed = client.ask("lsp/service", {"type": "list"})
        (server,) = listed["servers"]
        assert server["state"] == "running" and server["server"] == "ruff"
        bridge = server["pid"]
        program = program_pid(bridge)
        # in the tree: the bridge under lsp/servers, the program under it with its own pid
        (child,) = tree_node(tree.snapshot(), "phloem/lsp/servers").children
        assert child.pid == bridge and ps_args(bridge) == f"phloem: lsp/servers/{child.id}"
        (node,) = child.children
        assert (node.id, node.pid) == ("ruff", program) and node.rss_bytes
    finally:
        tree.stop()
    wait_until(lambda: not pids_alive(program), what="ruff server outlived the tree")
    assert not pids_alive(bridge)


def test_off_mode_and_rendering() -> None:
    off = LspHub(ruff_config(mode="off"))
    assert off.diagnostics(Path("/tmp"), "a.py", "import os\n") is None
    rng = lsp.Range(lsp.Position(2, 4), lsp.Position(2, 5))
    same = lsp.Diagnostic(range=rng, message="bad\nmore", severity=lsp.DiagnosticSeverity.Error)
    many = [
        lsp.Diagnostic(range=lsp.Range(lsp.Position(i, 0), lsp.Position(i, 1)), message="m")
        for i in range(30)
    ]
    items, text = render("x.py", [same, same, *many])
    assert len(items) == 20  # deduplicated, sorted, at most 20
    assert text.splitlines()[0] == "x.py:1:1: error: m"
    assert "x.py:3:5: error: bad" in text.splitlines()


def test_at_most_max_clients_roots_get_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import phloem.actors.lsp.hub as hub_module

    monkeypatch.setattr(hub_module, "MAX_CLIENTS", 1)
    server = LspServerConfig(command=["no-such-ls-xyz"], patterns=["*.py"], language_id="python")
    hub = LspHub(LspConfig(servers={"x": server}))
    try:
        assert hub.diagnostics(tmp_path / "a", "m.py", "x = 1\n") is None
        assert hub.diagnostics(tmp_path / "b", "m.py", "x = 1\n") is None
        assert [key[0] for key in hub._servers] == [str(tmp_path / "a")]  # b got none
    finally:
        hub.close()


def test_columns_are_code_points_whatever_the_servers_encoding(hub: LspHub, tmp_path: Path) -> None:
    """`os` of `s = "😀😀"; import os` is at code-point column 18 (UTF-16: 20, UTF-8: 24)."""
    tools = tools_with(hub)
    ctx = ToolContext(workspace=Workspace(tmp_path))
    written = tools.run("write", {"path": "app.py", "content": 's = "😀😀"; import os\n'}, ctx)
    [f401] = [d for d in written["diagnostics"] if d["code"] == "F401"]
    assert (f401["line"], f401["column"]) == (1, 18)
    assert "app.py:1:18: warning F401" in written["diagnostics_text"]


def test_positions_convert_from_each_encoding() -> None:
    from phloem.actors.lsp.positions import UTF8, UTF16, UTF32, code_points, negotiated

    line = 's = "😀😀"; import os'
    assert code_points(line, 19, UTF16) == 17 and code_points(line, 23, UTF8) == 17
    assert code_points(line, 17, UTF32) == 17
    assert code_points(line, 999, UTF16) == len(line)  # clamped to the line's end
    assert negotiated({"capabilities": {"positionEncoding": "utf-8"}}) == UTF8
    assert negotiated({"capabilities": {}}) == UTF16 and negotiated(None) == UTF16
    assert negotiated({"capabilities": {"positionEncoding": "ebcdic"}}) == UTF16


def test_the_status_line_is_none_detected_then_the_started_ids_and_nothing_when_off(
    hub: LspHub, tmp_path: Path
) -> None:
    assert hub.status(str(tmp_path)) == "LSP: none detected"
    tools_with(hub).run(
        "write", {"path": "a.py", "content": "x = 1\n"}, ToolContext(workspace=Workspace(tmp_path))
    )
    assert hub.status(str(tmp_path)) == "LSP: ruff"
    assert hub.status(str(tmp_path / "elsewhere")) == "LSP: none detected"
    off = LspHub(ruff_config(mode="off"))
    assert off.status(str(tmp_path)) is None
