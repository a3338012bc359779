"""`phloem eval ...`: run eval sets (through the daemon or an embedded tree), check files.

    phloem eval run EVALSET [--agent NAME] [--criteria FILE] [--samples N]
                    [--concurrency N] [--case ID ...] [--rerun-failed REPORT]
                    [--baseline FILE] [--json FILE] [--markdown FILE]
                    [--junit FILE] [--config FILE | --socket PATH]
    phloem eval validate EVALSET [--json]

`eval run` runs on the daemon (`--socket`, `$PHLOEM_SOCKET`, or the socket of the config
file); with `--config FILE` and no daemon listening on that config's socket, it starts an
embedded tree from FILE for the run, as `adk eval` does: same reports, same exit codes.
The first progress line says which. `--case ID` (repeatable, a glob) runs only the
matching cases, `--rerun-failed REPORT` only those that did not pass in a saved JSON
report. It prints the Markdown report on stdout (the same bytes `--markdown FILE`
writes) and writes the JSON and JUnit reports where asked, each file replaced
atomically. Progress goes to stderr: a progress bar on a terminal (cases done / total,
pass rate so far, elapsed, ETA), else one line per finished case; a case that did not
pass is explained there as it ends (expected against actual, the trajectory diff, the
first error), and what was read but is not evaluated is named once at the end. Exit
codes: 0 every gate passed, 2 the run completed but a gate failed or it regressed
against the baseline, 1 a configuration or runtime error (one line on stderr), 64 a
usage error (a flag or value the command line cannot parse: never taken for a failed
gate). Ctrl-C cancels the eval and every case run it started, and exits 130 as every
command does.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from phloem.base.paths import SOCKET_ENV
from phloem.cli.args import key_values
from phloem.cli.commands import EXIT_OK, CommandContext, Commands, UsageError, set_usage_exit
from phloem.protocols.errors import ErrorKind, PhloemError

if TYPE_CHECKING:
    from phloem.client.sync import Client

T = TypeVar("T")
EXIT_GATE_FAILED = 2
EXIT_EVAL_USAGE = 64  # EX_USAGE of sysexits.h: a mistyped `eval run` is not a failed gate
BAR_WIDTH = 24


def add_cli(commands: Commands) -> None:
    group = commands.group("eval", "evaluate agents against eval sets (phloem's or ADK's)")
    # `run` takes `--json FILE` (a report file), so it adds --socket/--config itself
    # instead of the common flags, whose --json is a switch.
    run = group._sub.add_parser(
        "run", help="run an eval set against an agent", description=__doc__.split("\n\n")[0]
    )
    # SUPPRESS: given before `eval` (`phloem --socket S eval run ...`) they stay given
    run.add_argument(
        "--socket", metavar="PATH", help="daemon socket path", default=argparse.SUPPRESS
    )
    run.add_argument(
        "--config", metavar="FILE", help="phloem TOML config file", default=argparse.SUPPRESS
    )
    run.add_argument("evalset", help="eval set file (.json, .evalset.json, .test.json)")
    run.add_argument("--agent", help="registered agent name (default: metadata.agent)")
    run.add_argument("--criteria", metavar="FILE", help="criteria file or ADK test_config.json")
    run.add_argument("--samples", type=int, help="samples per case (1 .. 100)")
    run.add_argument("--concurrency", type=int, help="case samples at once (1 .. 256)")
    run.add_argument("--timeout", type=float, help="the whole run's timeout in seconds (60)")
    run.add_argument("--case-timeout", type=float, help="one case sample's timeout (30)")
    run.add_argument("--pass-rate-threshold", type=float, help="cases passed / evaluated (1.0)")
    run.add_argument(
        "--sample-pass-rate-threshold", type=float, help="passed / successful samples (1.0)"
    )
    run.add_argument(
        "--min-successful-samples", type=int, help="fewer successful samples: partial (all)"
    )
    run.add_argument("--baseline", metavar="FILE", help="a saved JSON report to compare with")
    run.add_argument("--max-pass-rate-drop", type=float, default=0.0, help="vs the baseline")
    run.add_argument(
        "--metric-tolerance",
        action="append",
        default=[],
        metavar="NAME=X",
        help="allowed drop of a metric vs the baseline (repeatable)",
    )
    run.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="ID",
        help="run only the cases whose id matches (a glob; repeatable)",
    )
    run.add_argument(
        "--rerun-failed",
        metavar="REPORT",
        help="run only the cases that did not pass in a saved JSON report",
    )
    run.add_argument("--json", dest="json_file", metavar="FILE", help="write the JSON report")
    run.add_argument("--markdown", metavar="FILE", help="write the Markdown report")
    run.add_argument("--junit", metavar="FILE", help="write the JUnit XML report")
    run.set_defaults(handler=_cmd_run, json=False)
    set_usage_exit(run, EXIT_EVAL_USAGE)
    validate = group.add(
        "validate", "parse an eval set and report its format and counts", _cmd_validate
    )
    validate.add_argument("evalset", help="eval set file")


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace `path` with `data` atomically (a synced temp file renamed over it)."""
    import tempfile

    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Progress:
    """Progress on stderr: a redrawn bar on a terminal, else a line per finished case;
    either way, why each case that did not pass failed (its diagnosis), as it ends."""

    def __init__(self, err: TextIO, total: int, tty: bool | None = None) -> None:
        self.err = err
        self.total = total
        self.tty = err.isatty() if tty is None else tty
        self.started = time.monotonic()
        self.drawn = False

    def note(self, text: str) -> None:
        """A line of its own (above the bar on a terminal)."""
        self.err.write(("\r\x1b[K" if self.drawn else "") + text + "\n")
        self.err.flush()

    def __call__(self, progress: Any) -> None:
        detail = "".join(f"  {line}\n" for line in progress.detail.splitlines())
        if not self.tty:
            self.err.write(f"case {progress.case_id}: {progress.status}\n{detail}")
            self.err.flush()
            return
        if detail:
            self.note(f"case {progress.case_id}: {progress.status}\n{detail.rstrip()}")
        line = self.line(progress.done, progress.passed, progress.evaluated)
        self.err.write("\r" + line + "\x1b[K")  # clear what a longer line left behind
        self.err.flush()
        self.drawn = True

    def line(self, done: int, passed: int, evaluated: int) -> str:
        elapsed = time.monotonic() - self.started
        total = max(self.total, 1)
        filled = BAR_WIDTH * done // total
        rate = f"{passed / evaluated:.0%}" if evaluated else "-"
        eta = elapsed / done * (total - done) if done else 0.0
        return (
            f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{self.total} cases  "
            f"pass {rate}  elapsed {elapsed:.1f}s  eta {eta:.1f}s"
        )

    def end(self) -> None:
        if self.drawn:
            self.err.write("\n")
            self.err.flush()
            self.drawn = False


