"""File edits shown as a real diff: removed and added lines, context, hunk headers at the file's own line numbers.

Live (``dsh run``, ``dsh chat``, before an approval) the diff is made from the file as it is on
disk before the call runs: ``edit_file`` as the replacement the workspace tool will make (none when
``old_text`` is not in the file: the edit will fail), ``write_file`` as the old content against the
new. From a stored log (``dsh sessions show``, a resumed chat) the file has moved on, so
``edit_file`` is drawn from its arguments placed at the line its result names, with the context
lines the result shows; a failed call shows no diff. ``DIFF_LINES`` lines at most, then how many more.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

import attrs
from rich.text import Text

from ._sanitize import clean

__all__ = ["DIFF_LINES", "DiffRow", "diff_rows", "file_diff", "file_rows", "history_diff", "read_text", "render_rows"]

#: the most diff lines shown under a call
DIFF_LINES: Final = 40
#: unchanged lines shown around each change
CONTEXT_LINES: Final = 3
#: files larger than this are not read to draw a diff
_MAX_BYTES: Final = 2_000_000

RowKind: TypeAlias = Literal["hunk", "old", "new", "same", "note"]


@attrs.frozen
class DiffRow:
    kind: RowKind
    text: str


def _arguments(arguments: str | Mapping[str, Any]) -> Mapping[str, Any] | None:
    if isinstance(arguments, Mapping):
        return arguments
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _span(start: int, length: int) -> str:
    """A hunk header's range, as ``diff -u`` writes it: ``10`` (one line), ``10,4``, ``9,0`` (none)."""
    if length == 1:
        return str(start)
    if length == 0:
        return f"{start - 1},0"
    return f"{start},{length}"


