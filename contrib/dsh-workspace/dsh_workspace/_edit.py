"""edit_file: exact text replacement that must match once, and the near-match report when it does not.

Blocking code, run in a worker thread. When ``old_text`` is not found, the message shows the
closest passages of the file (difflib similarity over windows of as many lines as ``old_text``
has) with their line numbers, and names the usual causes: different whitespace, read_file's
line-number prefixes copied along, or a file that changed since it was read.
"""

from __future__ import annotations

import difflib
import heapq
import os
import re

from ._files import BINARY_SNIFF_BYTES, atomic_write, is_binary
from ._open import open_checked
from ._paths import ResolvedPath, WorkspaceError

__all__ = ["edit_file", "near_matches"]

#: near matches shown, and the similarity (0..1) a passage needs to be shown at all
_SHOWN = 3
_CUTOFF = 0.5
#: lines of unchanged context shown around an edit
_CONTEXT = 2
_MAX_SNIPPET_LINES = 40
_LINE_PREFIX = re.compile(r"^\s*\d+\t")


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{first + offset:>6}\t{line}" for offset, line in enumerate(lines))


def near_matches(text: str, old: str, limit: int = _SHOWN) -> list[tuple[float, int, list[str]]]:
    """The passages of ``text`` most similar to ``old``: ``(similarity, first line, lines)``, best first.

    A passage is a window of as many lines as ``old`` has; only those at least ``_CUTOFF``
    similar are returned, and overlapping windows keep only their best.
    """
    file_lines = text.splitlines()
    old_lines = old.splitlines() or [old]
    width = max(1, len(old_lines))
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2("\n".join(old_lines))  # seq2 is the one difflib indexes: set it once
    best: list[tuple[float, int]] = []  # a min-heap of (ratio, start) holding the best few
    for start in range(max(1, len(file_lines) - width + 1)):
        matcher.set_seq1("\n".join(file_lines[start : start + width]))
        floor = best[0][0] if len(best) >= limit * 4 else _CUTOFF
        if matcher.real_quick_ratio() < floor or matcher.quick_ratio() < floor:
            continue
        ratio = matcher.ratio()
        if ratio < floor:
            continue
        if len(best) >= limit * 4:
            heapq.heapreplace(best, (ratio, start))
        else:
            heapq.heappush(best, (ratio, start))
    chosen: list[tuple[float, int, list[str]]] = []
    for ratio, start in sorted(best, key=lambda item: (-item[0], item[1])):
        if any(abs(start - taken) < width for _, taken, _ in chosen):
            continue
        chosen.append((ratio, start + 1, file_lines[start : start + width]))
        if len(chosen) == limit:
            break
    return chosen


def _squash(text: str) -> str:
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def _not_found(text: str, old: str, shown: str) -> WorkspaceError:
    parts = [f"old_text was not found in {shown}; nothing was changed."]
    old_lines = old.splitlines()
    if old_lines and all(_LINE_PREFIX.match(line) for line in old_lines):
        parts.append(
            "old_text seems to include read_file's line-number prefixes (digits and a tab); leave them out."
        )
    matches = near_matches(text, old)
    if matches:
        target = _squash(old)
        for ratio, first, lines in matches:
            label = f"lines {first}-{first + len(lines) - 1}" if len(lines) > 1 else f"line {first}"
            note = " (the same apart from whitespace)" if _squash("\n".join(lines)) == target else ""
            parts.append(f"Similar text ({ratio:.0%}) at {label}{note}:\n{_numbered(lines, first)}")
        parts.append(
            "Copy old_text exactly from the file as it is now (whitespace included, without line numbers) "
            "and call edit_file again."
        )
    else:
        parts.append("Nothing similar was found either; read the file again to see its current content.")
    return WorkspaceError("\n".join(parts))


def _snippet(text: str, start: int, end: int) -> str:
    lines = text.splitlines()
    first = max(0, _line_of(text, start) - 1 - _CONTEXT)
    last = min(len(lines), _line_of(text, max(start, end - 1)) + _CONTEXT)
    if last - first > _MAX_SNIPPET_LINES:
        last = first + _MAX_SNIPPET_LINES
    return _numbered(lines[first:last], first + 1)


def edit_file(path: ResolvedPath, old: str, new: str, replace_all: bool) -> str:
    """Replace ``old`` with ``new`` in the file; ``old`` must occur exactly once unless ``replace_all``.

    :raises WorkspaceError: empty or unchanged ``old``, missing/binary/non-UTF-8 file, no match
        (with near matches), several matches without ``replace_all``.
    """
    if old == "":
        msg = "old_text is empty; give the exact text to replace (to create or rewrite a whole file, use write_file)"
        raise WorkspaceError(msg)
    if old == new:
        msg = "old_text and new_text are the same, so there is nothing to change"
        raise WorkspaceError(msg)
    try:
        with os.fdopen(open_checked(path.real, path.shown), "rb") as raw:
            data = raw.read()
    except FileNotFoundError:
        msg = f"there is no file {path.shown!r}; to create it, use write_file"
        raise WorkspaceError(msg) from None
    except IsADirectoryError:
        msg = f"{path.shown!r} is a directory, not a file"
        raise WorkspaceError(msg) from None
    except OSError as exc:
        msg = f"cannot read {path.shown!r}: {exc.strerror or exc}"
        raise WorkspaceError(msg) from None
    if is_binary(data[:BINARY_SNIFF_BYTES]):
        msg = f"{path.shown!r} is a binary file; edit_file edits text only"
        raise WorkspaceError(msg)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"{path.shown!r} is not valid UTF-8 (at byte {exc.start}); editing it as text could corrupt it"
        raise WorkspaceError(msg) from None
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\r\n" not in old:
        # The file uses CRLF line endings; the model writes LF. Match and write in the file's style.
        crlf_old, crlf_new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        if text.count(crlf_old):
            old, new, count = crlf_old, crlf_new, text.count(crlf_old)
    if count == 0:
        raise _not_found(text, old, path.shown)
    if count > 1 and not replace_all:
        starts: list[int] = []
        index = text.find(old)
        while index != -1 and len(starts) < 10:
            starts.append(_line_of(text, index))
            index = text.find(old, index + len(old))
        at = ", ".join(map(str, starts)) + (", ..." if count > len(starts) else "")
        msg = (
            f"old_text occurs {count} times in {path.shown} (starting at lines {at}); nothing was changed. "
            "Include more surrounding lines in old_text so that it matches exactly once, "
            "or pass replace_all=true to replace every occurrence."
        )
        raise WorkspaceError(msg)
    first = text.index(old)
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    try:
        atomic_write(path.real, updated.encode("utf-8"), path.shown)
    except OSError as exc:
        msg = f"cannot write {path.shown!r}: {exc.strerror or exc}"
        raise WorkspaceError(msg) from None
    where = f"{count} occurrences" if count > 1 else f"1 occurrence at line {_line_of(text, first)}"
    return f"Edited {path.shown}: replaced {where}.\n{_snippet(updated, first, first + len(new))}"
