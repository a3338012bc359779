"""Language servers: diagnostics for what `write` and `edit` just changed.

`settings` declares `[lsp]`; `client.LspClient` speaks the Language Server Protocol
(`lsprotocol` types, Content-Length framing from `protocols.framing`) with one server
running as a supervised process child; `hub.LspHub` keeps one client per (workspace root,
server id) and decorates successful write/edit results (`diagnostics`,
`diagnostics_text`); `service` is the `lsp` service that holds the servers' supervisor.
"""
