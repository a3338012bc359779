"""phloem's one logging mechanism: `get_logger(name)` for every module, two sinks.

- **Embedded** (the default: a `phloem.Tree` inside someone else's program): records go
  through the standard `logging` module, to the logger of the same name under `phloem`
  (`phloem.tree`, `phloem.daemon`, ...), as `event key=value ...` with the fields on the
  record's `phloem` attribute. phloem configures nothing globally — no handler, no level
  — so the host's logging setup decides where they go, and nothing is ever printed on
  stdout.
- **Owned** (`configure_logging`, called by the daemon and the CLI, which own their
  process): one rendered line per record (JSON or console) on standard error, resolved at
  write time rather than at configure time, so a redirected or replaced `sys.stderr` (a
  test's capture, a daemon's log file) is honoured. `set_level` changes the level live
  (the daemon's SIGHUP reload).

Every module logs through `get_logger`. A record is a plain dict passed through a short
list of processors (`(logger, method, fields) -> fields`, the last one renders); this
module is the whole pipeline, with nothing to import beyond the standard library, so a
daemon's first line costs no library load (structlog, used before, cost ~0.15 s of every
daemon start, with the Rich it loads for its tracebacks).

Every record carries `actor_path`, the tree path of the actor it was made for (when it is
made for one: `set_actor_source`, which `phloem.supervision.owners` fills in). The daemon
also keeps each line it writes, in its bounded ring buffer of recent lines per child
(`keep_recent`, `phloem.base.logbuffer`), for `phloem logs`.

Logging never raises into its caller: a line that cannot be written (a closed stream, a
pipe whose reader has gone away, a full disk) is dropped and counted (`dropped_lines()`;
the daemon reports the count in its `daemon_stopped` line). Code such as the daemon's stop
path logs before acting, and a dead log sink must not stop it from acting.

A record on a hot path (an actor's crash line, which sits on its restart path) can be
made with `Logger.error_later`: on the owned sink the caller only queues it (its time,
its context and its exception captured then) and the log thread renders and writes the
same line, `WRITE_DELAY_S` after it is woken. Lines stay in record order (a synchronous
record first writes what is queued), at most `MAX_DEFERRED_LINES` wait (more are dropped,
counted, and a `log_lines_dropped` line says how many), and what is queued is written at
exit (`flush_logs`).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import datetime
import json
import os
import queue
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any, Literal, TextIO

from phloem.protocols.secrets import REDACTED, is_secret_key, redact, redact_value

if TYPE_CHECKING:
    from phloem.base.logbuffer import LogBuffer

_lock = threading.Lock()
_dropped = 0

MAX_DEFERRED_LINES = 10_000
"""Records queued for the log thread (`Logger.error_later`) at most; more are dropped."""
WRITE_DELAY_S = 0.002
"""How long the log thread waits, once woken, before it writes what is queued."""
DROPPED_EVENT = "log_lines_dropped"
"""The line written before the next deferred one when some were dropped (`count`)."""
_AT = "_phloem_at"  # a deferred record's time (`time.time()` when it was made)

ROOT_LOGGER = "phloem"
# The standard library's levels (`logging` itself is imported where a record goes to it).
DEBUG, INFO, WARNING, ERROR, CRITICAL = 10, 20, 30, 40, 50
LEVELS: dict[str, int] = {"debug": DEBUG, "info": INFO, "warning": WARNING, "error": ERROR}
Format = Literal["json", "console"]


def dropped_lines() -> int:
    """How many log lines this process could not write (since it started)."""
    with _lock:
        return _dropped


class _SafeLogger:
    """The owned sink's writer: one rendered line at a time to `stream` (None: whatever
    `sys.stderr` is at the time); a line that cannot be written is dropped and counted."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def msg(self, message: str) -> None:
        global _dropped
        with _lock:
            stream = self._stream if self._stream is not None else sys.stderr
            try:
                if stream is None or getattr(stream, "closed", False):
                    raise ValueError("no open stream")
                stream.write(message + "\n")
                stream.flush()
            except (OSError, ValueError):
                _dropped += 1


