"""The todo list as data: its items, the ``todo/updated`` event that replaces it, and reading it back from a log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

import attrs

from dsh_core.session_log import LogEvent, SessionEvent, log_event
from dsh_core.vocabulary import ObjectCodec

__all__ = ["TodoItem", "TodoStatus", "TodoUpdated", "latest_todos", "open_items", "render_checklist"]

#: Where an item stands: not started, being worked on, done.
TodoStatus: TypeAlias = Literal["pending", "in_progress", "completed"]

#: the mark each status gets in a checklist (the model's prompt, the tool's answer, the CLI)
MARKS: dict[str, str] = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


@attrs.frozen(kw_only=True)
class TodoItem:
    """One item: a short stable id you choose, what is to be done, and its status."""

    id: str
    content: str
    status: TodoStatus


ObjectCodec(TodoItem)  # gives TodoItem its JSON, so that TodoUpdated's tuple of items has one too


@log_event("todo/updated")
@attrs.frozen(kw_only=True)
class TodoUpdated(LogEvent):
    """The agent replaced its todo list (``todo_write``): ``todos`` is the whole new list, in order,
    each item ``{id, content, status}`` with status ``pending``, ``in_progress`` or ``completed``.
    The latest one in a log is the session's list."""

    todos: tuple[TodoItem, ...]


def latest_todos(events: Sequence[SessionEvent], start: int = 0) -> tuple[TodoItem, ...] | None:
    """The list of the last ``todo/updated`` at or after index ``start``, or ``None`` when there is none."""
    for index in range(len(events) - 1, start - 1, -1):
        event = events[index]
        if event.type == TodoUpdated.type:
            payload = event.payload
            return (payload if isinstance(payload, TodoUpdated) else TodoUpdated.from_data(event.data)).todos
    return None


def open_items(todos: Sequence[TodoItem]) -> int:
    """How many items are not completed."""
    return sum(1 for item in todos if item.status != "completed")


def render_checklist(todos: Sequence[TodoItem]) -> str:
    """One line per item: ``[x] done``, ``[~] in progress``, ``[ ] pending``."""
    return "\n".join(f"{MARKS[item.status]} {item.content}" for item in todos)
