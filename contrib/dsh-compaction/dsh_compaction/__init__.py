"""dsh plugin that keeps a conversation inside its model's context window by summarising its oldest part.

Load the ``compaction`` plugin (entry point) and tune it in ``[plugins.compaction]``; the service
is ``ctx.compaction`` (``await ctx.compaction.compact_now(agent)``).
"""

from ._compactor import CompactionBusyError as CompactionBusyError
from ._compactor import CompactionError as CompactionError
from ._compactor import CompactionFailedError as CompactionFailedError
from ._compactor import CompactionResult as CompactionResult
from ._compactor import Compactor as Compactor
from ._config import CompactionConfig as CompactionConfig
from ._estimate import Pressure as Pressure
from ._plugin import CompactionPlugin as CompactionPlugin

__all__ = [
    "CompactionBusyError",
    "CompactionConfig",
    "CompactionError",
    "CompactionFailedError",
    "CompactionPlugin",
    "CompactionResult",
    "Compactor",
    "Pressure",
]