def redact_fields(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> dict[str, Any]:
    """Processor: no field of a record carries a credential (the one rule,
    `protocols.secrets`): secret-named fields lose their value, strings are redacted,
    containers deeply, and other values whose repr would show a secret become the
    redacted repr. Never raises: a field it cannot read becomes `[unloggable: Error]`."""
    out: dict[str, Any] = {}
    for key, value in event.items():
        try:
            if key != "event" and is_secret_key(key, value):
                out[key] = REDACTED
            elif isinstance(value, str | dict | list | tuple):
                out[key] = redact_value(value)
            elif value is None or isinstance(value, bool | int | float):
                out[key] = value
            else:
                text = repr(value)
                clean = redact(text, limit=None)
                out[key] = value if clean == text else clean
        except Exception as exc:
            out[key] = f"[unloggable: {type(exc).__name__}]"
    return out


def add_timestamp(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    """Processor: `timestamp`, ISO 8601 in UTC (`...Z`), of when the record was
    made: now, or for a deferred record the time it was queued."""
    at = event.pop(_AT, None)
    stamp = (
        datetime.datetime.now(tz=datetime.UTC)
        if at is None
        else datetime.datetime.fromtimestamp(at, tz=datetime.UTC)
    )
    event["timestamp"] = stamp.isoformat().replace("+00:00", "Z")
    return event


def add_trace_ids(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    """Processor: `trace_id` and `span_id` (hex) of the current span, if any,
    so a log line can be found from its trace and the other way round."""
    from phloem.base import telemetry

    ids = telemetry.current_ids()
    if ids is not None:
        event.setdefault("trace_id", ids[0])
        event.setdefault("span_id", ids[1])
    return event


def _no_actor() -> str | None:
    return None


_actor_source: Callable[[], str | None] = _no_actor
_kept: LogBuffer | None = None


def set_actor_source(source: Callable[[], str | None]) -> None:
    """Where `actor_path` comes from: the tree path of the actor the calling thread works
    for, or None (set by `phloem.supervision.owners`, which knows the actors)."""
    global _actor_source
    _actor_source = source


def keep_recent(buffer: LogBuffer | None) -> None:
    """Keep every line the owned sink writes in `buffer` too (None: keep none)."""
    global _kept
    _kept = buffer


def kept() -> LogBuffer | None:
    """The buffer of recent lines this process keeps (the daemon's), if any."""
    return _kept


def add_actor_path(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    """Processor: `actor_path`, the tree path of the actor the record is for."""
    try:
        path = _actor_source()
    except Exception:  # attribution is a courtesy: it never costs a record
        path = None
    if path:
        event.setdefault("actor_path", path)
    return event


class _KeepAndRender:
    """The owned sink's last processor: render the line and, when this process keeps
    recent lines (`keep_recent`), keep it there as one JSON object."""

    def __init__(self, renderer: Any, fmt: str) -> None:
        self._render = renderer
        self._json = fmt == "json"

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        buffer = _kept
        if buffer is None:
            return self._render(logger, method, event)
        actor = str(event.get("actor_path") or "")
        level = str(event.get("level", method))
        name = str(event.get("event", ""))
        if self._json:
            line = rendered = self._render(logger, method, event)
        else:
            line = json.dumps(dict(event), default=str)
            rendered = self._render(logger, method, event)
        buffer.add(actor, level, name, time.time(), str(line))
        return rendered


class _Sink:
    """Where records go now: the standard library (stream None) or one stream of lines."""

    def __init__(self, level: str, fmt: str, stream: TextIO | None, owned: bool) -> None:
        self.level = level
        self.fmt = fmt
        self.stream = stream
        self.owned = owned
        self.generation = 0


_sink = _Sink("info", "console", None, owned=False)
_bound: dict[str, Any] = {}


def _stdlib_message(
    _logger: Any, _method: str, event: MutableMapping[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The last processor of the embedded sink: `event k=v ...` as the record's message,
    and the fields themselves (redacted) as the record's `phloem` attribute."""
    fields = dict(event)
    name = str(fields.pop("event", ""))
    text = " ".join([name, *(f"{k}={v!r}" for k, v in fields.items())])
    return (text,), {"extra": {"phloem": fields}}


_METHOD_LEVELS = {**LEVELS, "critical": CRITICAL}  # an emitter method's stdlib level


def add_log_level(_logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
    """Processor: `level`, the record's level name."""
    event["level"] = method
    return event


def format_exc_info(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    """Processor: an `exc_info` field (True for the exception being handled, an
    exception, or a `sys.exc_info()` triple) becomes `exception`, its formatted traceback."""
    exc_info = event.pop("exc_info", None)
    if isinstance(exc_info, BaseException):
        exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
    elif exc_info is not None and not isinstance(exc_info, tuple):
        exc_info = sys.exc_info() if exc_info else None
    if exc_info and exc_info[0] is not None:
        event["exception"] = "".join(traceback.format_exception(*exc_info)).rstrip("\n")
    return event


def render_json(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> str:
    """Renderer: one JSON object (a value JSON cannot carry is shown as its repr)."""
    return json.dumps(event, default=repr)


_LEVEL_WIDTH = 9  # "[warning  ]": the console line's level column
_EVENT_WIDTH = 30  # the event's column, when fields follow it


def render_console(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> str:
    """Renderer for humans: `timestamp [level    ] event    key=value ...` (fields by
    name, values as their repr), then the traceback, if any, on the lines below."""
    fields = dict(event)
    stamp = str(fields.pop("timestamp", ""))
    level = str(fields.pop("level", ""))
    name = str(fields.pop("event", ""))
    exception = fields.pop("exception", None)
    line = f"{stamp} [{level:<{_LEVEL_WIDTH}}] {name}"
    if fields:
        pairs = " ".join(f"{key}={fields[key]!r}" for key in sorted(fields))
        line = f"{line:<{len(stamp) + _LEVEL_WIDTH + 4 + _EVENT_WIDTH}} {pairs}"
    return line if exception is None else f"{line}\n{exception}"


Processor = Callable[[Any, str, MutableMapping[str, Any]], Any]


class _Emitter:
    """One logger name on one sink: a record (`method`, `event`, fields) goes through the
    processors in order, and the last one's result to `out`."""

    __slots__ = ("_out", "_processors")

    def __init__(self, processors: list[Processor], out: Callable[[str, Any], None]) -> None:
        self._processors = processors
        self._out = out

    def _emit(self, method: str, event: str, kw: dict[str, Any]) -> None:
        fields: Any = dict(kw)
        fields["event"] = event
        for processor in self._processors:
            fields = processor(None, method, fields)
        self._out(method, fields)

    def debug(self, event: str, **kw: Any) -> None:
        self._emit("debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        self._emit("info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        self._emit("warning", event, kw)

    def error(self, event: str, **kw: Any) -> None:
        self._emit("error", event, kw)

    def critical(self, event: str, **kw: Any) -> None:
        self._emit("critical", event, kw)


def _wrap(name: str) -> _Emitter:
    """The emitter of `name` on the current sink: embedded, a record of the standard
    library's logger `name`; owned, one rendered line on the sink's stream."""
    if not _sink.owned:
        import logging

        stdlib = logging.getLogger(name)

        def to_stdlib(method: str, message: Any) -> None:
            args, kwargs = message
            stdlib.log(_METHOD_LEVELS[method], *args, **kwargs)

        embedded: list[Processor] = [
            format_exc_info,
            add_trace_ids,
            add_actor_path,
            redact_fields,
            _stdlib_message,
        ]
        return _Emitter(embedded, to_stdlib)
    writer = _SafeLogger(_sink.stream)
    renderer = render_json if _sink.fmt == "json" else render_console
    owned: list[Processor] = [
        add_log_level,
        add_timestamp,
        format_exc_info,
        add_trace_ids,
        add_actor_path,
        redact_fields,
        _KeepAndRender(renderer, _sink.fmt),
    ]
    return _Emitter(owned, lambda _method, line: writer.msg(line))


def _logger_for(name: str) -> Any:
    key = f"{_sink.generation}:{name}"
    logger = _bound.get(key)
    if logger is None:
        with _lock:
            if len(_bound) > 4096:  # names are module constants; stay bounded regardless
                _bound.clear()
            logger = _bound[key] = _wrap(name)
    return logger


# -- deferred records (`Logger.error_later`) ------------------------------------------------

_Record = tuple[Any, str, str, dict[str, Any], contextvars.Context]
_pending: deque[_Record] = deque()
_wake: queue.SimpleQueue[None] = queue.SimpleQueue()
_order = threading.RLock()  # held while lines are rendered and written: record order
_writer: list[threading.Thread] = []
_drops: dict[str, Any] | None = None  # the queued `log_lines_dropped` record's fields


def _defer(logger: Any, method: str, event: str, kw: dict[str, Any]) -> None:
    """Queue a record for the log thread with what it must be rendered from, taken now:
    its time, its context (actor path, trace ids) and the exception being handled. When
    `MAX_DEFERRED_LINES` wait, it is dropped and counted, on one queued `log_lines_dropped`."""
    global _dropped, _drops
    if len(_pending) >= MAX_DEFERRED_LINES:
        with _lock:
            _dropped += 1
            if _drops is not None:
                _drops["count"] += 1
                return
            _drops = {"count": 1, "limit": MAX_DEFERRED_LINES, _AT: time.time()}
            kw, event = _drops, DROPPED_EVENT  # queued in the dropped one's place
    else:
        kw[_AT] = time.time()
        if kw.get("exc_info") is True:
            kw["exc_info"] = sys.exc_info()
    _pending.append((logger, method, event, kw, contextvars.copy_context()))
    if not _writer:
        _start_writer()
    _wake.put(None)


def _start_writer() -> None:
    with _lock:
        if _writer:
            return
        thread = threading.Thread(target=_write_forever, name="phloem-log", daemon=True)
        _writer.append(thread)
    thread.start()


def _write_forever() -> None:
    while True:
        _wake.get()
        # Out of the way of what the record's maker does next (a restart's new actor, the
        # threads it wakes), then every record queued meanwhile at once.
        time.sleep(WRITE_DELAY_S)
        with contextlib.suppress(queue.Empty):
            while True:
                _wake.get_nowait()
        _write_pending()


def _write_pending() -> None:
    """Render and write the queued records, oldest first; never raises."""
    global _dropped, _drops
    with _order:
        while _pending:
            logger, method, event, kw, context = _pending.popleft()
            if kw is _drops:
                with _lock:  # later drops start a new count
                    _drops, kw = None, dict(kw)
            try:
                context.run(getattr(logger, method), event, **kw)
            except Exception:  # a record that cannot be rendered is a line not written
                with _lock:
                    _dropped += 1


def flush_logs() -> None:
    """Write every queued record now (at exit, and before the sink changes)."""
    if _pending:
        _write_pending()


def _after_fork_in_child() -> None:
    """A forked child has no log thread, and the locks may be held by a thread that is
    not there: start afresh. What was queued is the parent's to write, not the child's."""
    global _order, _lock, _drops
    _order = threading.RLock()
    _lock = threading.Lock()
    _writer.clear()
    _pending.clear()
    _drops = None


atexit.register(flush_logs)
os.register_at_fork(after_in_child=_after_fork_in_child)


class Logger:
    """What `get_logger` returns: `log.info("event", key=value, ...)`, on whatever sink
    is current when the record is made (the daemon configures its sink after modules have
    taken their loggers)."""

    __slots__ = ("_stdlib", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._stdlib: Any = None  # the standard library's logger of `name`, once looked up

    def enabled_for(self, level: int) -> bool:
        """Whether a record at `level` would be made now (to skip building its fields)."""
        if _sink.owned:
            return level >= LEVELS[_sink.level]
        return bool(self._stdlib_logger().isEnabledFor(level))

    def _stdlib_logger(self) -> Any:
        logger = self._stdlib
        if logger is None:
            import logging

            logger = self._stdlib = logging.getLogger(self.name)
        return logger

    def debug(self, event: str, **kw: Any) -> None:
        self._log(DEBUG, "debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        self._log(INFO, "info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        self._log(WARNING, "warning", event, kw)

    warn = warning

    def error(self, event: str, **kw: Any) -> None:
        self._log(ERROR, "error", event, kw)

    def critical(self, event: str, **kw: Any) -> None:
        self._log(CRITICAL, "critical", event, kw)

    def exception(self, event: str, **kw: Any) -> None:
        self._log(ERROR, "error", event, {"exc_info": True, **kw})

    def error_later(self, event: str, **kw: Any) -> None:
        """`error`, rendered and written by the log thread on the owned sink: the caller
        pays for queueing the record, not for formatting it (an actor's crash line, on
        its restart path). The same line, in order; embedded, exactly `error`."""
        if not _sink.owned:
            self._log(ERROR, "error", event, kw)
        elif LEVELS[_sink.level] <= ERROR:
            _defer(_logger_for(self.name), "error", event, kw)

    def _log(self, level: int, method: str, event: str, kw: dict[str, Any]) -> None:
        """Hand the record to the current sink, unless its level is off there (then no
        logger is built)."""
        if _sink.owned:
            if level < LEVELS[_sink.level]:
                return
            with _order:  # after every deferred record made before it
                if _pending:
                    _write_pending()
                getattr(_logger_for(self.name), method)(event, **kw)
            return
        if self._stdlib_logger().isEnabledFor(level):  # cached by the standard library
            getattr(_logger_for(self.name), method)(event, **kw)


def _quiet_by_default() -> None:
    """A `NullHandler` on the `phloem` logger, as a library should have: a host program
    that configures no logging gets nothing on stderr (Python's last-resort handler is
    not used), while warnings stay observable as values (`Warnings`, `AskResult`)."""
    import logging

    root = logging.getLogger(ROOT_LOGGER)
    if not any(isinstance(h, logging.NullHandler) for h in root.handlers):
        root.addHandler(logging.NullHandler())


_quiet_by_default()


def get_logger(name: str = ROOT_LOGGER) -> Logger:
    """The logger every phloem module uses (`name` under `phloem`, e.g. `phloem.tree`)."""
    if name != ROOT_LOGGER and not name.startswith(ROOT_LOGGER + "."):
        name = f"{ROOT_LOGGER}.{name}"
    return Logger(name)


_FOREIGN_LOGGER = get_logger("phloem.foreign")


def configure_logging(
    level: str = "warning", fmt: str = "console", stream: TextIO | None = None
) -> None:
    """Own the process's phloem logging: records at `level` and above, one line each, to
    `stream` (default: whatever stderr is at write time). `fmt` is `json` (one object per
    line, for the daemon) or `console` (for humans). For the daemon and the CLI only: an
    embedded tree leaves logging to its host."""
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r}")
    flush_logs()  # records made before go where they were made for
    with _lock:
        _sink.level, _sink.fmt, _sink.stream, _sink.owned = level, fmt, stream, True
        _sink.generation += 1
        _bound.clear()


FOREIGN_EVENT = "foreign_log"  # a record of another library's standard-library logger
_foreign: list[Any] = []  # the root logger's handler `capture_stdlib` added, once


def capture_stdlib() -> None:
    """Route every standard-library record that reaches the root logger (Ray's, an HTTP
    library's: whatever their own loggers let through) into the owned sink, as one
    `foreign_log` line with its `logger` and `message`: in a process that owns its
    logging (the daemon) nothing may print plain text into its JSON stream, as Python's
    last-resort handler otherwise would. Idempotent; records of phloem's own loggers, and
    any record while the sink is not owned, are left alone."""
    import logging

    class ForeignHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if not _sink.owned or record.name.split(".", 1)[0] == ROOT_LOGGER:
                return
            try:
                message = record.getMessage()
            except Exception:  # arguments that do not fit the format: the format, as is
                message = str(record.msg)
            fields: dict[str, Any] = {"logger": record.name, "message": message}
            if record.exc_info and record.exc_info[0] is not None:
                fields["error_type"] = record.exc_info[0].__name__
            level = record.levelno
            method = (
                "critical" if level >= CRITICAL else "error" if level >= ERROR
                else "warning" if level >= WARNING else "info" if level >= INFO else "debug"
            )  # fmt: skip
            getattr(_FOREIGN_LOGGER, method)(FOREIGN_EVENT, **fields)

    with _lock:
        if _foreign:
            return
        _foreign.append(ForeignHandler())
    logging.getLogger().addHandler(_foreign[0])


def adopt_logger(name: str) -> None:
    """In a process that owns its logging: take over library logger `name`, which set up
    a stderr handler of its own at import (Ray's `ray` logger does, with propagation off):
    its handlers go and its records propagate to `capture_stdlib`'s, as JSON lines. Its
    level stays the library's. Embedded, the host's logging is left alone."""
    if not _sink.owned:
        return
    import logging

    logger = logging.getLogger(name)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logger.propagate = True
    capture_stdlib()


def set_level(level: str, fmt: str | None = None) -> None:
    """Change the level (and format) of the owned sink live; the stream stays."""
    configure_logging(level, fmt or _sink.fmt, _sink.stream)


def use_stdlib() -> None:
    """Back to the embedded default: records through the standard `logging` module."""
    flush_logs()
    with _lock:
        _sink.owned, _sink.stream = False, None
        _sink.generation += 1
        _bound.clear()


def current_level() -> str | None:
    """The owned sink's level, or None while records go to the standard library."""
    return _sink.level if _sink.owned else None