def diff_rows(
    old: Sequence[str],
    new: Sequence[str],
    *,
    old_start: int = 1,
    new_start: int | None = None,
    context: int = CONTEXT_LINES,
) -> list[DiffRow]:
    """The hunks turning ``old`` into ``new``, numbered as if ``old[0]`` were line ``old_start`` of the file."""
    new_start = old_start if new_start is None else new_start
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(None, list(old), list(new), autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first_old, last_old = group[0][1], group[-1][2]
        first_new, last_new = group[0][3], group[-1][4]
        header = (
            f"@@ -{_span(first_old + old_start, last_old - first_old)} "
            f"+{_span(first_new + new_start, last_new - first_new)} @@"
        )
        rows.append(DiffRow("hunk", header))
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                rows += [DiffRow("same", line) for line in old[a1:a2]]
                continue
            if tag in ("replace", "delete"):
                rows += [DiffRow("old", line) for line in old[a1:a2]]
            if tag in ("replace", "insert"):
                rows += [DiffRow("new", line) for line in new[b1:b2]]
    return rows


def render_rows(rows: Sequence[DiffRow], limit: int = DIFF_LINES) -> Text | None:
    """The rows as coloured text (``None`` when there are none), ``limit`` at most and how many more."""
    if not rows:
        return None
    text = Text()
    for row in rows[:limit]:
        line = clean(row.text)
        if row.kind == "hunk":
            text.append(f"    {line}\n", style="cyan dim")
        elif row.kind == "old":
            text.append(f"    - {line}\n", style="red")
        elif row.kind == "new":
            text.append(f"    + {line}\n", style="green")
        elif row.kind == "note":
            text.append(f"    {line}\n", style="dim italic")
        else:
            text.append(f"      {line}\n", style="dim")
    if len(rows) > limit:
        text.append(f"    … {len(rows) - limit} more lines\n", style="dim")
    text.rstrip()
    return text


def read_text(path: str | os.PathLike[str]) -> str | None:
    """The file's text, or ``None`` when it is missing, a directory, too large, binary or not UTF-8."""
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            return None
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _target(parsed: Mapping[str, Any], cwd: str | None) -> str | None:
    path = parsed.get("path")
    if not isinstance(path, str) or not path:
        return None
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        if cwd is None:
            return None
        path = os.path.join(cwd, path)
    return path


def _edited(text: str, old: str, new: str, replace_all: bool) -> str | None:
    """What ``edit_file`` will write (the workspace tool's rules, CRLF files included), or ``None`` if it will fail."""
    if not old or old == new:
        return None
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0 or (count > 1 and not replace_all):
        return None
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


def _lines(text: str) -> list[str]:
    return text.splitlines()


def file_rows(name: str, arguments: str | Mapping[str, Any], cwd: str | None) -> list[DiffRow] | None:
    """The diff rows of an ``edit_file``/``write_file`` call against the file on disk now; ``None`` for other calls.

    An edit that will fail (file missing, ``old_text`` absent or ambiguous) has no rows.
    """
    if name not in ("edit_file", "write_file"):
        return None
    parsed = _arguments(arguments)
    if parsed is None:
        return None
    path = _target(parsed, cwd)
    if name == "write_file":
        content = parsed.get("content")
        if not isinstance(content, str):
            return None
        before = read_text(path) if path is not None and os.path.isfile(path) else None
        if before is None:
            if path is not None and os.path.exists(path):  # there, but unreadable as text
                return [
                    DiffRow("note", "(replaces a file that is not shown: binary, too large or not UTF-8)")
                ]
            rows = diff_rows([], _lines(content))
            return (
                [DiffRow("note", "(a new file)"), *rows] if rows else [DiffRow("note", "(a new, empty file)")]
            )
        rows = diff_rows(_lines(before), _lines(content))
        return rows or [DiffRow("note", "(the same content: nothing changes)")]
    old, new = parsed.get("old_text"), parsed.get("new_text")
    if not (isinstance(old, str) and isinstance(new, str)) or path is None:
        return []
    before = read_text(path)
    if before is None:
        return []
    after = _edited(before, old, new, bool(parsed.get("replace_all", False)))
    if after is None:
        return []
    return diff_rows(_lines(before), _lines(after))


def file_diff(name: str, arguments: str | Mapping[str, Any], cwd: str | None) -> Text | None:
    """The rendered diff of an ``edit_file``/``write_file`` call against the file on disk, or ``None``."""
    rows = file_rows(name, arguments, cwd)
    return None if rows is None else render_rows(rows)


#: ``Edited a.py: replaced 1 occurrence at line 10.``
_EDITED_AT: Final = re.compile(r"replaced 1 occurrence at line (\d+)\.")
#: a line of the result's snippet: ``    12\ttext``
_NUMBERED: Final = re.compile(r"^ *(\d+)\t(.*)$")


def history_diff(name: str, arguments: str, result: str, error: bool) -> Text | None:
    """The diff of a stored ``edit_file``/``write_file`` call, drawn from its arguments and its result.

    A failed call has none. An edit is placed at the line its result names, with the result's
    snippet lines around it as context; ``write_file`` shows what it wrote (what it replaced is
    not in the log).
    """
    if error or name not in ("edit_file", "write_file"):
        return None
    parsed = _arguments(arguments)
    if parsed is None:
        return None
    if name == "write_file":
        content = parsed.get("content")
        if not isinstance(content, str):
            return None
        rows = [DiffRow("new", line) for line in _lines(content)]
        if "(overwrote)" in result:
            rows.insert(0, DiffRow("note", "(overwrote the file; its previous content is not in the log)"))
        return render_rows(rows)
    old, new = parsed.get("old_text"), parsed.get("new_text")
    if not (isinstance(old, str) and isinstance(new, str)):
        return None
    old_lines, new_lines = _lines(old), _lines(new)
    at = _EDITED_AT.search(result)
    if at is None:  # several occurrences, or a result of another shape: the replacement alone
        return render_rows(diff_rows(old_lines, new_lines, context=CONTEXT_LINES))
    first = int(at.group(1))
    snippet = {int(m.group(1)): m.group(2) for m in map(_NUMBERED.match, result.splitlines()) if m}
    span = max(1, len(new_lines))
    old_lines, new_lines = _whole_lines(snippet, first, span, old, new) or (old_lines, new_lines)
    before = [snippet[n] for n in range(first - CONTEXT_LINES, first) if n in snippet]
    after_start = first + span
    after = [snippet[n] for n in range(after_start, after_start + CONTEXT_LINES) if n in snippet]
    rows = diff_rows(
        [*before, *old_lines, *after], [*before, *new_lines, *after], old_start=first - len(before)
    )
    return render_rows(rows)


def _whole_lines(
    snippet: Mapping[int, str], first: int, span: int, old: str, new: str
) -> tuple[list[str], list[str]] | None:
    """The file's whole lines before and after an edit of part of a line, from the result's snippet."""
    shown = [snippet.get(n) for n in range(first, first + span)]
    if not new.strip("\n") or any(line is None for line in shown):
        return None
    joined = "\n".join(line for line in shown if line is not None)
    if new.strip("\n") not in joined:
        return None
    return _lines(joined.replace(new.strip("\n"), old.strip("\n"), 1)), _lines(joined)

