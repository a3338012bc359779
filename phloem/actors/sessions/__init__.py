"""Durable sessions and their turns (plasmid's contract, in phloem's shape).

- `store` / `journal` / `ids`: the on-disk formats (JSONL transcripts, state journals,
  percent-encoded identifiers) with crash recovery;
- `durable`: `DurableSessionService`, the same surface as the in-memory session service;
- `turn` / `results`: one turn of a session's agent (a catalogue LLM agent, built on the
  session's workspace) and its `AskResult`;
- `compaction`: the model-call interceptor that keeps requests inside `context_tokens`;
- `service`: the `sessions` service (one run per session, owner-bound runs).
"""
