"""The agent's todo list as a checklist above the prompt of ``dsh chat``.

It reads ``todo/updated`` events (SPEC §10.6: ``{todos: [{id, content, status}]}``) from the
current session's log, incrementally, so it needs no import of the plugin that writes them. The
checklist shows while an item is open and goes once every item is completed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prompt_toolkit.formatted_text import StyleAndTextTuples

from ._render import TODO_UPDATED
from ._sanitize import clean_line

__all__ = ["TodoChecklist"]

#: items shown at most; the rest are counted
_MOST = 10
_MARKS = {"completed": ("✔ ", "fg:ansigreen"), "in_progress": ("▶ ", "bold fg:ansicyan"), "pending": ("○ ", "")}


class TodoChecklist:
    """``lines()`` for the live area: the open list of the session ``session_of()`` returns."""

    def __init__(self, session_of: Callable[[], Any]) -> None:
        self._session_of = session_of
        self._session: Any = None
        self._read = 0
        self._todos: Sequence[Mapping[str, Any]] = ()

    def todos(self) -> Sequence[Mapping[str, Any]]:
        """The current list (read on from where the last call stopped)."""
        session = self._session_of()
        if session is not self._session:
            self._session, self._read, self._todos = session, 0, ()
        if session is None:
            return ()
        events = session.events
        for index in range(self._read, len(events)):
            event = events[index]
            if event.type == TODO_UPDATED:
                todos = event.data.get("todos")
                self._todos = [item for item in todos if isinstance(item, Mapping)] if isinstance(todos, Sequence) else ()
        self._read = len(events)
        return self._todos

    def lines(self) -> StyleAndTextTuples:
        todos = self.todos()
        if not any(item.get("status") != "completed" for item in todos):
            return []
        done = sum(1 for item in todos if item.get("status") == "completed")
        parts: StyleAndTextTuples = [("bold", "Todo"), ("fg:ansibrightblack", f" {done}/{len(todos)} done"), ("", "\n")]
        for item in todos[:_MOST]:
            mark, style = _MARKS.get(str(item.get("status")), ("? ", ""))
            text = clean_line(str(item.get("content", "")))
            if item.get("status") == "completed":
                style, text_style = "fg:ansigreen", "fg:ansibrightblack strike"
            else:
                text_style = style
            parts += [("", "  "), (style, mark), (text_style, text), ("", "\n")]
        if len(todos) > _MOST:
            parts += [("fg:ansibrightblack", f"  … {len(todos) - _MOST} more"), ("", "\n")]
        return parts
