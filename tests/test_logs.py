"""Logging never raises into its caller: a dead sink drops lines and counts them."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from phloem.base import logs

pytestmark = pytest.mark.timeout(20)


class _Dead(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    logs.configure_logging("warning", "console")


def test_a_sink_that_raises_drops_the_line_and_counts_it() -> None:
    logs.configure_logging("info", "json", _Dead())
    before = logs.dropped_lines()
    log = logs.get_logger("test")
    log.info("one", n=1)
    log.warning("two")
    assert logs.dropped_lines() == before + 2


def test_a_stderr_pipe_whose_reader_is_gone_never_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    dead = open(write_end, "w", buffering=1)  # noqa: SIM115
    monkeypatch.setattr(sys, "stderr", dead)
    logs.configure_logging("info", "json")
    before = logs.dropped_lines()
    logs.get_logger("test").info("stop_requested", owner="o1")
    assert logs.dropped_lines() == before + 1
    good = io.StringIO()
    monkeypatch.setattr(sys, "stderr", good)  # a working sink again: lines flow
    logs.get_logger("test").info("back")
    assert '"back"' in good.getvalue() and logs.dropped_lines() == before + 1
    with contextlib.suppress(OSError):
        dead.close()


def test_embedded_logging_goes_through_the_stdlib_phloem_logger_and_never_stdout(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """An embedded tree (nothing configured) logs through `logging`, under `phloem`."""
    import logging

    import phloem

    logs.use_stdlib()
    caplog.set_level(logging.INFO, logger="phloem")
    root_handlers = list(logging.getLogger().handlers)
    with phloem.Tree.start() as tree, tree.client() as client:
        assert client.ask("echo", 1) == 1
    out = capsys.readouterr()
    assert out.out == ""
    started = [r for r in caplog.records if r.msg.startswith("tree_started")]
    assert started and started[0].name == "phloem.tree" and started[0].levelno == logging.INFO
    assert started[0].phloem["services"][0] == "echo"  # type: ignore[attr-defined]
    # nothing configured globally: no handler added (the `phloem` logger holds only its
    # NullHandler)
    assert logging.getLogger().handlers == root_handlers
    assert [type(h) for h in logging.getLogger("phloem").handlers] == [logging.NullHandler]


def test_the_host_level_decides_in_embedded_mode(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    logs.use_stdlib()
    caplog.set_level(logging.WARNING, logger="phloem")
    log = logs.get_logger("phloem.test")
    log.info("quiet_one")
    log.warning("loud_one", api_key="sk-abcdefghijklmnopqrstuvwx")
    assert [r.msg.split()[0] for r in caplog.records] == ["loud_one"]
    assert "sk-abc" not in caplog.text


def test_set_level_changes_the_owned_sink_live() -> None:
    out = io.StringIO()
    logs.configure_logging("warning", "json", out)
    log = logs.get_logger("phloem.test")
    log.info("hidden")
    logs.set_level("info")
    log.info("shown")
    assert logs.current_level() == "info"
    assert "hidden" not in out.getvalue() and '"shown"' in out.getvalue()


def test_a_daemon_prints_other_libraries_records_as_json_lines(tmp_short: Path) -> None:
    """A daemon's stderr is JSON only: a library's own stdlib warning (as Ray's `ray.init`
    logs from a thread) comes out as a `foreign_log` line, never as Python's plain text."""
    import json
    import subprocess

    from tests.helpers import PY, ROOT

    config = tmp_short / "c.toml"
    config.write_text(
        '[services.extra]\nnoisy = "tests.daemon.fixture_services:noisy_library_factory"\n'
    )
    daemon = subprocess.Popen(
        [PY, "-m", "phloem", "daemon", "--config", str(config), "--socket", str(tmp_short / "s")],
        cwd=ROOT,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_short / "state")},
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert daemon.stderr is not None
    lines = []
    for line in daemon.stderr:
        lines.append(line)
        if '"daemon_ready"' in line:
            daemon.terminate()
    assert daemon.wait(30) == 0, "".join(lines)
    events = [json.loads(line) for line in lines]  # every line parses
    foreign = [e for e in events if e["event"] == "foreign_log"]
    assert foreign == [
        {
            "logger": "some.library",
            "message": "a library's warning, 42",
            "event": "foreign_log",
            "level": "warning",
            "timestamp": foreign[0]["timestamp"],
        }
    ]


