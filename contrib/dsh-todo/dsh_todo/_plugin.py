"""The ``todo`` plugin: the ``todo_write`` tool, and the open list offered in every agent's system prompt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from dsh_core import ToolError, ToolExecution, hookimpl, tool
from dsh_core.services import AssemblyContext

from ._list import TodoItem, TodoUpdated, latest_todos, open_items, render_checklist

if TYPE_CHECKING:
    from dsh_core import Context
    from dsh_core.session_log import Session

__all__ = ["TodoConfig", "TodoPlugin", "todos_of"]

_SUMMARY = (
    "Replace your todo list: the plan of a task of several steps, which the user sees as a checklist. "
    "Send the whole list each time, every item with a stable id, its content and its status "
    "(pending, in_progress or completed); keep one item in_progress while you work on it and mark it "
    "completed as soon as it is done. Skip it for a task of one or two steps."
)


@attrs.frozen(kw_only=True)
class TodoConfig:
    """The ``[plugins.todo]`` table."""

    #: the most items one list may hold
    max_items: int = 100


class _Cursor:
    """How far one session's log was read, and the list found there (read incrementally)."""

    __slots__ = ("read", "todos")

    def __init__(self) -> None:
        self.read = 0
        self.todos: tuple[TodoItem, ...] = ()


class TodoPlugin:
    """Gives agents ``todo_write``, logs each list as ``todo/updated``, and shows the open list in the prompt.

    The log is the list's only store: the latest ``todo/updated`` is the session's list, so it is
    there again after a resume, with any persistence backend.
    """

    name = "todo"
    requires: ClassVar[tuple[str, ...]] = ("tools", "sessions", "system_prompt")
    Config = TodoConfig

    def __init__(self) -> None:
        self._cursors: dict[str, _Cursor] = {}
        self._config = TodoConfig()

    def start(self, ctx: Context) -> None:
        if isinstance(ctx.config, TodoConfig):
            self._config = ctx.config
        max_items = self._config.max_items

        @tool(description=_SUMMARY, read_only=True)
        def todo_write(todos: list[TodoItem], *, execution: ToolExecution) -> str:
            """Replace the todo list.

            Args:
                todos: the whole list, in order
            """
            session = ctx.sessions.get(execution.session_id) if execution.session_id else None
            if session is None:
                msg = "todo_write keeps the list of an agent's session, and this call belongs to none"
                raise ToolError(msg)
            _check(todos, max_items)
            session.append(TodoUpdated(todos=tuple(todos)))
            if not todos:
                return "The todo list is now empty."
            left = open_items(todos)
            state = "all done" if not left else f"{left} open"
            return f"Todo list updated ({len(todos)} items, {state}):\n{render_checklist(todos)}"

        ctx.tools.register(todo_write)
        ctx.system_prompt.section("todo", self._prompt_section, order=50)

    def todos(self, session: Session) -> tuple[TodoItem, ...]:
        """The session's current list (empty when it has none), read incrementally from its log."""
        cursor = self._cursors.get(session.id)
        if cursor is None:
            cursor = self._cursors[session.id] = _Cursor()
        events = session.events
        if len(events) < cursor.read:  # another session under the same id: read it afresh
            cursor.read, cursor.todos = 0, ()
        found = latest_todos(events, cursor.read)
        if found is not None:
            cursor.todos = found
        cursor.read = len(events)
        return cursor.todos

    def _prompt_section(self, context: AssemblyContext) -> str:
        agent = context.agent
        if agent is None:
            return ""
        todos = self.todos(agent.session)
        if not open_items(todos):
            return ""
        return (
            "Your todo list (keep it current with todo_write; [~] is in progress, [x] completed):\n"
            + render_checklist(todos)
        )

    @hookimpl
    def dsh_session_disposed(self, session: Any) -> None:
        self._cursors.pop(getattr(session, "id", None), None)  # type: ignore[arg-type]


def _check(todos: Sequence[TodoItem], max_items: int) -> None:
    if len(todos) > max_items:
        msg = f"a todo list holds at most {max_items} items, got {len(todos)}; merge or drop some"
        raise ToolError(msg)
    seen: set[str] = set()
    for index, item in enumerate(todos):
        if not item.id.strip():
            msg = f"todos[{index}].id is empty; give every item a short stable id, e.g. '1' or 'tests'"
            raise ToolError(msg)
        if item.id in seen:
            msg = f"todos[{index}].id {item.id!r} is used twice; every item needs its own id"
            raise ToolError(msg)
        seen.add(item.id)
        if not item.content.strip():
            msg = f"todos[{index}].content is empty; say what is to be done"
            raise ToolError(msg)


def todos_of(session: Session) -> tuple[TodoItem, ...]:
    """The session's current todo list from its log (empty when it has none): for a UI."""
    return latest_todos(session.events) or ()
