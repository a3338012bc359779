"""Durable sessions and the coding-agent harness (plasmid's contract, in phloem's shape).

- `store` / `journal` / `ids`: the on-disk formats (JSONL transcripts, state journals,
  percent-encoded identifiers) with crash recovery;
- `durable`: `DurableSessionService`, the same surface as the in-memory session service;
- `harness`: the agent a session runs (an `LlmAgent` over the conversation) and `AskResult`;
- `compaction`: the model-call interceptor that keeps requests inside `context_tokens`;
- `service`: the `sessions` service (one run per session, owner-bound runs).
"""
