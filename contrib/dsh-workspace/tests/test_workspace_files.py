"""read_file, write_file and list_dir: their output, their limits and their errors."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from dsh_core import Context

from .workspace_kit import call, text

pytestmark = pytest.mark.anyio


# ---------------------------------------------------------------------- read_file


async def test_read_file_numbers_lines(ctx: Context, ws: Path) -> None:
    """read_file shows each line after its number and a tab."""
    (ws / "a.py").write_text("one\ntwo\nthree\n")
    result = await call(ctx, "read_file", ws, path="a.py")
    assert not result.is_error
    assert text(result) == "     1\tone\n     2\ttwo\n     3\tthree"


async def test_read_file_offset_and_limit_select_lines(ctx: Context, ws: Path) -> None:
    """offset and limit pick a line range, and the note says which offset continues."""
    (ws / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    result = await call(ctx, "read_file", ws, path="a.txt", offset=4, limit=3)
    lines = text(result).splitlines()
    assert lines[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "offset=7" in lines[3]
    last = await call(ctx, "read_file", ws, path="a.txt", offset=9)
    assert text(last) == "     9\tline 9\n    10\tline 10"


@pytest.mark.parametrize("workspace_config", [{"max_read_lines": 5}])
async def test_read_file_default_limit_is_configured(ctx: Context, ws: Path) -> None:
    """Without a limit, read_file shows max_read_lines lines and says how to continue."""
    (ws / "long.txt").write_text("x\n" * 50)
    result = await call(ctx, "read_file", ws, path="long.txt", limit=1000)
    lines = text(result).splitlines()
    assert len(lines) == 6
    assert "showing lines 1-5" in lines[5]
    assert "offset=6" in lines[5]


@pytest.mark.parametrize("workspace_config", [{"max_read_chars": 100}])
async def test_read_file_size_cap_stops_early(ctx: Context, ws: Path) -> None:
    """read_file stops before max_read_chars characters of output and points at the rest."""
    (ws / "wide.txt").write_text("".join(f"{n:02d}" + "y" * 30 + "\n" for n in range(1, 20)))
    result = await call(ctx, "read_file", ws, path="wide.txt")
    body, note = text(result).rsplit("\n", 1)
    assert len(body) <= 100
    assert body.splitlines()[-1].startswith("     2\t02")
    assert "offset=3" in note


async def test_read_file_cuts_very_long_lines(ctx: Context, ws: Path) -> None:
    """A line longer than 2000 characters is cut and says how long it was."""
    (ws / "min.js").write_text("z" * 5000 + "\n")
    shown = text(await call(ctx, "read_file", ws, path="min.js"))
    assert "line cut: 5000 characters" in shown
    assert len(shown) < 2100


async def test_read_file_refuses_binary_files(ctx: Context, ws: Path) -> None:
    """A file with NUL bytes is refused with a message saying it is binary."""
    (ws / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02" * 10)
    result = await call(ctx, "read_file", ws, path="blob.bin")
    assert result.is_error
    assert result.error_code == "TOOL_ERROR"
    assert "'blob.bin' is a binary file (70 bytes)" in text(result)


async def test_read_file_missing_file_suggests_close_names(ctx: Context, ws: Path) -> None:
    """A missing file is an error that suggests similar names in the same directory."""
    (ws / "src").mkdir()
    (ws / "src" / "main.py").write_text("")
    result = await call(ctx, "read_file", ws, path="src/mian.py")
    assert result.is_error
    assert "there is no file 'src/mian.py'" in text(result)
    assert "'src/main.py'" in text(result)


@pytest.mark.parametrize(
    ("setup", "arguments", "expected"),
    [
        ("dir", {"path": "d"}, "'d' is a directory, not a file; use list_dir"),
        ("empty", {"path": "e.txt"}, "(e.txt is empty)"),
        ("short", {"path": "s.txt", "offset": 5}, "offset 5 is past the end of 's.txt', which has 2 line(s)"),
        ("short", {"path": "s.txt", "offset": 0}, "at arguments.offset: 0 is less than the minimum of 1"),
        ("short", {"path": "s.txt", "limit": 0}, "at arguments.limit: 0 is less than the minimum of 1"),
        ("short", {"path": ""}, "the path is empty"),
    ],
)
async def test_read_file_edge_cases(
    ctx: Context, ws: Path, setup: str, arguments: dict[str, Any], expected: str
) -> None:
    """Directories, empty files, offsets past the end and bad arguments get a clear answer."""
    (ws / "d").mkdir()
    (ws / "e.txt").write_text("")
    (ws / "s.txt").write_text("a\nb\n")
    assert expected in text(await call(ctx, "read_file", ws, **arguments))


async def test_tools_without_cwd_say_how_to_fix_it(ctx: Context) -> None:
    """A call from an agent without a cwd is an error telling the user to give the agent one."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "a"}),
        ("bash", {"command": "true"}),
        ("glob", {"pattern": "*"}),
    ]
    for name, arguments in calls:
        result = await call(ctx, name, None, **arguments)
        assert result.is_error
        assert result.error_code == "TOOL_ERROR"
        assert "this agent has no working directory" in text(result)
        assert "meta={'cwd':" in text(result)