def off_main_thread(work: Callable[[], T]) -> T:
    """`work()` on a worker thread while the main thread only waits for it, so a Ctrl-C
    lands in that wait — never inside the embedded tree's own locks, which the stop
    that follows must take again."""
    box: list[tuple[bool, Any]] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append((True, work()))
        except BaseException as exc:  # handed to the main thread as it is
            box.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="eval-run", daemon=True).start()
    while not done.wait(0.5):
        pass
    ok, value = box[0]
    if not ok:
        raise value
    result: T = value
    return result


@contextlib.contextmanager
def eval_client(ctx: CommandContext) -> Iterator[tuple[Client, str]]:
    """The client an eval runs through, and where that is: the daemon (`--socket`,
    `$PHLOEM_SOCKET`, or the socket of `--config`'s file when a daemon listens there),
    else — `--config` given, no daemon on its socket — an embedded tree started from
    that config for this run and stopped after it, as `adk eval` runs on its own."""
    from phloem.client.sync import Client

    config = getattr(ctx.args, "config", None)
    if not config or getattr(ctx.args, "socket", None) or os.environ.get(SOCKET_ENV):
        with ctx.client() as client:
            yield client, f"daemon at {ctx.socket_path()}"
        return
    socket = ctx.socket_path()
    try:
        client = Client.connect(socket, timeout=5.0)
    except PhloemError as exc:
        if exc.kind != ErrorKind.NO_DAEMON:
            raise
    else:
        with client:
            yield client, f"daemon at {socket}"
        return
    from phloem.config import load_config
    from phloem.tree import Tree

    tree = Tree.start(load_config(config, load_components=True))
    try:
        with tree.client("eval run") as local:
            yield local, f"embedded tree from {config}"
    finally:
        tree.stop(timeout=30.0)


