"""The reload registry: changed keys by name, reloaders applied by section, failures
reported (their sections keep the old values), the rest named as restart-only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import phloem
from phloem.actors import reload
from phloem.actors.reload import ReloadContext, changed_keys, register_reloader
from phloem.config import parse_config
from tests.helpers import raises_kind


@pytest.fixture
def scratch_reloaders() -> Iterator[list[str]]:
    seen: list[str] = []
    before = dict(reload._registry)
    yield seen
    reload._registry.clear()
    reload._registry.update(before)


def test_changed_keys_are_dotted_and_recurse_into_tables() -> None:
    old = parse_config("[daemon]\nmax_connections = 5\n[components]\na = 'm:a'\n")
    new = parse_config("[daemon]\nmax_connections = 6\n[components]\nb = 'm:b'\n")
    assert changed_keys(old, new) == ["components.a", "components.b", "daemon.max_connections"]
    assert changed_keys(old, old) == []


def test_tree_reload_applies_registered_sections_and_reports_the_rest(
    scratch_reloaders: list[str],
) -> None:
    def tools(ctx: ReloadContext) -> None:
        scratch_reloaders.append(f"tools {ctx.new.tools.bash_max_memory_bytes}")
        assert ctx.actor("echo") is not None and ctx.actor("nobody") is None

    def refuse(ctx: ReloadContext) -> None:
        raise ValueError("not today")

    register_reloader("test-tools", ("tools",), tools)
    register_reloader("test-supervision", ("supervision",), refuse)
    with pytest.raises(ValueError):
        register_reloader("test-tools", ("tools",), refuse)
    with phloem.Tree.start() as tree:
        new = parse_config(
            "[tools]\nbash_max_memory_bytes = 134217728\n"
            "[supervision]\nintensity = 7\n[daemon]\nmax_connections = 9\n"
        )
        report = tree.reload(new)
        assert scratch_reloaders == ["tools 134217728"]
        assert report.applied == ["test-tools"]
        assert report.failed == ["test-supervision: ValueError: not today"]
        assert report.restart_needed == ["daemon.max_connections", "supervision.intensity"]
        assert tree.config.tools.bash_max_memory_bytes == 134217728  # in force now
        assert tree.config.supervision.intensity == 3  # refused: the old value stays
        assert tree.config.daemon.max_connections == 128
        assert tree.reload(tree.config).changed_count == 0


def test_a_config_that_does_not_load_changes_nothing(tmp_path: object) -> None:
    from pathlib import Path

    bad = Path(str(tmp_path)) / "bad.toml"
    bad.write_text("[components]\nx = 'no_such_module_xyz:thing'\n")
    with phloem.Tree.start() as tree:
        before = tree.config
        assert raises_kind(tree.reload, bad) == "config_invalid"
        assert tree.config is before
