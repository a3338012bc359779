"""Provider configuration and the `model list` / `model probe` / `ask` commands, run as
real subprocesses against the loopback fake provider."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from phloem.cli.main import main as phloem_main
from phloem.models.gemini import GeminiModel
from phloem.models.oneshot import PROBE_MARKER, PROBE_TOOL
from phloem.models.openai import OpenAIModel
from phloem.models.providers import (
    ProviderRegistry,
    build_model,
    decode_providers,
    load_providers,
)
from phloem.protocols.errors import PhloemError
from phloem.protocols.model import ModelError
from tests.helpers import ROOT, DaemonProc
from tests.models.fake_provider import (
    FakeProvider,
    Reply,
    chat_calls,
    chat_tool_call,
    gemini_call,
    gemini_text,
    responses_text,
)

pytestmark = pytest.mark.timeout(30)
KEY = "sk-cli-secret-999"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def phloem(
    *args: str, env: dict[str, str] | None = None, module: str = "phloem"
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PHLOEM_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=25,
        env=full_env,
        check=False,
    )


def in_process(*args: str) -> tuple[int, str, str]:
    """Run a command in this process (for the cases that need no subprocess)."""
    out, err = io.StringIO(), io.StringIO()
    code = phloem_main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


def write_config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "phloem.toml"
    path.write_text(
        f"""
[daemon]
socket = ""

[providers.local]
protocol = "openai-chat"
model = "qwen3:8b"
base_url = "{base_url}/v1"
api_key_env = "LOCAL_KEY"
chat_token_limit = "max_tokens"