def _cmd_run(ctx: CommandContext) -> int:
    from phloem.actors.eval.baseline import read_baseline
    from phloem.client.eval import load_criteria, load_evalset, select_cases
    from phloem.protocols.evalreport import encode_json, encode_junit, encode_markdown

    args = ctx.args
    rerun = read_baseline(args.rerun_failed) if args.rerun_failed else None
    evalset = select_cases(load_evalset(args.evalset), args.case, rerun)
    criteria = load_criteria(args.criteria, args.evalset)
    agent = args.agent or evalset.metadata.get("agent")
    if not isinstance(agent, str) or not agent:
        raise PhloemError(
            ErrorKind.EVAL_OPTIONS_INVALID, "no agent: give --agent NAME (or metadata.agent)"
        )
    tolerances: dict[str, float] = {}
    for name, value in key_values("metric-tolerance", args.metric_tolerance).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UsageError(f"--metric-tolerance {name}: expected a number")
        tolerances[name] = float(value)
    options: dict[str, Any] = {}
    for key, value in (
        ("timeout_s", args.timeout),
        ("case_timeout_s", args.case_timeout),
        ("pass_rate_threshold", args.pass_rate_threshold),
        ("sample_pass_rate_threshold", args.sample_pass_rate_threshold),
        ("min_successful_samples", args.min_successful_samples),
    ):
        if value is not None:
            options[key] = value
    progress = Progress(ctx.err, len(evalset.cases))
    try:
        with eval_client(ctx) as (client, where):
            progress.note(f"eval {evalset.id}: {len(evalset.cases)} cases, agent {agent}, {where}")
            report = off_main_thread(
                lambda: client.run_eval(
                    evalset,
                    agent=agent,
                    criteria=criteria,
                    samples=args.samples,
                    concurrency=args.concurrency,
                    options=options,
                    on_progress=progress,
                    baseline=args.baseline,
                    max_pass_rate_drop=args.max_pass_rate_drop,
                    metric_tolerances=tolerances,
                )
            )
    finally:
        progress.end()
    if report.not_evaluated:
        progress.note("warning: not evaluated: " + ", ".join(report.not_evaluated))
    markdown = encode_markdown(report)
    if args.json_file:
        write_atomic(args.json_file, encode_json(report))
    if args.markdown:
        write_atomic(args.markdown, markdown)
    if args.junit:
        write_atomic(args.junit, encode_junit(report))
    ctx.out.write(markdown.decode())
    ctx.out.flush()
    return EXIT_OK if report.status == "passed" else EXIT_GATE_FAILED


def _cmd_validate(ctx: CommandContext) -> int:
    from phloem.protocols.evalset import read_evalset, summary

    info = summary(read_evalset(ctx.args.evalset))
    text = (
        f"{info['format']} eval set {info['id']!r}: {info['cases']} cases, {info['turns']} turns "
        f"({info['with_expected_response']} with an expected response, "
        f"{info['with_expected_trajectory']} with an expected trajectory)"
    )
    if info["unsupported"]:
        text += "\nnot evaluated: " + ", ".join(info["unsupported"])
    ctx.emit(info, text=text)
    return EXIT_OK
