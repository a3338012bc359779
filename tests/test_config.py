"""Configuration: defaults, errors naming key paths and lines, masking, `config check`."""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import msgspec
import pytest

from phloem.cli.main import main
from phloem.config import (
    MASK,
    Config,
    default_socket_path,
    load_config,
    mask_secrets,
    parse_config,
    resolved,
    to_toml,
)
from phloem.protocols.errors import PhloemError
from phloem.settings import load_component
from tests.helpers import ROOT

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


def test_the_default_socket_follows_xdg_runtime_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert default_socket_path() == tmp_path / "phloem" / "phloem.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.chdir(tmp_path)
    assert default_socket_path() == tmp_path / ".phloem" / "phloem.sock"


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
    from phloem.settings import CONFIG_FILE_MAX_BYTES

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
