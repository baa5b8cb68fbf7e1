"""The diff of a file edit: hunks at the file's own line numbers, removed lines and context; none for an edit that fails."""

from __future__ import annotations

import difflib
import io
import json
from pathlib import Path

from dsh_cli._diff import diff_rows, file_diff, file_rows, history_diff
from dsh_cli._render import EventFeed, ToolFinished, ToolStarted, TranscriptPrinter
from rich.console import Console


def _plain(text: object) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(text)
    return out.getvalue().splitlines()


def _numbered_file(tmp_path: Path, count: int = 20) -> Path:
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line {n}\n" for n in range(1, count + 1)), encoding="utf-8")
    return path


def test_an_edit_at_line_10_is_a_hunk_at_line_10_with_context(tmp_path: Path) -> None:
    """The header names the file's lines (not @@ -1 +1 @@), three context lines each side, the removed line too."""
    _numbered_file(tmp_path)
    arguments = json.dumps({"path": "lines.txt", "old_text": "line 10\n", "new_text": "ten\nTEN\n"})
    assert _plain(file_diff("edit_file", arguments, str(tmp_path))) == [
        "    @@ -7,7 +7,8 @@",
        "      line 7",
        "      line 8",
        "      line 9",
        "    - line 10",
        "    + ten",
        "    + TEN",
        "      line 11",
        "      line 12",
        "      line 13",
    ]


def test_an_edit_of_part_of_a_line_shows_the_whole_line(tmp_path: Path) -> None:
    """old_text inside a line: the diff shows the line before and after, as diff -u would."""
    (tmp_path / "a.py").write_text("x = 1\ny = compute(x)\nz = 3\n", encoding="utf-8")
    arguments = {"path": "a.py", "old_text": "compute", "new_text": "calculate"}
    rows = file_rows("edit_file", arguments, str(tmp_path))
    assert rows is not None
    assert [(row.kind, row.text) for row in rows] == [
        ("hunk", "@@ -1,3 +1,3 @@"),
        ("same", "x = 1"),
        ("old", "y = compute(x)"),
        ("new", "y = calculate(x)"),
        ("same", "z = 3"),
    ]


def test_an_edit_that_will_fail_shows_no_diff(tmp_path: Path) -> None:
    """old_text not in the file, found twice without replace_all, or no file at all: nothing is shown."""
    (tmp_path / "a.txt").write_text("same\nsame\n", encoding="utf-8")
    cwd = str(tmp_path)
    assert file_diff("edit_file", {"path": "a.txt", "old_text": "absent", "new_text": "x"}, cwd) is None
    assert file_diff("edit_file", {"path": "a.txt", "old_text": "same", "new_text": "x"}, cwd) is None
    assert file_diff("edit_file", {"path": "nope.txt", "old_text": "a", "new_text": "b"}, cwd) is None
    both = file_diff(
        "edit_file", {"path": "a.txt", "old_text": "same", "new_text": "x", "replace_all": True}, cwd
    )
    assert _plain(both) == ["    @@ -1,2 +1,2 @@", "    - same", "    - same", "    + x", "    + x"]


def test_write_over_a_file_shows_what_it_destroys(tmp_path: Path) -> None:
    """write_file over an existing file: its old lines are shown removed, not only the new content."""
    (tmp_path / "keep.txt").write_text("keep1\nsecret plan\nkeep3\n", encoding="utf-8")
    arguments = {"path": "keep.txt", "content": "keep1\nkeep3\nnew\n"}
    assert _plain(file_diff("write_file", arguments, str(tmp_path))) == [
        "    @@ -1,3 +1,3 @@",
        "      keep1",
        "    - secret plan",
        "      keep3",
        "    + new",
    ]
    created = file_diff("write_file", {"path": "fresh.txt", "content": "a\nb\n"}, str(tmp_path))
    assert _plain(created) == ["    (a new file)", "    @@ -0,0 +1,2 @@", "    + a", "    + b"]


def test_hunk_ranges_follow_diff_u() -> None:
    """Two changes far apart are two hunks; an insertion after line 3 reads -3,0."""
    old = [f"l{n}" for n in range(1, 21)]
    new = [*old[:2], "X", *old[3:17], "Y", *old[17:]]
    headers = [row.text for row in diff_rows(old, new) if row.kind == "hunk"]
    assert headers == ["@@ -1,6 +1,6 @@", "@@ -15,6 +15,7 @@"]
    expected = [line for line in difflib.unified_diff(old, new, lineterm="") if line.startswith("@@")]
    assert headers == expected
    inserted = [row.text for row in diff_rows(["a", "b", "c"], ["a", "b", "c", "d"], context=0)]
    assert inserted == ["@@ -3,0 +4 @@", "d"]


def test_history_places_the_edit_at_the_line_its_result_names() -> None:
    """From a log, the edit is drawn at the line the result names, with the result's lines as context."""
    arguments = json.dumps({"path": "lines.txt", "old_text": "line 10", "new_text": "ten"})
    result = "Edited lines.txt: replaced 1 occurrence at line 10.\n" + "\n".join(
        f"{n:>6}\t{'ten' if n == 10 else f'line {n}'}" for n in range(7, 14)
    )
    assert _plain(history_diff("edit_file", arguments, result, error=False)) == [
        "    @@ -7,7 +7,7 @@",
        "      line 7",
        "      line 8",
        "      line 9",
        "    - line 10",
        "    + ten",
        "      line 11",
        "      line 12",
        "      line 13",
    ]
    failed = "Error: old_text was not found in lines.txt; nothing was changed."
    assert history_diff("edit_file", arguments, failed, error=True) is None


def test_the_transcript_of_a_failed_edit_has_no_diff() -> None:
    """sessions show: an edit whose result is an error is shown as the call and the error only."""
    out = io.StringIO()
    printer = TranscriptPrinter(Console(file=out, width=120, color_system=None))
    arguments = json.dumps({"path": "a.txt", "old_text": "absent", "new_text": "x"})
    printer.print_all(
        [
            ToolStarted("c1", "edit_file", arguments),
            ToolFinished("c1", "edit_file", "Error: old_text was not found in a.txt", "TOOL_ERROR"),
        ]
    )
    assert out.getvalue().splitlines() == [
        "⏺ edit_file a.txt",
        "  ⎿ TOOL_ERROR: old_text was not found in a.txt",
    ]
    assert EventFeed(live=False).feed_all(()) == []
