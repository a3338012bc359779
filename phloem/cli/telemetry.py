"""`phloem telemetry flush`: export what the daemon has queued now and print the counts.

    phloem telemetry flush [--timeout S] [--json]

The counts are the export bus's (`phloem status` shows them too): exported, dropped by
reason, failed exports. Exit 0; 1 on an error (no daemon, ...).
"""

from __future__ import annotations

from typing import Any

from phloem.cli.commands import CommandContext, Commands

MAX_FLUSH_TIMEOUT_S = 60.0


def add_cli(commands: Commands) -> None:
    group = commands.group("telemetry", "OpenTelemetry export (see docs/telemetry.md)")
    flush = group.add("flush", "export what is queued now and print the counts", _cmd_flush)
    flush.add_argument(
        "--timeout", type=float, default=5.0, help="seconds to wait for the export (≤ 60)"
    )


def render_counts(counts: dict[str, Any]) -> str:
    if not counts.get("enabled"):
        return "telemetry off"
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(counts["dropped_by_reason"].items()) if v)
    dropped = f"{counts['dropped']} dropped" + (f" ({reasons})" if reasons else "")
    return f"{counts['exported']} exported · {dropped} · {counts['failed']} failed exports"


def _cmd_flush(ctx: CommandContext) -> int:
    from phloem.cli.commands import UsageError

    timeout = ctx.args.timeout
    if not 0 <= timeout <= MAX_FLUSH_TIMEOUT_S:
        raise UsageError(f"--timeout must be between 0 and {MAX_FLUSH_TIMEOUT_S:g}")
    with ctx.client(timeout=timeout + 10) as client:
        counts = client.flush_telemetry(timeout)
    ctx.emit(counts, render_counts(counts))
    return 0
