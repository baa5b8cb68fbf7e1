"""dsh plugin with the ``todo_write`` tool: the agent's plan, logged as ``todo/updated`` and offered in the prompt.

Load the ``todo`` plugin (entry point); ``[plugins.todo] max_items`` caps a list. A UI reads the
current list with ``todos_of(session)`` or from the latest ``todo/updated`` event.
"""

from ._list import TodoItem as TodoItem
from ._list import TodoStatus as TodoStatus
from ._list import TodoUpdated as TodoUpdated
from ._list import render_checklist as render_checklist
from ._plugin import TodoConfig as TodoConfig
from ._plugin import TodoPlugin as TodoPlugin
from ._plugin import todos_of as todos_of

__all__ = ["TodoConfig", "TodoItem", "TodoPlugin", "TodoStatus", "TodoUpdated", "render_checklist", "todos_of"]
