"""MCP: configured tool servers as phloem tools, and phloem's tools as an MCP server.

`settings` declares `[mcp]`; `hub.McpHub` connects the configured servers lazily (stdio
ones as supervised process children, streamable-HTTP ones over httpx2, with `oauth` the
SDK's OAuth flow over `oauth`'s token files) through the official `mcp` SDK (2.x);
`tools.McpTool` puts each server tool behind the one tool contract as
`mcp__<server>__<tool>`; `service` is the `mcp` service (`phloem mcp list`); `serve`
exposes phloem's coding tools and agents to MCP clients (`phloem mcp serve`), on stdio or,
through `serve_http` and its `events` store, over streamable HTTP; `lines` is the stdio
framing both sides read through (bounded lines, typed decoding).
"""
