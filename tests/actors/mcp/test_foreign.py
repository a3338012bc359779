"""Foreign MCP servers: only allowed names, only from trusted roots."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from phloem.actors.mcp.foreign import foreign_servers
from phloem.actors.mcp.hub import McpHub
from phloem.actors.mcp.settings import McpConfig, McpServerConfig
from phloem.tools.contract import ToolContext
from tests.helpers import ROOT

pytestmark = pytest.mark.timeout(60)


def _root(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    (root / ".vscode").mkdir(parents=True)
    (root / ".codex").mkdir()
    server = {"command": sys.executable, "args": ["-m", "tests.actors.mcp.servers", "stdio"]}
    (root / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"claude_one": server, "shadowed": {"url": "http://x/"}}})
    )
    (root / ".vscode" / "mcp.json").write_text(
        json.dumps({"servers": {"copilot_one": {"type": "http", "url": "http://127.0.0.1:1/mcp",
                                                "headers": {"Authorization": "Bearer s3cret"}}}})
    )  # fmt: skip
    (root / ".codex" / "config.toml").write_text(
        '[mcp_servers.codex_one]\ncommand = "true"\nargs = []\n'
        '[mcp_servers.shadowed]\ncommand = "true"\n'
    )
    return root


def test_only_allowed_names_from_trusted_roots(tmp_path: Path) -> None:
    trusted = _root(tmp_path, "trusted")
    untrusted = _root(tmp_path, "untrusted")
    assert untrusted.exists()
    config = McpConfig(
        servers={"shadowed": McpServerConfig(command=["mine"])},
        allow_foreign=["claude_one", "copilot_one", "codex_one", "shadowed", "absent"],
        trusted_roots=[str(trusted)],
    )
    found, warnings = foreign_servers(config)
    assert set(found) == {"claude_one", "copilot_one", "codex_one"}  # configured wins
    assert found["claude_one"].cwd == str(trusted)
    assert found["copilot_one"].url == "http://127.0.0.1:1/mcp"
    assert found["copilot_one"].headers_env == {}
    assert [w.code for w in warnings] == ["mcp_foreign_headers_ignored"]
    assert "s3cret" not in warnings[0].message
    nothing, _ = foreign_servers(McpConfig(trusted_roots=[str(trusted)]))
    assert nothing == {}  # no consent, no servers
    only_untrusted, _ = foreign_servers(McpConfig(allow_foreign=["claude_one"]))
    assert only_untrusted == {}


def test_an_allowed_foreign_server_is_connected_in_its_root(tmp_path: Path) -> None:
    trusted = _root(tmp_path, "trusted")
    (trusted / "tests").symlink_to(ROOT / "tests")  # `-m tests.actors...` from its root
    hub = McpHub(McpConfig(allow_foreign=["claude_one"], trusted_roots=[str(trusted)]))
    try:
        tools = {t.name: t for t in hub.tools()}
        add = tools["mcp__claude_one__add"]
        assert add.run({"a": 1, "b": 2}, ToolContext())["content"] == "3"
    finally:
        hub.close()


def test_unreadable_files_are_skipped_with_a_warning(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / ".mcp.json").write_text("{not json")
    _, warnings = foreign_servers(McpConfig(allow_foreign=["x"], trusted_roots=[str(root)]))
    assert [w.code for w in warnings] == ["mcp_foreign_unreadable"]
    with pytest.raises(ValueError, match="absolute"):
        McpConfig(trusted_roots=["relative/dir"])


def test_a_foreign_file_over_the_size_limit_is_skipped(tmp_path: Path) -> None:
    from phloem.actors.mcp.foreign import MAX_FOREIGN_FILE_BYTES

    root = tmp_path / "r"
    root.mkdir()
    entry = '{"mcpServers": {"x": {"command": "true"}}}'
    (root / ".mcp.json").write_text(entry.ljust(MAX_FOREIGN_FILE_BYTES))  # at the limit
    found, warnings = foreign_servers(McpConfig(allow_foreign=["x"], trusted_roots=[str(root)]))
    assert set(found) == {"x"} and warnings == []
    (root / ".mcp.json").write_text(entry.ljust(MAX_FOREIGN_FILE_BYTES + 1))
    found, warnings = foreign_servers(McpConfig(allow_foreign=["x"], trusted_roots=[str(root)]))
    assert found == {} and "larger than" in warnings[0].message


def test_a_deeply_nested_foreign_file_is_skipped_with_a_warning(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / ".codex").mkdir(parents=True)
    (root / ".mcp.json").write_text('{"mcpServers": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (root / ".codex" / "config.toml").write_text("a = " + "[" * 5_000 + "]" * 5_000)
    found, warnings = foreign_servers(McpConfig(allow_foreign=["x"], trusted_roots=[str(root)]))
    assert found == {} and [w.code for w in warnings] == ["mcp_foreign_unreadable"] * 2
    assert all("nested" in w.message for w in warnings), warnings