async def test_a_cwd_that_does_not_exist_is_reported(ctx: Context, tmp_path: Path) -> None:
    """A cwd that is not a directory is an error naming it."""
    result = await call(ctx, "list_dir", tmp_path / "gone")
    assert result.is_error
    assert f"the workspace {tmp_path / 'gone'} (this agent's cwd) is not an existing directory" in text(
        result
    )


# ---------------------------------------------------------------------- write_file


async def test_write_file_creates_the_file_and_its_directories(ctx: Context, ws: Path) -> None:
    """write_file creates missing parent directories and reports what it wrote."""
    result = await call(ctx, "write_file", ws, path="pkg/sub/mod.py", content="x = 1\ny = 2\n")
    assert not result.is_error
    assert text(result) == "Wrote 12 bytes (2 lines) to pkg/sub/mod.py (created)."
    assert (ws / "pkg" / "sub" / "mod.py").read_text() == "x = 1\ny = 2\n"


async def test_write_file_replaces_atomically_and_keeps_the_mode(ctx: Context, ws: Path) -> None:
    """Overwriting keeps the file's permission bits and leaves no temporary file behind."""
    script = ws / "run.sh"
    script.write_text("old\n")
    script.chmod(0o750)
    inode_before = script.stat().st_ino
    result = await call(ctx, "write_file", ws, path="run.sh", content="new\n")
    assert "(overwrote)" in text(result)
    assert script.read_text() == "new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert script.stat().st_ino != inode_before  # a new file was renamed over the old one
    assert sorted(os.listdir(ws)) == ["run.sh"]


async def test_write_file_new_file_gets_the_umask_mode(ctx: Context, ws: Path) -> None:
    """A new file gets the permission bits open() would give it, not the temp file's 0600."""
    await call(ctx, "write_file", ws, path="n.txt", content="")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((ws / "n.txt").stat().st_mode) == 0o666 & ~umask


async def test_write_file_through_an_inside_symlink_writes_its_target(ctx: Context, ws: Path) -> None:
    """Writing a symlink that points inside the workspace writes the target and keeps the link."""
    (ws / "real.txt").write_text("old")
    (ws / "link.txt").symlink_to("real.txt")
    result = await call(ctx, "write_file", ws, path="link.txt", content="new")
    assert "to real.txt" in text(result)
    assert (ws / "link.txt").is_symlink()
    assert (ws / "real.txt").read_text() == "new"


async def test_write_file_to_a_directory_is_an_error(ctx: Context, ws: Path) -> None:
    """A directory cannot be written as a file."""
    (ws / "d").mkdir()
    result = await call(ctx, "write_file", ws, path="d", content="x")
    assert result.is_error
    assert "'d' is a directory" in text(result)


# ---------------------------------------------------------------------- list_dir


async def test_list_dir_shows_directories_first_then_files_and_links(ctx: Context, ws: Path) -> None:
    """list_dir lists subdirectories with '/', files with sizes, and where symlinks point."""
    (ws / "b.txt").write_text("12345")
    (ws / "a_dir").mkdir()
    (ws / ".hidden").write_text("")
    (ws / "link").symlink_to("b.txt")
    result = await call(ctx, "list_dir", ws)
    assert text(result).splitlines() == [
        "./ (4 entries):",
        "a_dir/",
        ".hidden  (0 bytes)",
        "b.txt  (5 bytes)",
        "link -> b.txt",
    ]


@pytest.mark.parametrize("workspace_config", [{"max_results": 3}])
async def test_list_dir_caps_entries(ctx: Context, ws: Path) -> None:
    """Beyond max_results entries, list_dir says how many it left out."""
    for n in range(5):
        (ws / f"f{n}").write_text("")
    lines = text(await call(ctx, "list_dir", ws, path=".")).splitlines()
    assert lines[1:4] == ["f0  (0 bytes)", "f1  (0 bytes)", "f2  (0 bytes)"]
    assert lines[4] == "[2 more entries not shown; use glob to narrow the listing]"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("f.txt", "'f.txt' is a file, not a directory; use read_file"),
        ("nope", "there is no file 'nope'"),
        ("empty", "empty/ is empty."),
    ],
)
async def test_list_dir_errors(ctx: Context, ws: Path, path: str, expected: str) -> None:
    """list_dir explains files, missing paths and empty directories."""
    (ws / "f.txt").write_text("")
    (ws / "empty").mkdir()
    assert expected in text(await call(ctx, "list_dir", ws, path=path))
