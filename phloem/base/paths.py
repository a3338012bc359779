"""Where phloem looks: the default socket path and the one config search order.

Neither depends on the current directory except through `./phloem.toml`, the one
deliberate exception (a project's own config beside it):

- socket: `$XDG_RUNTIME_DIR/phloem/phloem.sock`, else `/run/user/$UID/phloem/phloem.sock`
  when that runtime directory exists, else `$TMPDIR/phloem-$UID/phloem.sock` (`/tmp` when
  `TMPDIR` is unset), the way tmux places its socket. Relative values of the variables are
  ignored, as the XDG base directory rules say. The daemon refuses a socket directory that
  is not its own (`phloem.daemon.socketfile`), which is what makes a shared `/tmp` safe.
- config: `--config`, `$PHLOEM_CONFIG`, `./phloem.toml`,
  `$XDG_CONFIG_HOME/phloem/phloem.toml` (`~/.config` when unset), `/etc/phloem/phloem.toml`:
  the first given (the first two) or the first that exists (the rest). Every command
  uses this order (`phloem daemon`, `config check`, the client and model commands).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

CONFIG_ENV = "PHLOEM_CONFIG"
SOCKET_ENV = "PHLOEM_SOCKET"
CONFIG_NAME = "phloem.toml"
SYSTEM_CONFIG = Path("/etc/phloem") / CONFIG_NAME
RUN_USER_ROOT = Path("/run/user")


def _absolute(environ: Mapping[str, str], name: str) -> Path | None:
    value = environ.get(name, "")
    return Path(value) if value and os.path.isabs(value) else None


def default_socket_path(
    environ: Mapping[str, str] | None = None,
    uid: int | None = None,
    run_user_root: Path = RUN_USER_ROOT,
) -> Path:
    """The socket path when neither `--socket`, `$PHLOEM_SOCKET` nor `daemon.socket`
    names one (see the module docstring); never relative to the current directory."""
    env = os.environ if environ is None else environ
    user = os.getuid() if uid is None else uid
    runtime = _absolute(env, "XDG_RUNTIME_DIR")
    if runtime is not None:
        return runtime / "phloem" / "phloem.sock"
    run_user = run_user_root / str(user)
    if run_user.is_dir():
        return run_user / "phloem" / "phloem.sock"
    tmp = _absolute(env, "TMPDIR") or Path("/tmp")
    return tmp / f"phloem-{user}" / "phloem.sock"


def config_candidates(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The files looked for when neither `--config` nor `$PHLOEM_CONFIG` is given, in order."""
    env = os.environ if environ is None else environ
    xdg = _absolute(env, "XDG_CONFIG_HOME") or Path(env.get("HOME") or Path.home()) / ".config"
    return [Path.cwd() / CONFIG_NAME, xdg / "phloem" / CONFIG_NAME, SYSTEM_CONFIG]


def find_config(
    explicit: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The config file to use: `explicit` (`--config`), else `$PHLOEM_CONFIG`, else the
    first of `config_candidates` that exists; None when there is none (all defaults).
    A named file is returned whether or not it exists: reading it reports the error."""
    if explicit:
        return Path(explicit)
    env = os.environ if environ is None else environ
    named = env.get(CONFIG_ENV)
    if named:
        return Path(named)
    for candidate in config_candidates(env):
        if candidate.is_file():
            return candidate
    return None