def test_an_adopted_library_logger_writes_json_through_the_owned_sink(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A library logger with its own stderr handler and no propagation (Ray's `ray`):
    adopted, its records are JSON lines of the owned sink and nothing reaches stderr."""
    import json
    import logging

    library = logging.getLogger("tests.library.own")
    library.addHandler(logging.StreamHandler(sys.stderr))
    library.propagate = False
    library.setLevel(logging.INFO)
    sink = io.StringIO()
    try:
        logs.configure_logging("info", "json", sink)
        logs.adopt_logger("tests.library.own")
        library.info("started %s", "here")
        assert library.handlers == [] and library.propagate
    finally:
        for handler in logs._foreign:
            logging.getLogger().removeHandler(handler)
        logs._foreign.clear()
        library.handlers.clear()
    (line,) = sink.getvalue().splitlines()
    event = json.loads(line)
    assert (event["event"], event["logger"], event["message"], event["level"]) == (
        "foreign_log",
        "tests.library.own",
        "started here",
        "info",
    )
    assert capfd.readouterr().err == ""


def test_adopting_a_logger_embedded_leaves_the_hosts_logging_alone() -> None:
    import logging

    logs.use_stdlib()
    library = logging.getLogger("tests.library.host")
    handler = logging.NullHandler()
    library.addHandler(handler)
    library.propagate = False
    before = list(logs._foreign)  # an earlier test's daemon-style capture may be there
    try:
        logs.adopt_logger("tests.library.host")
        assert library.handlers == [handler] and not library.propagate
        assert logs._foreign == before  # adopting installed no capture of its own
    finally:
        library.removeHandler(handler)


def test_an_embedding_program_without_logging_gets_nothing_on_stderr() -> None:
    """The `phloem` logger has a NullHandler: a warning of an embedded tree stays off
    stderr when the host configured no logging (plasmid: logs discarded by default)."""
    import subprocess

    code = (
        "import phloem, logging\n"
        "from phloem.base.logs import get_logger\n"
        "get_logger('phloem.tree').warning('plugin_failed', plugin='A')\n"
        "print(any(isinstance(h, logging.NullHandler) "
        "for h in logging.getLogger('phloem').handlers))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "True"
    assert done.stderr == ""


# --- the renderers (the pipeline is phloem's own) ------------------------------------------


def test_a_json_line_keeps_field_order_and_shows_what_json_cannot_carry_as_its_repr() -> None:
    import json

    out = io.StringIO()
    logs.configure_logging("info", "json", out)
    logs.get_logger("test").info("made", b=2, a=[1], odd=Path("/x"))
    line = json.loads(out.getvalue())
    assert list(line)[:5] == ["b", "a", "odd", "event", "level"]
    assert line["odd"] == "PosixPath('/x')" and line["level"] == "info"
    assert line["timestamp"].endswith("Z")


def test_a_console_line_has_its_columns_sorted_fields_and_the_traceback_below() -> None:
    out = io.StringIO()
    logs.configure_logging("info", "console", out)
    log = logs.get_logger("test")
    log.warning("bare")
    log.info("with_fields", z="two words", a=1)
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed", n=3)
    bare, fields, failed, *trace = out.getvalue().splitlines()
    assert bare.endswith("Z [warning  ] bare")  # no padding when no field follows
    assert fields.split(" ", 1)[1] == f"[info     ] {'with_fields':<30} a=1 z='two words'"
    assert " [error    ] failed" in failed and failed.endswith(" n=3")
    assert trace[0] == "Traceback (most recent call last):" and trace[-1] == "ValueError: boom"


def test_exc_info_may_be_an_exception_or_a_triple_and_false_adds_nothing() -> None:
    import json

    out = io.StringIO()
    logs.configure_logging("info", "json", out)
    log = logs.get_logger("test")
    try:
        raise KeyError("k")
    except KeyError as exc:
        caught = exc
        triple = sys.exc_info()
    log.error("as_exception", exc_info=caught)
    log.error("as_triple", exc_info=triple)
    log.error("as_false", exc_info=False)
    first, second, third = (json.loads(x) for x in out.getvalue().splitlines())
    assert (
        first["exception"].endswith("KeyError: 'k'") and first["exception"] == second["exception"]
    )
    assert "exception" not in third and "exc_info" not in third
