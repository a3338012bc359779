"""The ADK-compatible HTTP API: ADK's API server routes, served by `phloem api` (a client
process of the daemon, like `phloem web`), so that ADK's clients, test harnesses and dev
UI talk to agents that run under phloem's supervision.

Apps are the catalogue's LLM agents, sessions are the durable sessions, a turn is a
session run. Modules: shapes (phloem values → ADK's camelCase JSON, and ADK's run request
→ a prompt), errors (error kinds → HTTP statuses, one-line JSON bodies), daemon (the one
connection to the daemon), app (the aiohttp routes), live (the `/run_live` WebSocket
bridge to a Live session), devui (ADK's dev UI from the installed `google-adk`), serve
(run until stopped).
"""
