"""dsh plugin that runs delegated tasks in child agents: the ``in-process`` provider and the ``task`` tool.

The ``subagents`` plugin (entry point) provides ``ctx.subagents`` and its in-process provider; tune it in
``[plugins.subagents]`` (``max_depth``, ``model``).
"""

from ._config import SubagentsConfig as SubagentsConfig
from ._plugin import SubagentsPlugin as SubagentsPlugin
from ._provider import PROVIDER_NAME as PROVIDER_NAME
from ._provider import InProcessProvider as InProcessProvider
from ._provider import InProcessRun as InProcessRun
from ._task import task as task

__all__ = ["PROVIDER_NAME", "InProcessProvider", "InProcessRun", "SubagentsConfig", "SubagentsPlugin", "task"]