[providers.flash]
protocol = "gemini"
model = "gemini-test"
base_url = "{base_url}"
""",
        encoding="utf-8",
    )
    return path


# -- configuration ------------------------------------------------------------------


def test_providers_decode_with_defaults_and_build_models(tmp_path: Path) -> None:
    providers = load_providers(write_config(tmp_path, "http://127.0.0.1:1"))
    assert set(providers) == {"local", "flash"}
    local = build_model(providers["local"], {"LOCAL_KEY": KEY})
    assert isinstance(local, OpenAIModel) and local.protocol == "chat_completions"
    flash = build_model(providers["flash"], {})
    assert isinstance(flash, GeminiModel)


def test_missing_key_variable_is_config_invalid_naming_the_variable(tmp_path: Path) -> None:
    providers = load_providers(write_config(tmp_path, "http://127.0.0.1:1"))
    with pytest.raises(ModelError) as info:
        build_model(providers["local"], {})
    assert info.value.kind == "config_invalid"
    assert info.value.message == "environment variable LOCAL_KEY (api_key_env) is not set"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"x": {"protocol": "gemini", "model": "m", "api_key": "sk"}},
            "providers.x.api_key: unknown key",
        ),
        ({"x": {"protocol": "grpc", "model": "m"}}, "providers.x.protocol"),
        (
            {"x": {"protocol": "openai-chat", "model": "m"}},
            "chat_token_limit is required for openai-chat",
        ),
        ({"x": {"protocol": "gemini", "model": "m", "max_retries": 11}}, "providers.x.max_retries"),
        (
            {"x": {"protocol": "gemini", "model": "m", "api_key_env": "BAD-NAME"}},
            "providers.x.api_key_env",
        ),
        ({"bad name": {"protocol": "gemini", "model": "m"}}, "provider names"),
        (
            {"x": {"protocol": "gemini", "model": "m", "base_url": "http://u:p@h/v1"}},
            "providers.x: base_url must not contain userinfo",
        ),
    ],
)
def test_provider_config_errors_name_the_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(ModelError) as info:
        decode_providers(table)
    assert info.value.kind == "config_invalid"
    assert message in info.value.message


# -- CLI ----------------------------------------------------------------------------


def test_model_list_shows_providers_but_never_keys(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_KEY", KEY)
    config = write_config(tmp_path, fake.base_url)
    code, out, err = in_process("model", "list", "--config", str(config), "--json")
    assert code == 0, err
    rows = json.loads(out)["providers"]
    assert [(r["name"], r["protocol"], r["api_key"]) for r in rows] == [
        ("local", "openai-chat", "set"),
        ("flash", "gemini", "none"),
    ]
    assert KEY not in out + err
    monkeypatch.delenv("LOCAL_KEY")
    code, out, _ = in_process("model", "list", "--config", str(config))
    assert code == 0
    assert "key: LOCAL_KEY (missing)" in out.splitlines()[0]


def test_model_list_asks_the_running_daemon_unless_given_a_config(tmp_short: Path) -> None:
    """Without --config it shows what the daemon runs with (a local ./phloem.toml that
    says otherwise is not read; the key is checked in the daemon's environment); with
    --config, the file; with no daemon, the file found, and it says so."""
    daemon_config = tmp_short / "daemon.toml"
    daemon_config.write_text(
        '[providers.remote]\nprotocol = "gemini"\nmodel = "gemini-daemon"\n'
        'api_key_env = "DAEMON_ONLY_KEY"\n'
    )
    local = tmp_short / "here"
    local.mkdir()
    (local / "phloem.toml").write_text(
        '[providers.local]\nprotocol = "openai-chat"\nmodel = "m"\n'
        'base_url = "http://127.0.0.1:9/v1"\nchat_token_limit = "max_tokens"\n'
    )
    socket = tmp_short / "s" / "d.sock"
    env = {"XDG_STATE_HOME": str(tmp_short / "state"), "DAEMON_ONLY_KEY": KEY}
    daemon = DaemonProc(socket, daemon_config, env=env).wait_ready()

    def model_list(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "phloem", "model", "list", *args],
            check=False,
            cwd=local,
            env={**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(tmp_short)},
            capture_output=True,
            text=True,
            timeout=25,
        )

    try:
        asked = model_list("--socket", str(socket))
        assert asked.returncode == 0, asked.stderr
        assert asked.stdout.splitlines() == [
            "remote           gemini            gemini-daemon                "
            "https://generativelanguage.googleapis.com/v1beta  key: DAEMON_ONLY_KEY (set)",
            f"from the daemon on {socket}",
        ]
        as_json = json.loads(model_list("--socket", str(socket), "--json").stdout)
        assert [r["name"] for r in as_json["providers"]] == ["remote"]
        assert as_json["source"] == f"the daemon on {socket}"
        assert KEY not in asked.stdout + asked.stderr
        from_file = model_list("--socket", str(socket), "--config", str(daemon_config))
        assert from_file.returncode == 0
        assert "key: DAEMON_ONLY_KEY (missing)" in from_file.stdout  # not in this env
        assert from_file.stdout.splitlines()[-1] == f"from {daemon_config} (--config)"
    finally:
        assert daemon.stop() == 0
    none = model_list("--socket", str(socket))
    assert none.returncode == 0, none.stderr
    assert none.stdout.splitlines()[0].startswith("local ")
    assert none.stdout.splitlines()[-1] == (f"from {local / 'phloem.toml'} (no daemon on {socket})")


def test_probe_a_configured_provider_over_http(fake: FakeProvider, tmp_path: Path) -> None:
    config = write_config(tmp_path, fake.base_url)
    args = json.dumps({"marker": PROBE_MARKER})
    fake.add(chat_calls(chat_tool_call(PROBE_TOOL, args)))
    done = phloem("model", "probe", "local", "--config", str(config), env={"LOCAL_KEY": KEY})
    assert done.returncode == 0, done.stderr
    assert "tool calling works" in done.stdout
    sent = fake.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json["max_tokens"] == 64


def test_probe_failure_exits_1_with_the_kind(fake: FakeProvider) -> None:
    fake.add(gemini_text("I would rather talk"))
    code, out, err = in_process(
        "model", "probe", "--protocol", "gemini", "--base-url", fake.base_url, "--model", "g"
    )
    assert (code, out) == (1, "")
    assert err.strip().endswith("[tool_calling_unsupported]")


def test_adhoc_ask_prints_the_answer(fake: FakeProvider) -> None:
    fake.add(responses_text("Paris."))
    done = phloem(
        "ask",
        "--protocol",
        "openai-responses",
        "--base-url",
        fake.base_url + "/v1",
        "--model",
        "gpt-x",
        "--api-key-env",
        "ADHOC_KEY",
        "capital of France?",
        env={"ADHOC_KEY": KEY},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Paris.\n"
    body = fake.requests[0].json
    assert body["input"][0]["content"][0]["text"] == "capital of France?"
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_ask_json_reports_errors_without_leaking_the_key(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_KEY", KEY)
    config = write_config(tmp_path, fake.base_url)
    fake.add(Reply(status=401, body=f'{{"error": {{"message": "bad key {KEY}"}}}}'.encode()))
    code, out, err = in_process("ask", "local", "hi", "--config", str(config), "--json")
    assert code == 1
    result = json.loads(out)
    assert result["error"]["kind"] == "execution_failed"
    assert result["metadata"]["model_calls"] == 1
    assert KEY not in out + err


def test_usage_errors_are_reported_by_kind(fake: FakeProvider, tmp_path: Path) -> None:
    config = write_config(tmp_path, fake.base_url)
    code, _, err = in_process("ask", "nope", "hi", "--config", str(config))
    assert code == 1 and "[unknown_provider]" in err
    code, _, err = in_process("ask", "local", "hi", "--config", str(config), "--model", "x")
    assert code == 1 and "[invalid_argument]" in err
    code, _, err = in_process("ask", "hi")
    assert (
        code == 1
        and err == "phloem: give a provider NAME, or --protocol and --model [invalid_argument]\n"
    )
    fake.add(Reply(status=400))
    code, out, err = in_process("ask", "flash", "hi", "--config", str(config), "--json")
    assert code == 1 and "[execution_failed]" in err
    assert json.loads(out)["error"]["kind"] == "execution_failed"


def test_gemini_probe_sends_the_forced_ping(fake: FakeProvider) -> None:
    fake.add(gemini_call(PROBE_TOOL, {"marker": PROBE_MARKER}))
    code, out, err = in_process(
        "model",
        "probe",
        "--protocol",
        "gemini",
        "--base-url",
        fake.base_url,
        "--model",
        "g",
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["metadata"]["model_calls"] == 1
    assert fake.requests[0].json["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [PROBE_TOOL]}
    }


def test_the_main_phloem_command_carries_probe_and_ask(fake: FakeProvider, tmp_path: Path) -> None:
    config = write_config(tmp_path, fake.base_url)
    args = json.dumps({"marker": PROBE_MARKER})
    fake.add(chat_calls(chat_tool_call(PROBE_TOOL, args)), responses_text("pong"))
    env = {"LOCAL_KEY": KEY}
    probe = phloem("model", "probe", "local", "--config", str(config), env=env, module="phloem")
    assert probe.returncode == 0, probe.stderr
    ask = phloem(
        "ask",
        "--protocol",
        "openai-responses",
        "--base-url",
        fake.base_url,
        "--model",
        "m",
        "ping?",
        module="phloem",
    )
    assert (ask.returncode, ask.stdout) == (0, "pong\n"), ask.stderr


def test_provider_registry_builds_each_model_once_and_knows_only_configured_names(
    tmp_path: Path,
) -> None:
    registry = ProviderRegistry(
        load_providers(write_config(tmp_path, "http://127.0.0.1:1")), {"LOCAL_KEY": KEY}
    )
    assert registry.names() == ["flash", "local"]
    assert registry.get("local") is registry.get("local")
    with pytest.raises(PhloemError) as info:
        registry.get("os:system")
    assert info.value.kind == "unknown_provider"
    registry.close()


def test_the_shipped_config_declares_example_providers() -> None:
    root = Path(__file__).resolve().parents[2]
    providers = load_providers(root / "conf" / "phloem.toml")
    assert providers["flash"].protocol == "gemini"
    assert providers["flash"].api_key_env == "PHLOEM_GEMINI_API_KEY"
    assert providers["local"].chat_token_limit == "max_tokens"


def test_ask_goes_through_the_configured_plugins(fake: FakeProvider, tmp_path: Path) -> None:
    fake.add(responses_text("Paris."))
    config = tmp_path / "phloem.toml"
    config.write_text(
        "[providers.r]\n"
        'protocol = "openai-responses"\n'
        'model = "gpt-x"\n'
        f'base_url = "{fake.base_url}/v1"\n'
        "[plugins.rules]\n"
        'builtin = "global_instruction"\n'
        'config = { instruction = "House rules." }\n'
    )
    done = phloem("ask", "r", "capital of France?", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Paris.\n"
    assert fake.requests[0].json["instructions"] == "House rules."
