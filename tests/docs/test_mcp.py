"""docs/mcp.md: its examples run as printed (a real MCP stdio server and client)."""

from __future__ import annotations

import pytest

from tests.helpers import doc_python_blocks, run_doc_block

GUIDE = "docs/mcp.md"


@pytest.mark.timeout(120)
def test_mcp_both_ways(capfd: pytest.CaptureFixture[str]) -> None:
    # One test for both examples, under one capfd: the SDK's stdio client binds the
    # sys.stderr of the moment it is first imported (the first example imports it) as the
    # stderr of every child it starts, and a second test's capture would have closed it.
    (client_side,) = doc_python_blocks(GUIDE, "MCP servers as tools")
    run_doc_block(client_side, f"{GUIDE}#mcp-servers-as-tools")
    printed = capfd.readouterr().out
    assert "42\n" in printed
    assert "calc stdio connected ['mcp__calc__add']" in printed
    (serve_side,) = doc_python_blocks(GUIDE, "phloem as an MCP server")
    run_doc_block(serve_side, f"{GUIDE}#phloem-as-an-mcp-server")
    printed = capfd.readouterr().out
    assert "['find', 'grep', 'ls', 'read']" in printed and "notes.txt" in printed


@pytest.mark.timeout(120)
def test_mcp_over_streamable_http(capfd: pytest.CaptureFixture[str]) -> None:
    (block,) = doc_python_blocks(GUIDE, "MCP over streamable HTTP")
    run_doc_block(block, f"{GUIDE}#mcp-over-streamable-http")
    assert capfd.readouterr().out == "notes.txt\n0\n"
