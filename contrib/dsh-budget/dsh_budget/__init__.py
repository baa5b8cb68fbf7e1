"""dsh plugin that stops a run before it spends too much: token, cost, step and tool-call limits.

Load the ``budget`` plugin (entry point) and set its limits in ``[plugins.budget]``.
"""

from ._config import BudgetConfig as BudgetConfig
from ._events import BudgetUsageEvent as BudgetUsageEvent
from ._events import SubagentUsageEvent as SubagentUsageEvent
from ._plugin import BudgetPlugin as BudgetPlugin
from ._tally import Tally as Tally

__all__ = ["BudgetConfig", "BudgetPlugin", "BudgetUsageEvent", "SubagentUsageEvent", "Tally"]
