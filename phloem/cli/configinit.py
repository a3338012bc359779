"""`phloem config init [PATH]`: write a commented starting config.

A `pipx install` ships no `conf/phloem.toml`; this writes one: the main keys of the daemon,
its logging and its session store at their defaults (uncommented, so the file shows what
is in force), a Gemini provider and the coding agent `phloem chat` uses, and pointers to
everything else. PATH defaults to the user's config file of the search order
(`$XDG_CONFIG_HOME/phloem/phloem.toml`, `~/.config/...` when unset), which every command
then finds without `--config`. An existing file is never replaced unless `--force` is
given (exit 1 otherwise). The file is created 0600 in a directory created 0700: a config
may come to name credentials' variables and trusted code.
"""

from __future__ import annotations

import os
from pathlib import Path

from phloem.base.paths import config_candidates
from phloem.cli.commands import EXIT_OK, CommandContext, Commands
from phloem.protocols.errors import ErrorKind, PhloemError

TEMPLATE = """\
# phloem daemon configuration, written by `phloem config init`. Every key is optional:
# the values below are the defaults. Check the file with `phloem config check`; every key
# of every section is in the configuration reference (docs/reference/config.md).
# Found without --config: $PHLOEM_CONFIG, ./phloem.toml, ~/.config/phloem/phloem.toml,
# /etc/phloem/phloem.toml (the first that exists). SIGHUP makes a running daemon re-read it.

[daemon]
# Unix socket path. Empty: $XDG_RUNTIME_DIR/phloem/phloem.sock, else
# /run/user/$UID/phloem/phloem.sock, else $TMPDIR/phloem-$UID/phloem.sock.
socket = ""
# Peer uids allowed besides the daemon's own (checked with SO_PEERCRED).
allowed_uids = []
# Largest frame accepted or sent, in bytes; concurrent client connections.
max_frame_bytes = 4194304
max_connections = 128
# Default and largest time a request may take, in seconds.
request_timeout_s = 30.0
max_request_timeout_s = 3600.0
# On SIGTERM / `phloem stop`: the time connections and services get to end.
shutdown_timeout_s = 10.0

[logging]
# debug | info | warning | error; json (one object per line on stderr) | console.
level = "info"
format = "json"

[services]
# Built-in services to leave out (e.g. ["echo"]).
disabled = []

[sessions]
# Where session transcripts live (one daemon per store). Empty:
# $XDG_STATE_HOME/phloem/sessions, else ~/.local/state/phloem/sessions.
dir = ""
# The agent of a session created without one (`phloem chat --new`).
default_agent = "coder"

# A model provider; its key is read from the named environment variable when a call is
# made (`phloem model list` shows whether it is set). Others: docs/models.md.
[providers.flash]
protocol = "gemini"                      # gemini | openai-chat | openai-responses
model = "gemini-3.1-flash-lite"
api_key_env = "PHLOEM_GEMINI_API_KEY"

# Any OpenAI-compatible server by base_url (Ollama here); no api_key_env: no credentials.
# [providers.local]
# protocol = "openai-chat"
# model = "qwen3:8b"
# base_url = "http://127.0.0.1:11434/v1"
# chat_token_limit = "max_tokens"

# The coding agent of `phloem chat`: the coding tools on the session's workspace. With
# PHLOEM_GEMINI_API_KEY set:  phloem chat --new "explain this repository"
[agents.llm.coder]
provider = "flash"
description = "A coding agent on the session's workspace"
harness = true
# confirmation = true            # ask before write / edit / bash

# More sections, each in its guide: [agents] and [planning] (docs/agents.md,
# docs/planning.md), [mcp.servers.NAME] (docs/mcp.md), [cluster] (docs/cluster.md),
# [telemetry] (docs/telemetry.md), [web] (docs/web.md), [plugins.NAME] (docs/plugins.md).
"""

FILE_MODE = 0o600
DIR_MODE = 0o700


def add_cli(config: Commands) -> None:
    """Register `init` on the `phloem config` group."""
    init = config.add("init", "write a commented default config file", _cmd_init)
    init.add_argument(
        "path",
        nargs="?",
        metavar="PATH",
        help="where to write it (default: $XDG_CONFIG_HOME/phloem/phloem.toml)",
    )
    init.add_argument("--force", action="store_true", help="replace an existing file")


def default_path() -> Path:
    """The user's config file of the search order (`phloem.base.paths`)."""
    return config_candidates()[1]


def write_config(path: Path, force: bool = False) -> Path:
    """Write `TEMPLATE` to `path` (0600; missing directories 0700); `invalid_argument`
    when a file is there and not `force`, `config_invalid` when it cannot be written."""
    if path.is_dir():
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"{path} is a directory")
    if path.exists() and not force:
        raise PhloemError(ErrorKind.INVALID_ARGUMENT, f"{path} exists; give --force to replace it")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | (0 if force else os.O_EXCL)
    try:
        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        fd = os.open(path, flags, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(TEMPLATE)
    except FileExistsError:
        raise PhloemError(
            ErrorKind.INVALID_ARGUMENT, f"{path} exists; give --force to replace it"
        ) from None
    except OSError as exc:
        raise PhloemError(
            ErrorKind.CONFIG_INVALID, f"cannot write {path}: {exc.strerror or exc}"
        ) from None
    return path


def _cmd_init(ctx: CommandContext) -> int:
    path = Path(ctx.args.path) if ctx.args.path else default_path()
    written = write_config(path, ctx.args.force)
    ctx.emit(
        {"written": str(written)},
        text=f"wrote {written}; check it with: phloem config check --config {written}",
    )
    return EXIT_OK
