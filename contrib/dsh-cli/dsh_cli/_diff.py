"""File edits shown as a coloured diff: ``edit_file`` as the lines it replaces, ``write_file`` as the lines it writes.

Drawn from the call's arguments alone (what the model asked for), so it reads the same live, in
``dsh sessions show`` and after the fact; ``DIFF_LINES`` lines at most, then how many more.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Final

from rich.text import Text

from ._sanitize import clean

__all__ = ["DIFF_LINES", "edit_diff"]

#: the most diff lines shown under a call
DIFF_LINES: Final = 24


def _arguments(arguments: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _lines(kind: str, text: str) -> list[tuple[str, str]]:
    return [(kind, line) for line in clean(text).splitlines()]


def edit_diff(name: str, arguments: str) -> Text | None:
    """The diff of an ``edit_file`` or ``write_file`` call, or ``None`` for any other call (or bad arguments)."""
    parsed = _arguments(arguments)
    if parsed is None:
        return None
    rows: list[tuple[str, str]]
    if (
        name == "edit_file"
        and isinstance(parsed.get("old_text"), str)
        and isinstance(parsed.get("new_text"), str)
    ):
        old = clean(parsed["old_text"]).splitlines()
        new = clean(parsed["new_text"]).splitlines()
        rows = []
        for line in difflib.unified_diff(old, new, lineterm="", n=2):
            if line.startswith(("---", "+++")):
                continue
            kind = "hunk" if line.startswith("@@") else {"-": "old", "+": "new"}.get(line[:1], "same")
            rows.append((kind, line if kind == "hunk" else line[1:]))
    elif name == "write_file" and isinstance(parsed.get("content"), str):
        rows = _lines("new", parsed["content"])
    else:
        return None
    text = Text()
    for kind, line in rows[:DIFF_LINES]:
        if kind == "hunk":
            text.append(f"    {line}\n", style="cyan dim")
        elif kind == "old":
            text.append(f"    - {line}\n", style="red")
        elif kind == "new":
            text.append(f"    + {line}\n", style="green")
        else:
            text.append(f"      {line}\n", style="dim")
    if len(rows) > DIFF_LINES:
        text.append(f"    … {len(rows) - DIFF_LINES} more lines\n", style="dim")
    text.rstrip()
    return text if rows else None
