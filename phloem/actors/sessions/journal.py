"""App and user state: an append-only journal with a derived snapshot.

`app_state.jsonl` (or `user_state.jsonl`) holds one line per change,
`{"seq": N, "set": {...}, "remove": [...]}`; `app_state.json` is a snapshot
`{"version": 1, "seq": N, "state": {...}}` rewritten atomically every
`SNAPSHOT_EVERY` changes. The journal is the truth: loading takes the snapshot, then
applies the journal lines after its `seq`; a snapshot that does not decode or is ahead of
the journal is rebuilt from the journal (warning `session_snapshot_repaired`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec

from phloem.base.durablefiles import AppendFile, corrupt, read_jsonl, write_atomic
from phloem.protocols.depth import check_json_depth
from phloem.protocols.errors import PhloemError
from phloem.protocols.warnings import RunWarning

SNAPSHOT_EVERY = 64
JOURNAL_VERSION = 1


class StateJournal:
    """One scope's shared state (an app's, or a user's), durable and thread-safe."""

    def __init__(self, directory: Path, name: str, sync: bool) -> None:
        self.journal_path = directory / f"{name}.jsonl"
        self.snapshot_path = directory / f"{name}.json"
        self.sync = sync
        self.lock = threading.Lock()
        self.state: dict[str, Any] = {}
        self.seq = 0
        self.warnings: list[RunWarning] = []
        self._since_snapshot = 0
        self._load()
        self._file = AppendFile(self.journal_path, sync)

    def _load(self) -> None:
        base_seq, base = self._snapshot()
        if not self.journal_path.exists():
            self.state, self.seq = base, base_seq
            return
        lines = read_jsonl(self.journal_path, repair=True, sync=self.sync)
        if lines.repaired is not None:
            self.warnings.append(lines.repaired)
        last = 0
        state = dict(base)
        for number, record in lines.records:
            seq = record.get("seq")
            if not isinstance(seq, int) or seq != last + 1:
                raise corrupt(self.journal_path, number, f"expected seq {last + 1}")
            last = seq
            if seq <= base_seq:
                continue
            changes = record.get("set", {})
            removed = record.get("remove", [])
            if not isinstance(changes, dict) or not isinstance(removed, list):
                raise corrupt(self.journal_path, number, "malformed change")
            state.update(changes)
            for key in removed:
                state.pop(key, None)
        if base_seq > last:  # the snapshot claims more than the journal holds: rebuild
            self.warnings.append(
                RunWarning.of(
                    "session_snapshot_repaired",
                    f"snapshot at seq {base_seq} is ahead of the journal (seq {last}); rebuilt",
                    path=str(self.snapshot_path),
                )
            )
            self.snapshot_path.unlink(missing_ok=True)
            self._load()
            return
        self.state, self.seq = state, last

    def _snapshot(self) -> tuple[int, dict[str, Any]]:
        try:
            raw = self.snapshot_path.read_bytes()
        except FileNotFoundError:
            return 0, {}
        try:
            check_json_depth(raw)
            value = msgspec.json.decode(raw)
            if value.get("version") != JOURNAL_VERSION:
                raise ValueError("unknown version")
            seq, state = value["seq"], value["state"]
            if not isinstance(seq, int) or not isinstance(state, dict):
                raise ValueError("malformed")
            return seq, state
        except (msgspec.DecodeError, ValueError, KeyError, AttributeError, TypeError) as exc:
            self.warnings.append(
                RunWarning.of(
                    "session_snapshot_repaired",
                    f"unreadable snapshot ({exc}); rebuilt from the journal",
                    path=str(self.snapshot_path),
                )
            )
            return 0, {}

    def apply(self, changes: dict[str, Any], removed: list[str]) -> None:
        """Record one change durably, then apply it to `state` (in place)."""
        if not changes and not removed:
            return
        with self.lock:
            line = msgspec.json.encode({"seq": self.seq + 1, "set": changes, "remove": removed})
            self._file.append(line + b"\n")
            self.seq += 1
            self.state.update(changes)
            for key in removed:
                self.state.pop(key, None)
            self._since_snapshot += 1
            if self._since_snapshot >= SNAPSHOT_EVERY:
                self._write_snapshot()

    def _write_snapshot(self) -> None:
        data = {"version": JOURNAL_VERSION, "seq": self.seq, "state": self.state}
        try:
            write_atomic(self.snapshot_path, msgspec.json.encode(data), self.sync)
            self._since_snapshot = 0
        except (OSError, PhloemError):
            pass  # derived data: the journal stays the truth, the next change retries

    def close(self) -> None:
        with self.lock:
            if self._since_snapshot:
                self._write_snapshot()
            self._file.close()
