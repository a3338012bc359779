"""`[plugins.NAME]` in the config, the daemon's plugins, and `phloem plugin list`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec
import pytest

import phloem
from phloem.config import parse_config
from phloem.protocols.errors import PhloemError
from tests.helpers import run_cli, running_daemon, wait_until

pytestmark = pytest.mark.timeout(120)

CONFIG = """
[plugins.audit]
plugin = "tests.actors.plugins.sample_plugins:audit_factory"
config = { label = "x" }

[plugins.rules]
builtin = "global_instruction"
config = { instruction = "House rules." }
failure = "closed"

[plugins.counter]
plugin = "tests.actors.plugins.sample_plugins:Counter"
stateful = true
"""


def test_config_plugins_run_in_declaration_order_and_apply_to_every_run() -> None:
    config = parse_config(CONFIG)
    assert list(config.plugins) == ["audit", "rules", "counter"]
    with phloem.Tree.start(config) as tree:
        with tree.client() as client:
            names = [p.name for p in client.list_plugins()]
        assert names == ["audit", "rules", "counter"]
        from phloem.agents import LlmAgent
        from phloem.models import ScriptedModel

        model = ScriptedModel(["ok"])
        assert tree.run_agent(LlmAgent("f", "", model, "Be brief."), input="hi").ok
        assert model.requests[0].system_instruction == "House rules.\n\nBe brief."
        with tree.client() as client:
            counter = next(p for p in client.list_plugins() if p.name == "counter")
        assert counter.status is not None and counter.status.generation == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[plugins.a]\nmode = "observe"\n', "exactly one of"),
        ('[plugins.a]\nbuiltin = "logging"\ntimeout_ms = 120001\n', "timeout_ms"),
        ('[plugins.a]\nbuiltin = "logging"\nmax_queue = 4097\n', "max_queue"),
        ('[plugins.a]\nbuiltin = "logging"\nmax_state_bytes = 67108865\n', "max_state_bytes"),
        ('[plugins.a]\nbuiltin = "nope"\n', "builtin"),
        ('[plugins.a]\nbuiltin = "logging"\ninit_timeout_ms = 30001\n', "init_timeout_ms"),
        ('[plugins.a]\nbuiltin = "logging"\nmax_value_bytes = 0\n', "max_value_bytes"),
        ('[plugins.a]\nbuiltin = "logging"\nmax_memory_bytes = 1024\n', "max_memory_bytes"),
        ("".join(f'[plugins.p{i}]\nbuiltin = "logging"\n' for i in range(129)), "at most 128"),
        (
            '[plugins.a]\nbuiltin = "logging"\nconfig = { big = "' + "x" * (1024 * 1024) + '" }\n',
            "config is",
        ),
    ],
)
def test_bad_plugin_config_is_refused(text: str, message: str) -> None:
    with pytest.raises(PhloemError) as err:
        parse_config(text)
    assert err.value.kind == "config_invalid" and message in err.value.message


def test_edges_are_accepted() -> None:
    text = "".join(f'[plugins.p{i}]\nbuiltin = "logging"\n' for i in range(128))
    assert len(parse_config(text).plugins) == 128
    edge = parse_config('[plugins.a]\nbuiltin = "logging"\ntimeout_ms = 120000\nmax_queue = 4096\n')
    assert edge.plugins["a"].timeout_ms == 120000


def test_a_bad_builtin_config_is_refused_with_the_file() -> None:
    text = '[plugins.a]\nbuiltin = "tool_retry"\nconfig = { max_attempts = 0 }\n'
    with pytest.raises(PhloemError) as err:
        parse_config(text, "phloem.toml")
    assert err.value.kind == "config_invalid"
    assert err.value.message == (
        "phloem.toml: plugins.a: builtin tool_retry: config.max_attempts: expected `int` >= 1"
    )
    factory = 'plugin = "tests.actors.plugins.sample_plugins:failing_factory"\n'
    with pytest.raises(PhloemError) as err:
        phloem.Tree.start(parse_config("[plugins.a]\n" + factory))
    assert err.value.kind == "config_invalid" and "ValueError" in err.value.message
    assert "sk-abcdefghijklmnopqrstu" not in err.value.message


def test_plugin_list_shows_hooks_mode_policy_and_instance_status() -> None:
    with running_daemon(CONFIG) as daemon:
        out = run_cli("plugin", "list", "--socket", str(daemon.socket))
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0].startswith("audit") and "before_model" in lines[0]
        assert "failure=closed" in out.stdout and "builtin:global_instruction" in out.stdout
        assert "instance:counter: available" in out.stdout and "generation=0" in out.stdout
        data = json.loads(
            run_cli("plugin", "list", "--json", "--socket", str(daemon.socket)).stdout
        )
        assert [p["name"] for p in data] == ["audit", "rules", "counter"]
        assert data[1]["mode"] == "intervene" and data[0]["mode"] == "observe"
        tree = run_cli("tree", "--socket", str(daemon.socket))
        assert "instance:counter" in tree.stdout

        async def listed() -> list[str]:
            async with await phloem.AsyncClient.connect(str(daemon.socket)) as client:
                return [p.name for p in await client.list_plugins()]

        assert asyncio.run(listed()) == ["audit", "rules", "counter"]
        check = run_cli("config", "check", "--config", str(daemon.config))
        assert check.returncode == 0 and "[plugins.rules]" in check.stdout


def test_the_commented_built_ins_in_conf_phloem_toml_are_valid() -> None:
    import re

    from tests.helpers import ROOT

    text = (ROOT / "conf" / "phloem.toml").read_text().split("# --- plugins:", 1)[1]
    text = text.split("\n# --- ", 1)[0]  # up to the next section's banner
    lines = [line[2:] for line in text.splitlines() if line.startswith("# ")]
    toml = "\n".join(
        line.split("  #")[0] for line in lines if re.match(r"^(\[plugins\.|\w+ = )", line)
    )
    toml = toml.replace('plugin = "mypkg.guard:GuardPlugin"', 'builtin = "logging"')
    config = parse_config(toml)
    assert list(config.plugins) == [
        "house_rules",
        "trim_context",
        "retry_hints",
        "audit_log",
        "guard",
    ]
    assert {c.builtin for c in config.plugins.values()} == {
        "global_instruction",
        "context_filter",
        "tool_retry",
        "logging",
    }
    with phloem.Tree.start(config) as tree, tree.client() as client:
        assert len(client.list_plugins()) == 5


def test_agent_run_prints_an_open_failure_as_a_warning() -> None:
    config = (
        "[agents.functions.f]\n"
        'fn = "tests.actors.plugins.sample_plugins:one"\n'
        'output_key = "x"\n'
        "[plugins.broken]\n"
        'plugin = "tests.actors.plugins.sample_plugins:Broken"\n'
    )
    with running_daemon(config) as daemon:
        out = run_cli("agent", "run", "f", "--socket", str(daemon.socket))
        assert out.returncode == 0, out.stderr
        assert "warning: plugin_exception: plugin 'broken' before_agent" in out.stdout
        with phloem.Client.connect(str(daemon.socket)) as client:
            run = client.run_agent("f")
        assert run.ok and [w.code for w in run.warnings] == ["plugin_exception"]


def test_a_configured_isolated_instance_whose_init_fails_is_unavailable() -> None:
    text = (
        "[plugins.slow]\n"
        'plugin = "tests.actors.plugins.sample_plugins:Overlap"\n'
        "stateful = true\n"
        "isolate = true\n"
        "init_timeout_ms = 300\n"
        "config = { slow_init = 5 }\n"
    )
    with phloem.Tree.start(parse_config(text)) as tree:

        def status() -> Any:
            with tree.client() as client:
                return client.list_plugins()[0].status

        wait_until(lambda: not status().available and "init" in status().exit, timeout=30)
        wait_until(
            lambda: "instance:slow" not in str(msgspec.to_builtins(tree.snapshot())), timeout=30
        )
