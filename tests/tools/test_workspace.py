from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from phloem.tools import ToolContext, ToolFailure, Workspace
from phloem.tools.fileio import read_regular
from phloem.tools.read import ReadTool
from phloem.tools.workspace import TEMP_PREFIX
from phloem.tools.write import WriteTool

from .conftest import seed

pytestmark = pytest.mark.timeout(20)


def _code(workspace: Workspace, path: str, must_exist: bool = True) -> str:
    with pytest.raises(ToolFailure) as caught:
        workspace.resolve(path, must_exist=must_exist)
    return caught.value.code


def test_a_relative_path_climbing_out_is_outside_root(root: Path) -> None:
    (root.parent / "secret.txt").write_text("s")
    assert _code(Workspace(root), "../secret.txt") == "outside_root"
    assert _code(Workspace(root), "a/../../secret.txt") == "outside_root"


def test_an_absolute_path_elsewhere_is_outside_root_but_inside_is_accepted(root: Path) -> None:
    seed(root, {"a.txt": "a"})
    workspace = Workspace(root)
    assert _code(workspace, "/etc/passwd") == "outside_root"
    assert workspace.resolve(str(root / "a.txt")).relative == "a.txt"


def test_a_symlink_leading_out_is_outside_root(root: Path) -> None:
    (root.parent / "secret.txt").write_text("s")
    (root / "link.txt").symlink_to(root.parent / "secret.txt")
    (root / "dangling").symlink_to(root.parent / "nowhere" / "x")
    assert _code(Workspace(root), "link.txt") == "outside_root"
    assert _code(Workspace(root), "dangling", must_exist=False) == "outside_root"


def test_a_symlinked_parent_directory_leading_out_is_outside_root(root: Path) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("x")
    (root / "sub").symlink_to(outside)
    assert _code(Workspace(root), "sub/f.txt") == "outside_root"
    assert _code(Workspace(root), "sub/new.txt", must_exist=False) == "outside_root"


def test_a_symlink_inside_the_root_resolves_to_its_target(root: Path) -> None:
    seed(root, {"real/a.txt": "a"})
    (root / "alias").symlink_to(root / "real")
    assert Workspace(root).resolve("alias/a.txt").relative == "real/a.txt"


def test_escapes_are_refused_by_the_tools_too(ctx: ToolContext, root: Path) -> None:
    (root.parent / "secret.txt").write_text("s")
    (root / "up").symlink_to(root.parent)
    assert ReadTool().run({"path": "../secret.txt"}, ctx)["error"] == "outside_root"
    assert ReadTool().run({"path": "up/secret.txt"}, ctx)["error"] == "outside_root"
    result = WriteTool().run({"path": "up/new.txt", "content": "x"}, ctx)
    assert result["error"] == "outside_root"
    assert not (root.parent / "new.txt").exists()


def test_missing_paths_and_nul_bytes_are_reported(root: Path) -> None:
    workspace = Workspace(root)
    assert _code(workspace, "nope.txt") == "missing"
    assert _code(workspace, "a\x00b") == "arguments"
    assert _code(workspace, "") == "arguments"


def test_the_ledger_tells_never_read_from_stale(root: Path) -> None:
    workspace = Workspace(root)
    with pytest.raises(ToolFailure) as never:
        workspace.verify("s", "a.txt", b"one")
    assert never.value.code == "never_read"
    workspace.record("s", "a.txt", b"one")
    workspace.verify("s", "a.txt", b"one")
    with pytest.raises(ToolFailure) as stale:
        workspace.verify("s", "a.txt", b"two")
    assert stale.value.code == "stale"
    with pytest.raises(ToolFailure) as other_session:
        workspace.verify("s2", "a.txt", b"one")
    assert other_session.value.code == "never_read"


def test_atomic_writes_keep_modes_and_leave_no_temp_files(root: Path) -> None:
    workspace = Workspace(root)
    old_umask = os.umask(0o077)
    try:
        target = root / "deep" / "er" / "new.txt"
        workspace.make_parents(target)
        workspace.atomic_write(target, b"new")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert stat.S_IMODE((root / "deep").stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "deep" / "er").stat().st_mode) == 0o755
    existing = root / "private.txt"
    existing.write_text("x")
    existing.chmod(0o600)
    workspace.atomic_write(existing, b"y")
    assert stat.S_IMODE(existing.stat().st_mode) == 0o600
    assert existing.read_bytes() == b"y"
    leftovers = [p for p in root.rglob("*") if p.name.startswith(TEMP_PREFIX)]
    assert leftovers == []


def test_the_root_must_be_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^root must be an existing directory"):
        Workspace(tmp_path / "missing")


def test_a_parent_swapped_for_a_symlink_after_resolving_is_still_refused(root: Path) -> None:
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    workspace = Workspace(root)
    (root / "swapped").symlink_to(outside)  # as if it changed after resolve() ran
    with pytest.raises(ToolFailure) as writing:
        workspace.atomic_write(root / "swapped" / "new.txt", b"x")
    assert writing.value.code == "outside_root"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    with pytest.raises(ToolFailure) as reading:
        read_regular(root / "swapped" / "secret.txt", 100, "x", workspace.holds_descriptor)
    assert reading.value.code == "outside_root"
