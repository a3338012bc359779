"""The bash tool's memory cap (`[tools] bash_max_memory_bytes`): the resident memory of
the command's whole process group, enforced while it runs; over it the call ends
`killed` with `memory_exceeded` and a reason saying so."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from phloem.cli.main import main
from phloem.config import parse_config
from phloem.protocols.errors import PhloemError
from phloem.supervision.spec import Limits
from phloem.tools import ToolContext, coding_tools, default_registry
from phloem.tools.bash import BashTool
from phloem.tools.settings import BASH_MAX_MEMORY_DEFAULT, ToolsConfig

pytestmark = pytest.mark.timeout(60)

MiB = 1024 * 1024
CAP = 256 * MiB


def _hog(mib: int, seconds: float = 5) -> str:
    code = f"b = bytearray({mib} * 1024 * 1024); import time; time.sleep({seconds})"
    return f"{sys.executable} -c '{code}'"


def test_a_command_over_the_cap_is_killed_with_a_clear_reason(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = BashTool(max_memory_bytes=CAP).run({"command": _hog(600)}, ctx)
    assert time.monotonic() - started < 4  # stopped, not left to sleep its 5 s
    assert result["killed"] is True and result["memory_exceeded"] is True
    assert (result["exit_code"], result["signal"], result["timed_out"]) == (-1, "SIGKILL", False)
    assert "memory" in result["kill_reason"] and "256 MiB" in result["kill_reason"]
    assert "bash_max_memory_bytes" in result["kill_reason"]


def test_output_written_before_the_kill_is_returned(ctx: ToolContext) -> None:
    command = f"echo before; echo warn >&2; {_hog(600)}; echo after"
    result = BashTool(max_memory_bytes=CAP).run({"command": command}, ctx)
    assert result["memory_exceeded"] is True and result["killed"] is True
    assert (result["stdout"], result["stderr"]) == ("before\n", "warn\n")


def test_the_cap_is_the_supervision_rss_cap_of_the_child() -> None:
    bash = BashTool(max_memory_bytes=CAP)
    assert bash.limits.max_rss_bytes == CAP and bash.limits.rss_cap == CAP
    assert bash.limits.max_memory_bytes == 4 * CAP  # the RLIMIT_AS backstop
    with pytest.raises(ValueError, match=r"max_rss_bytes"):
        BashTool(limits=Limits(max_rss_bytes=CAP))


def test_the_cap_covers_the_whole_process_group(ctx: ToolContext) -> None:
    command = f"{_hog(100)} & {_hog(100)} & {_hog(100)} & wait"  # each one under the cap
    result = BashTool(max_memory_bytes=CAP).run({"command": command}, ctx)
    assert result["killed"] is True and result["memory_exceeded"] is True


def test_a_command_under_the_cap_runs_to_its_end(ctx: ToolContext) -> None:
    result = BashTool(max_memory_bytes=CAP).run({"command": _hog(64, 0.3) + "; echo done"}, ctx)
    assert (result["exit_code"], result["stdout"], result["killed"]) == (0, "done\n", False)
    assert "memory_exceeded" not in result and "kill_reason" not in result


def test_the_cap_defaults_to_2_gib_and_is_range_checked() -> None:
    assert BASH_MAX_MEMORY_DEFAULT == 2 * 1024**3
    assert BashTool().max_memory_bytes == BASH_MAX_MEMORY_DEFAULT
    with pytest.raises(ValueError, match=r"max_memory_bytes must be between"):
        BashTool(max_memory_bytes=MiB)


def test_the_tools_section_sets_the_cap_of_the_coding_tools() -> None:
    config = parse_config("[tools]\nbash_max_memory_bytes = 268435456\n")
    assert config.tools == ToolsConfig(bash_max_memory_bytes=CAP)
    bash = next(t for t in coding_tools(config.tools) if t.name == "bash")
    assert isinstance(bash, BashTool) and bash.max_memory_bytes == CAP
    bash = default_registry(config.tools).get("bash")
    assert isinstance(bash, BashTool) and bash.max_memory_bytes == CAP
    assert parse_config("").tools.bash_max_memory_bytes == BASH_MAX_MEMORY_DEFAULT
    with pytest.raises(PhloemError) as caught:
        parse_config("[tools]\nbash_max_memory_bytes = 1024\n", "phloem.toml")
    assert caught.value.kind == "config_invalid"
    assert caught.value.message.startswith("phloem.toml:2: tools.bash_max_memory_bytes: ")


def test_phloem_tool_run_uses_the_configured_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "phloem.toml"
    config.write_text(f"[tools]\nbash_max_memory_bytes = {CAP}\n")
    arguments = json.dumps({"command": _hog(600)})
    argv = ["tool", "run", "bash", arguments, "--root", str(tmp_path), "--config", str(config)]
    assert main(argv) == 0  # a result, not a failure value
    result = json.loads(capsys.readouterr().out)
    assert result["memory_exceeded"] is True and result["killed"] is True
