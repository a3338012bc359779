from __future__ import annotations

import threading
from pathlib import Path

import pytest

from phloem.tools import OutputPolicy, ToolContext, Workspace
from phloem.tools.edit import EditTool
from phloem.tools.read import ReadTool
from phloem.tools.write import WriteTool

from .conftest import Touches, seed

pytestmark = pytest.mark.timeout(20)


def test_read_numbers_lines_windows_and_strips_cr(ctx: ToolContext, root: Path) -> None:
    seed(root, {"a.txt": "one\r\ntwo\r\nthree\r\n"})
    result = ReadTool().run({"path": "a.txt", "offset": 2, "limit": 1}, ctx)
    assert result["content"] == "     2\ttwo\n"
    assert (result["start_line"], result["end_line"], result["total_lines"]) == (2, 2, 3)
    assert result["truncated"] is True  # the window stops before the end of the file
    past = ReadTool().run({"path": "a.txt", "offset": 9}, ctx)
    assert (past["content"], past["start_line"], past["end_line"]) == ("", 0, 0)


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"a\x00b", "binary"),
        (b"\xff\xfe bad utf-8", "binary"),
        (b"\x01\x02\x03\x04abc", "binary"),
    ],
)
def test_read_refuses_binary_files(ctx: ToolContext, root: Path, content: bytes, code: str) -> None:
    seed(root, {"f.bin": content})
    assert ReadTool().run({"path": "f.bin"}, ctx)["error"] == code


def test_read_cap_is_inclusive(ctx: ToolContext, root: Path) -> None:
    seed(root, {"a.txt": "1234"})
    assert ReadTool(max_read_bytes=4).run({"path": "a.txt"}, ctx)["content"] == "     1\t1234"
    assert ReadTool(max_read_bytes=3).run({"path": "a.txt"}, ctx)["error"] == "too_large"


@pytest.mark.parametrize(
    "args",
    [{"path": "a.txt", "offset": 1.5}, {"path": "a.txt", "bogus": 1}, {}, {"path": 3}],
)
def test_read_rejects_bad_arguments(ctx: ToolContext, root: Path, args: dict[str, object]) -> None:
    seed(root, {"a.txt": "x"})
    assert ReadTool().run(args, ctx)["error"] == "arguments"


def test_read_of_a_directory_and_a_missing_file(ctx: ToolContext, root: Path) -> None:
    (root / "d").mkdir()
    assert ReadTool().run({"path": "d"}, ctx)["error"] == "directory"
    assert ReadTool().run({"path": "nope"}, ctx)["error"] == "missing"


def test_a_cancelled_context_runs_nothing(ctx: ToolContext, root: Path, touches: Touches) -> None:
    seed(root, {"a.txt": "x"})
    ctx.cancel.set()
    assert ReadTool().run({"path": "a.txt"}, ctx)["error"] == "cancelled"
    assert touches == []


def test_write_requires_a_fresh_read_of_an_existing_file(ctx: ToolContext, root: Path) -> None:
    seed(root, {"a.txt": "old\n"})
    write = WriteTool()
    assert write.run({"path": "a.txt", "content": "new\n"}, ctx)["error"] == "never_read"
    ReadTool().run({"path": "a.txt"}, ctx)
    (root / "a.txt").write_text("changed behind our back\n")
    assert write.run({"path": "a.txt", "content": "new\n"}, ctx)["error"] == "stale"
    ReadTool().run({"path": "a.txt"}, ctx)
    result = write.run({"path": "a.txt", "content": "new\n"}, ctx)
    assert (
        result["diff"]
        == "--- a/a.txt\n+++ b/a.txt\n@@ -1,1 +1,1 @@\n-changed behind our back\n+new\n"
    )
    assert result["bytes_written"] == 4
    # The write itself refreshed the ledger: a second write needs no new read.
    assert "error" not in write.run({"path": "a.txt", "content": "newer\n"}, ctx)


def test_write_cap_is_inclusive(ctx: ToolContext) -> None:
    assert "error" not in WriteTool(max_write_bytes=3).run({"path": "a", "content": "abc"}, ctx)
    too_big = WriteTool(max_write_bytes=3).run({"path": "b", "content": "abcd"}, ctx)
    assert too_big["error"] == "too_large"


