"""docs/reference/ is what the code renders now: config keys, CLI, error kinds, limits."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import msgspec
import pytest

from phloem.cli.main import build_parser
from phloem.config import Config
from phloem.protocols.errors import ErrorKind
from tests.docs import reference
from tests.docs.reference import (
    DASH,
    REFERENCE_DIR,
    REGENERATE,
    human_bytes,
    limit_constants,
    render_all,
    source_docs,
    stale_pages,
    write_all,
)

pytestmark = pytest.mark.timeout(120)


def test_the_committed_reference_is_what_the_code_renders() -> None:
    stale = stale_pages(REFERENCE_DIR)
    assert not stale, (
        f"docs/reference/ is out of date; run `{REGENERATE}` (python -m tests.docs) and "
        "commit the result:\n" + "\n".join(f"{p.name}: {why}" for p, why in stale)
    )


def test_a_changed_missing_or_extra_page_is_reported(tmp_path: Path) -> None:
    write_all(tmp_path)
    assert stale_pages(tmp_path) == []
    (tmp_path / "errors.md").write_text("# Error kinds\nhand-edited\n")
    (tmp_path / "cli.md").unlink()
    (tmp_path / "notes.md").write_text("by hand\n")
    reasons = {p.name: why for p, why in stale_pages(tmp_path)}
    assert reasons["cli.md"] == "missing"
    assert reasons["notes.md"] == "not generated"
    assert reasons["errors.md"].startswith("line 2 is 'hand-edited', the code gives ")
    write_all(tmp_path)
    assert stale_pages(tmp_path) == [] and not (tmp_path / "notes.md").exists()


def _config_keys(info: msgspec.inspect.Type, path: str) -> list[str]:
    while isinstance(info, msgspec.inspect.Metadata):
        info = info.type
    keys: list[str] = []
    if isinstance(info, msgspec.inspect.StructType):
        for field in info.fields:
            keys.append(f"{path}{field.encode_name}")
            keys += _config_keys(field.type, f"{path}{field.encode_name}.")
    elif isinstance(info, msgspec.inspect.DictType):
        keys += _config_keys(info.value_type, f"{path}NAME.")
    elif isinstance(info, msgspec.inspect.UnionType):
        for member in info.types:
            keys += _config_keys(member, path)
    return keys


def test_the_config_page_has_every_section_and_key() -> None:
    page = render_all()["config.md"]
    keys = _config_keys(msgspec.inspect.type_info(Config), "")
    assert len(keys) > 200  # every section's keys, not just the top level
    for key in keys:
        section, _, name = key.rpartition(".")
        heading = f"## {section}\n" if section else "## top level\n"
        body = page.split(heading, 1)[1].split("\n## ", 1)[0]
        assert f"| `{name}` |" in body, f"{key} is missing from config.md"
    frame = f"| `max_frame_bytes` | int | `4194304 (4 MiB)` | `1024 (1 KiB)` {DASH} `67108864"
    assert frame in page
    assert f"| `refresh_ms` | int | `200` | `50` {DASH} `10000` | How often the tree" in page


def test_every_config_key_has_a_meaning() -> None:
    root = msgspec.inspect.type_info(Config)
    assert isinstance(root, msgspec.inspect.StructType)
    missing = []
    for section in reference._sections(root, ""):
        docs = reference.class_field_docs(section.info.cls)
        for field in section.info.fields:
            if not docs.get(field.name, "").strip():
                key = f"{section.path}.{field.encode_name}" if section.path else field.encode_name
                missing.append(key)
    assert not missing, (
        f"{len(missing)} config keys have no meaning in config.md; write a comment above or "
        "beside each field (a comment above documents only the one field it touches):\n"
        + "\n".join(missing)
    )
    rows = [line for line in render_all()["config.md"].splitlines() if line.startswith("| `")]
    assert rows and not [row for row in rows if row.endswith("|  |")]


def test_an_inherited_field_has_the_words_of_the_class_that_declares_it() -> None:
    from phloem.actors.plugins.settings import PluginConfig, PluginOptions

    assert "mode" not in PluginConfig.__annotations__  # declared by PluginOptions
    docs = reference.class_field_docs(PluginConfig)
    assert docs["mode"] == reference.class_field_docs(PluginOptions)["mode"]
    assert "the plugin's own default" in docs["mode"]
    assert docs["builtin"]  # and its own fields


def test_the_cli_page_has_every_command_and_option() -> None:
    page = render_all()["cli.md"]
    parser = build_parser()

    def walk(name: str, p: argparse.ArgumentParser) -> None:
        heading = f"## {name}\n"
        assert heading in page, f"{name} is missing from cli.md"
        body = page.split(heading, 1)[1].split("\n## ", 1)[0]
        for action in p._actions:
            shown = action.option_strings and action.dest not in reference.COMMON_OPTIONS
            if shown and not isinstance(action, argparse._HelpAction):
                assert action.option_strings[-1] in body, (name, action.option_strings)
        for sub, child in reference._subcommands(p):
            walk(f"{name} {sub}", child)

    walk("phloem", parser)
    assert "| `--timeout TIMEOUT` | seconds to wait for the daemon's process to exit" in page


def test_the_errors_page_has_every_kind_with_its_meaning() -> None:
    page = render_all()["errors.md"]
    for kind in ErrorKind:
        assert f"| `{kind.value}` | {kind.meaning.replace('|', chr(92) + '|')} |" in page, kind
    assert "## Shared by several areas\n" in page


def test_the_limits_rule_takes_numbers_and_ranges_of_named_constants_only() -> None:
    limits = {(m.module, m.name): m for m in limit_constants()}
    assert limits[("phloem.config", "DEFAULT_MAX_FRAME_BYTES")].value == 4 * 1024 * 1024
    assert limits[("phloem.config", "MAX_FRAME_BYTES_RANGE")].value == (1024, 64 * 1024 * 1024)
    assert ("phloem.actors.live.settings", "DEFAULT_MODEL") not in limits  # a string
    assert ("phloem.protocols.limits", "_EXACT_INTEGRAL_FLOAT") not in limits  # private
    assert all(
        isinstance(m.value, int | float | tuple) and not isinstance(m.value, bool)
        for m in limits.values()
    )
    page = render_all()["limits.md"]
    assert "| `DEFAULT_MAX_FRAME_BYTES` | `4194304 (4 MiB)` | `phloem.config` |" in page


def test_source_docs_reads_the_comment_above_beside_and_the_string_under() -> None:
    source = (
        "# Above A.\nA = 1  # beside A\nB = 2\n"
        '"""Under B."""\n\n# Above C, one line\n# and another.\nC: int = 3\nD = 4\n'
    )
    docs = source_docs(source, ast.parse(source).body)
    assert docs == {
        "A": "Above A. beside A",
        "B": "Under B.",
        "C": "Above C, one line and another.",
        "D": "",
    }


def test_human_bytes_names_exact_binary_units_only() -> None:
    assert human_bytes(4 * 1024 * 1024) == "4194304 (4 MiB)"
    assert human_bytes(3 * 1024) == "3072 (3 KiB)"
    assert human_bytes(1536) == "1536"  # 1.5 KiB: no exact unit, the number alone
    assert human_bytes(2 * 1024**4) == "2199023255552 (2 TiB)"
    assert human_bytes(1000) == "1000"
