"""Configuration: defaults, errors naming key paths and lines, masking, `config check`."""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from phloem.base.settings import load_component
from phloem.cli.main import main
from phloem.config import (
    MASK,
    Config,
    load_config,
    mask_secrets,
    parse_config,
    resolved,
    to_toml,
)
from phloem.protocols.errors import PhloemError
from tests.helpers import PY, ROOT, short_tmpdir

pytestmark = pytest.mark.timeout(20)


def _error(text: str) -> PhloemError:
    with pytest.raises(PhloemError) as err:
        parse_config(text, "f.toml")
    assert err.value.kind == "config_invalid"
    return err.value


def test_an_empty_file_or_no_file_gives_every_default() -> None:
    assert parse_config("") == Config() == load_config(None)
    cfg = Config()
    assert cfg.daemon.max_frame_bytes == 4 * 1024 * 1024
    assert cfg.supervision.strategy == "one_for_one"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[daemon]\nmax_frame_bytes = 10\n",
            "f.toml:2: daemon.max_frame_bytes: expected `int` >= 1024",
        ),
        (
            "[daemon]\nmax_frame_bytes = 67108865\n",
            "f.toml:2: daemon.max_frame_bytes: expected `int` <= 67108864",
        ),
        (
            "[daemon]\nmax_connections = 0\n",
            "f.toml:2: daemon.max_connections: expected `int` >= 1",
        ),
        (
            "[daemon]\nmax_pending_handshakes = 0\n",
            "f.toml:2: daemon.max_pending_handshakes: expected `int` >= 1",
        ),
        (
            "[daemon]\nmax_pending_handshakes = 10001\n",
            "f.toml:2: daemon.max_pending_handshakes: expected `int` <= 10000",
        ),
        ("[logging]\n\nlevle = 'info'\n", "f.toml:3: logging.levle: unknown key"),
        ("[bogus]\nx = 1\n", "f.toml:1: bogus: unknown key"),
        (
            "[daemon]\nallowed_uids = [1, -2]\n",
            "f.toml:2: daemon.allowed_uids[1]: expected `int` >= 0",
        ),
        (
            "[supervision]\nstrategy = 'fastest'\n",
            "f.toml:2: supervision.strategy: invalid enum value 'fastest'",
        ),
        (
            "[components]\nok = 'a.b:c'\nbad = 'not a path'\n",
            "f.toml:3: components.bad: expected a `module:attribute` path",
        ),
        (
            "[daemon]\nrequest_timeout_s = 'soon'\n",
            "f.toml:2: daemon.request_timeout_s: expected `float`, got `str`",
        ),
    ],
)
def test_bad_values_and_unknown_keys_name_the_key_path_and_line(text: str, message: str) -> None:
    assert _error(text).message == message


def test_a_toml_syntax_error_names_the_file_and_line() -> None:
    err = _error("[daemon\n")
    assert err.message.startswith("f.toml: ") and "line 1" in err.message


def test_cross_field_and_socket_length_rules() -> None:
    assert (
        "max_request_timeout_s must be >="
        in _error("[daemon]\nrequest_timeout_s = 100.0\nmax_request_timeout_s = 10.0\n").message
    )
    long_path = "/tmp/" + "x" * 200 + ".sock"
    assert "longer than 107 bytes" in _error(f"[daemon]\nsocket = '{long_path}'\n").message


def test_secrets_are_masked_in_the_resolved_config() -> None:
    data = {
        "providers": {"a": {"api_key": "sk-live", "api_key_env": "", "model": "m"}},
        "token": {"nested": "x"},
    }
    assert mask_secrets(data) == {
        "providers": {"a": {"api_key": MASK, "api_key_env": "", "model": "m"}},
        "token": {"nested": MASK},
    }


def test_the_resolved_config_round_trips_through_its_toml() -> None:
    cfg = parse_config("[daemon]\nmax_connections = 7\n[components]\nx = 'pkg.mod:Thing'\n")
    text = to_toml(resolved(cfg))
    again = msgspec.convert(tomllib.loads(text), Config)
    assert again.daemon.max_connections == 7 and again.components == {"x": "pkg.mod:Thing"}