def test_edit_keeps_crlf_bom_and_missing_final_newline(ctx: ToolContext, root: Path) -> None:
    (root / "w.txt").write_bytes("\ufeffa\r\nold\r\nz".encode())
    ReadTool().run({"path": "w.txt"}, ctx)
    result = EditTool().run({"path": "w.txt", "old_text": "old", "new_text": "n1\nn2"}, ctx)
    assert result["match_tier"] == "exact"
    assert (root / "w.txt").read_bytes() == "\ufeffa\r\nn1\r\nn2\r\nz".encode()


def test_edit_lists_every_line_of_an_ambiguous_match(ctx: ToolContext, root: Path) -> None:
    seed(root, {"a.txt": "x = 1\ny\nx = 1\nx = 1\n"})
    ReadTool().run({"path": "a.txt"}, ctx)
    result = EditTool().run({"path": "a.txt", "old_text": "x = 1", "new_text": "x = 2"}, ctx)
    assert result["error"] == "ambiguous_match"
    assert result["lines"] == [1, 3, 4]
    assert (root / "a.txt").read_text() == "x = 1\ny\nx = 1\nx = 1\n"
    every = EditTool().run(
        {"path": "a.txt", "old_text": "x = 1", "new_text": "x = 2", "replace_all": True}, ctx
    )
    assert every["replacements"] == 3


def test_edit_indentation_tier_reindents_the_replacement(ctx: ToolContext, root: Path) -> None:
    seed(root, {"a.py": "def f():\n    if x:\n        return 1\n"})
    ReadTool().run({"path": "a.py"}, ctx)
    result = EditTool().run(
        {"path": "a.py", "old_text": "if x:\n    return 1", "new_text": "if y:\n    return 2"},
        ctx,
    )
    assert result["match_tier"] == "indentation"
    assert (root / "a.py").read_text() == "def f():\n    if y:\n        return 2\n"


def test_edit_needs_a_read_first(ctx: ToolContext, root: Path) -> None:
    seed(root, {"a.txt": "x\n"})
    result = EditTool().run({"path": "a.txt", "old_text": "x", "new_text": "y"}, ctx)
    assert result["error"] == "never_read"


def test_mutations_from_many_threads_are_serialized(root: Path) -> None:
    seed(root, {"n.txt": "0\n"})
    workspace = Workspace(root)
    errors: list[str] = []

    def bump(session: str) -> None:
        ctx = ToolContext(workspace=workspace, session=session)
        for _ in range(10):
            while True:
                ReadTool().run({"path": "n.txt"}, ctx)
                value = int((root / "n.txt").read_text())
                done = EditTool().run(
                    {"path": "n.txt", "old_text": f"{value}\n", "new_text": f"{value + 1}\n"}, ctx
                )
                if "error" not in done:
                    break
                if done["error"] not in ("stale", "no_match"):
                    errors.append(done["error"])
                    return

    threads = [threading.Thread(target=bump, args=(f"s{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    assert errors == []
    assert (root / "n.txt").read_text() == "40\n"


def test_read_output_is_limited_by_the_context_policy(root: Path) -> None:
    seed(root, {"a.txt": "".join(f"{i}\n" for i in range(100))})
    ctx = ToolContext(
        workspace=Workspace(root), policy=OutputPolicy(max_bytes=0, max_lines=4, max_line_bytes=0)
    )
    result = ReadTool().run({"path": "a.txt"}, ctx)
    assert result["report"]["reason"] == "lines"
    assert result["truncated"] is True
    assert "[phloem:truncated reason=lines" in result["content"]


def test_the_edit_diff_of_a_crlf_file_shows_logical_lines(ctx: ToolContext, root: Path) -> None:
    (root / "c.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    ReadTool().run({"path": "c.txt"}, ctx)
    result = EditTool().run({"path": "c.txt", "old_text": "two", "new_text": "TWO"}, ctx)
    assert result["diff"] == (
        "--- a/c.txt\n+++ b/c.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
    )
    assert (root / "c.txt").read_bytes() == b"one\r\nTWO\r\nthree\r\n"  # the file keeps CRLF
    (root / "n.txt").write_bytes(b"\xef\xbb\xbfa\r\nb")  # BOM, no final newline
    ReadTool().run({"path": "n.txt"}, ctx)
    result = EditTool().run({"path": "n.txt", "old_text": "b", "new_text": "c"}, ctx)
    assert "\r" not in result["diff"] and "\ufeff" not in result["diff"]
    assert result["diff"].endswith(
        "-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
    )
