"""edit_file: one exact match replaced, and helpful refusals when there is none or several."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from dsh_workspace._edit import near_matches

from dsh_core import Context

from .workspace_kit import call, text

pytestmark = pytest.mark.anyio

SOURCE = """\
def greet(name):
    message = "hello " + name
    print(message)
    return message


def shout(name):
    print(name.upper())
"""


@pytest.fixture
def app(ws: Path) -> Path:
    path = ws / "app.py"
    path.write_text(SOURCE)
    return path


async def test_edit_replaces_the_single_match_and_shows_the_result(ctx: Context, ws: Path, app: Path) -> None:
    """A unique old_text is replaced; the result shows the edited lines with numbers."""
    result = await call(
        ctx, "edit_file", ws, path="app.py", old_text="    print(message)\n", new_text="    log(message)\n"
    )
    assert not result.is_error
    assert await anyio.Path(app).read_text() == SOURCE.replace("print(message)", "log(message)")
    shown = text(result)
    assert shown.startswith("Edited app.py: replaced 1 occurrence at line 3.")
    assert "     3\t    log(message)" in shown
    assert "     1\tdef greet(name):" in shown  # two lines of context


async def test_edit_without_a_match_shows_near_matches_with_line_numbers(
    ctx: Context, ws: Path, app: Path
) -> None:
    """No exact match: nothing changes, and the closest passage is shown with its line numbers."""
    result = await call(
        ctx,
        "edit_file",
        ws,
        path="app.py",
        old_text='    mesage = "hello" + name\n    print(mesage)',
        new_text="x",
    )
    assert result.is_error
    assert result.error_code == "TOOL_ERROR"
    shown = text(result)
    assert "old_text was not found in app.py; nothing was changed." in shown
    assert "at lines 2-3:" in shown
    assert '     2\t    message = "hello " + name\n     3\t    print(message)' in shown
    assert await anyio.Path(app).read_text() == SOURCE


async def test_edit_names_a_whitespace_only_difference(ctx: Context, ws: Path, app: Path) -> None:
    """A passage equal apart from indentation is pointed out as such."""
    result = await call(
        ctx, "edit_file", ws, path="app.py", old_text="def shout(name):\n  print(name.upper())", new_text=""
    )
    assert "at lines 7-8 (the same apart from whitespace)" in text(result)


async def test_edit_spots_copied_line_numbers(ctx: Context, ws: Path, app: Path) -> None:
    """old_text carrying read_file's line-number prefixes gets a hint to drop them."""
    result = await call(
        ctx, "edit_file", ws, path="app.py", old_text="     3\t    print(message)", new_text=""
    )
    assert "line-number prefixes" in text(result)


async def test_edit_with_nothing_similar_says_so(ctx: Context, ws: Path, app: Path) -> None:
    """When no passage is similar, the message says to read the file again."""
    result = await call(
        ctx, "edit_file", ws, path="app.py", old_text="class Zebra(Animal): pass", new_text=""
    )
    assert "Nothing similar was found either" in text(result)


async def test_edit_with_several_matches_asks_for_more_context(ctx: Context, ws: Path, app: Path) -> None:
    """Several matches: the message counts them, gives their lines and suggests more context."""
    result = await call(ctx, "edit_file", ws, path="app.py", old_text="(name)", new_text="(who)")
    assert result.is_error
    shown = text(result)
    assert "old_text occurs 2 times in app.py (starting at lines 1, 7)" in shown
    assert "Include more surrounding lines" in shown
    assert "replace_all=true" in shown
    assert await anyio.Path(app).read_text() == SOURCE


async def test_edit_replace_all_replaces_every_occurrence(ctx: Context, ws: Path, app: Path) -> None:
    """replace_all=true replaces every occurrence and says how many."""
    result = await call(
        ctx, "edit_file", ws, path="app.py", old_text="name", new_text="who", replace_all=True
    )
    assert text(result).startswith("Edited app.py: replaced 4 occurrences.")
    assert "name" not in await anyio.Path(app).read_text()


async def test_edit_keeps_crlf_line_endings(ctx: Context, ws: Path) -> None:
    """In a CRLF file, an LF old_text matches and the replacement uses CRLF too."""
    (ws / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = await call(ctx, "edit_file", ws, path="win.txt", old_text="one\ntwo", new_text="1\n2")
    assert not result.is_error
    assert (ws / "win.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


@pytest.mark.parametrize(
    ("old", "new", "path", "expected"),
    [
        ("", "x", "app.py", "old_text is empty"),
        ("same", "same", "app.py", "old_text and new_text are the same"),
        ("x", "y", "missing.py", "there is no file 'missing.py'; to create it, use write_file"),
        ("x", "y", "blob.bin", "'blob.bin' is a binary file"),
        ("x", "y", "latin1.txt", "'latin1.txt' is not valid UTF-8 (at byte 3)"),
    ],
)
async def test_edit_refusals(
    ctx: Context, ws: Path, app: Path, old: str, new: str, path: str, expected: str
) -> None:
    """Empty or unchanged text, missing, binary and non-UTF-8 files are refused, untouched."""
    (ws / "blob.bin").write_bytes(b"x\x00y")
    (ws / "latin1.txt").write_bytes(b"caf\xe9 x")
    result = await call(ctx, "edit_file", ws, path=path, old_text=old, new_text=new)
    assert result.is_error
    assert expected in text(result)
    assert (ws / "latin1.txt").read_bytes() == b"caf\xe9 x"


def test_near_matches_ranks_the_best_passages_first() -> None:
    """near_matches returns the most similar windows first, with 1-based line numbers."""
    text_ = "alpha\nbeta\ngamma\ndelta\nbetta\n"
    found = near_matches(text_, "beta")
    assert [(first, lines) for _, first, lines in found][:2] == [(2, ["beta"]), (5, ["betta"])]
    assert found[0][0] == 1.0
    assert near_matches(text_, "zzzzzz") == []