def test_config_check_prints_the_resolved_config_or_the_error(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text("[daemon]\nsocket = '/tmp/x.sock'\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["config", "check", "--config", str(good)], out=out, err=err) == 0
    assert 'socket = "/tmp/x.sock"' in out.getvalue()
    out = io.StringIO()
    assert main(["config", "check", "--config", str(good), "--json"], out=out, err=err) == 0
    assert json.loads(out.getvalue())["daemon"]["socket"] == "/tmp/x.sock"
    bad = tmp_path / "bad.toml"
    bad.write_text("[daemon]\nmax_connections = -1\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["config", "check", "--config", str(bad)], out=out, err=err) == 1
    assert err.getvalue() == (
        f"phloem: {bad}:2: daemon.max_connections: expected `int` >= 1 [config_invalid]\n"
    )
    missing = tmp_path / "missing.toml"
    assert main(["config", "check", "--config", str(missing)], out=out, err=err) == 1


def test_components_load_only_from_trusted_module_attribute_paths() -> None:
    assert load_component("phloem.config:Config") is Config
    with pytest.raises(PhloemError) as err:
        load_component("phloem.config:Nope")
    assert err.value.kind == "config_invalid"
    with pytest.raises(PhloemError) as err:
        load_component("os.path; import shutil")  # not a module:attribute shape: never imported
    assert err.value.kind == "config_invalid"


def test_the_shipped_config_is_valid_and_commented() -> None:
    path = ROOT / "conf" / "phloem.toml"
    assert isinstance(load_config(path), Config)
    assert path.read_text().count("#") > 20


def test_a_config_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    from phloem.base.settings import CONFIG_FILE_MAX_BYTES

    big = tmp_path / "big.toml"
    big.write_text("#" * CONFIG_FILE_MAX_BYTES)
    assert isinstance(load_config(big), Config)
    big.write_text("#" * (CONFIG_FILE_MAX_BYTES + 1))
    with pytest.raises(PhloemError) as err:
        load_config(big)
    assert err.value.kind == "config_invalid" and "larger than" in err.value.message


def test_config_check_masks_keys_but_shows_env_var_names_and_token_counts() -> None:
    data = {
        "providers": {
            "a": {"api_key": "sk-live", "api_key_env": "MY_KEY_VAR", "max_output_tokens": 512}
        },
        "x": {"access_token": "abc", "password": "hunter2"},
    }
    assert mask_secrets(data) == {
        "providers": {
            "a": {"api_key": MASK, "api_key_env": "MY_KEY_VAR", "max_output_tokens": 512}
        },
        "x": {"access_token": MASK, "password": MASK},
    }


# --- hostile config files: one line, exit 1, never a traceback, bounded reads ------------

BROKEN_MODULE = "raise RuntimeError('broken at import\\nsecond line')\n"


CHILD_ADDRESS_SPACE = 4 * 1024**3  # an unbounded read fails fast instead of eating the machine


def _limit_memory(pid: int) -> None:
    resource.prlimit(pid, resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))


def _bad_config(tmp: Path, case: str) -> tuple[str, list[str]]:
    """A hostile config for `case`: its path and what the one error line must contain."""
    (tmp / "brokenmod.py").write_text(BROKEN_MODULE)
    path = tmp / f"{case}.toml"
    if case == "deep_arrays":
        path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
        return str(path), [str(path), "nested too deeply"]
    if case == "deep_tables":
        path.write_text("a = " + "{b = " * 5000 + "1" + "}" * 5000 + "\n")
        return str(path), [str(path), "nested too deeply"]
    if case == "huge_integer":
        path.write_text("[daemon]\nmax_connections = " + "9" * 5000 + "\n")
        return str(path), [str(path)]
    if case == "dev_zero":
        return "/dev/zero", ["/dev/zero", "not a regular file"]
    if case == "fifo":
        os.mkfifo(tmp / "fifo")
        return str(tmp / "fifo"), [str(tmp / "fifo"), "not a regular file"]
    if case == "directory":
        return str(tmp), [str(tmp), "not a regular file"]
    if case == "service_raises":
        path.write_text("[services.extra]\nbad = 'brokenmod:Service'\n")
        where = f"{path}:2: services.extra.bad"
        return str(path), [where, "'brokenmod:Service'", "RuntimeError: broken at import"]
    if case == "function_agent_raises":
        path.write_text("[agents.functions.summarise]\nfn = 'brokenmod:summarise'\n")
        where = f"{path}:2: agents.functions.summarise.fn"
        return str(path), [where, "'brokenmod:summarise'", "RuntimeError: broken at import"]
    if case == "missing_attribute":
        path.write_text("[planning.planners]\nreport = 'json:NoSuchPlanner'\n")
        where = f"{path}:2: planning.planners.report"
        return str(path), [where, "'json:NoSuchPlanner'", "AttributeError"]
    raise AssertionError(case)


BAD_CONFIG_CASES = [
    "deep_arrays",
    "deep_tables",
    "huge_integer",
    "dev_zero",
    "fifo",
    "directory",
    "service_raises",
    "function_agent_raises",
    "missing_attribute",
]


BAD_CONFIG_COMMANDS = ["config check", "daemon"]
RUN_TIMEOUT_S = 150.0  # 18 interpreters at once on a loaded 2-core machine

Run = tuple[int, str, list[str], Path]  # exit code, stderr, wanted parts, socket path


@pytest.fixture(scope="module")
def bad_config_runs() -> Iterator[dict[tuple[str, str], Run]]:
    """Every (case, command) run at once as `python -m phloem ...` subprocesses."""
    root = short_tmpdir()
    started = {}
    for case in BAD_CONFIG_CASES:
        tmp = root / case
        tmp.mkdir()
        config, wanted = _bad_config(tmp, case)
        for command in BAD_CONFIG_COMMANDS:
            sock = tmp / f"{command.split()[0]}.sock"
            args = [*command.split(), "--config", config, "--socket", str(sock)]
            proc = subprocess.Popen(
                [PY, "-m", "phloem", *args],
                cwd=ROOT,
                env=dict(os.environ, PYTHONPATH=f"{tmp}{os.pathsep}{ROOT}"),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            _limit_memory(proc.pid)  # long before the interpreter reads any config
            started[case, command] = (proc, wanted, sock)
    runs: dict[tuple[str, str], Run] = {}
    deadline = time.monotonic() + RUN_TIMEOUT_S
    for key, (proc, wanted, sock) in started.items():
        try:
            _, stderr = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
            stderr = f"(did not finish in {RUN_TIMEOUT_S} s) {stderr}"
        runs[key] = (proc.returncode, stderr, wanted, sock)
    yield runs
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.timeout(RUN_TIMEOUT_S + 30)  # the first one waits for the fixture's runs
@pytest.mark.parametrize("command", BAD_CONFIG_COMMANDS)
@pytest.mark.parametrize("case", BAD_CONFIG_CASES)
def test_a_bad_config_is_one_line_exit_1_and_never_a_traceback(
    bad_config_runs: dict[tuple[str, str], Run], case: str, command: str
) -> None:
    code, stderr, wanted, sock = bad_config_runs[case, command]
    assert "Traceback" not in stderr, stderr
    assert code == 1, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("phloem: ") and lines[0].endswith(" [config_invalid]"), lines[0]
    for part in wanted:
        assert part in lines[0], (part, lines[0])
    assert not sock.exists()


def test_a_config_read_is_bounded_whatever_stat_says(tmp_path: Path) -> None:
    from phloem.base.settings import CONFIG_FILE_MAX_BYTES, read_toml

    os.mkfifo(tmp_path / "fifo")  # no writer: opening it for reading would block
    with pytest.raises(PhloemError) as err:
        read_toml(tmp_path / "fifo")
    assert err.value.kind == "config_invalid" and "not a regular file" in err.value.message
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (CONFIG_FILE_MAX_BYTES + 1))
    with pytest.raises(PhloemError) as err:
        read_toml(big)
    assert f"larger than {CONFIG_FILE_MAX_BYTES} bytes" in err.value.message


def test_a_component_error_is_one_line_naming_the_component_and_its_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "exitmod.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "brokenmod2.py").write_text(BROKEN_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PhloemError) as err:
        load_component("brokenmod2:thing", what="service 'x'")
    assert err.value.message == (
        "cannot load service 'x' 'brokenmod2:thing': RuntimeError: broken at import second line"
    )
    with pytest.raises(PhloemError) as err:  # a module that exits is an error, not an exit
        load_component("exitmod:thing")
    assert err.value.kind == "config_invalid" and "SystemExit: 3" in err.value.message


@pytest.mark.parametrize(
    "nested",
    [
        lambda n: "a = " + "[" * (n - 1) + "]" * (n - 1),  # the table itself is one level
        lambda n: "a = " + "{b = " * (n - 1) + "1" + "}" * (n - 1),
        lambda n: ".".join(f"k{i}" for i in range(n)) + " = 1",  # dotted keys nest too
        lambda n: "[" + ".".join(f"k{i}" for i in range(n - 1)) + "]\nx = 1",
    ],
    ids=["arrays", "inline_tables", "dotted_keys", "table_header"],
)
def test_toml_nesting_is_bounded_exactly_at_max_nesting_depth(nested: Any) -> None:
    from phloem.base.settings import parse_toml
    from phloem.protocols.depth import MAX_NESTING_DEPTH, nesting_depth

    assert nesting_depth(parse_toml(nested(MAX_NESTING_DEPTH), "ok.toml")) == MAX_NESTING_DEPTH
    with pytest.raises(PhloemError) as info:
        parse_toml(nested(MAX_NESTING_DEPTH + 1), "deep.toml")
    assert info.value.kind == "config_invalid"
    assert info.value.message == "deep.toml: nested too deeply (more than 128 levels)"


def test_the_version_key_absent_is_one_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    from phloem.config import CONFIG_VERSION

    assert parse_config("").version == CONFIG_VERSION == 1
    assert parse_config("version = 1\n").version == 1
    with pytest.raises(PhloemError, match="version: 2 is newer") as newer:
        load_config(_write_file(tmp_path, "version = 2\n"))
    assert newer.value.kind == "config_invalid"
    with pytest.raises(PhloemError):
        parse_config("version = 0\n")  # no format before 1: nothing to upgrade


def test_relative_paths_are_anchored_to_the_config_files_directory(tmp_path: Path) -> None:
    conf = tmp_path / "etc"
    conf.mkdir()
    path = conf / "phloem.toml"
    path.write_text(
        '[sessions]\ndir = "state/sessions"\nworkdir = "/abs/ws"\n'
        '[instructions]\nskill_roots = ["skills", "~/s", "/x"]\n'
        '[instructions.foreign]\ntrusted_roots = ["../repo"]\n'
        '[mcp.servers.m]\ncommand = ["x"]\ncwd = "srv"\n'
        '[agents.llm.a]\nprovider = "p"\nworkdir = "ws"\n'
        '[providers.p]\nprotocol = "openai-chat"\nmodel = "m"\n'
        'base_url = "http://127.0.0.1:9/v1"\nchat_token_limit = "max_tokens"\n'
    )
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    old = os.getcwd()
    os.chdir(elsewhere)
    try:
        config = load_config(os.path.relpath(path, elsewhere))
    finally:
        os.chdir(old)
    base = conf.resolve()
    assert config.sessions.dir == str(base / "state/sessions")
    assert config.sessions.workdir == "/abs/ws"
    assert config.instructions.skill_roots == [str(base / "skills"), "~/s", "/x"]
    assert config.instructions.foreign.trusted_roots == [str(base / "../repo")]
    assert config.mcp.servers["m"].cwd == str(base / "srv")
    assert config.agents.llm["a"].workdir == str(base / "ws")
    assert parse_config('[sessions]\ndir = "rel"\n').sessions.dir == "rel"  # no file: as given


def _write_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "phloem.toml"
    path.write_text(text)
    return path
