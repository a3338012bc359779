"""Plugins: tree-wide hooks around runs, agents, model calls and tool calls.

The contract (the hooks and their outcomes) is `phloem.agents.hooks`, and `phloem.plugins`
is its public face; the interceptor, the slots, the stateful instances, the built-ins and
the service live in their own modules here.
"""
