"""dsh plugin that stores large tool outputs with the session and shows the model a preview and ``read_output``.

Load the ``spill`` plugin (entry point) and tune it in ``[plugins.spill]`` (``max_inline_bytes``,
``preview_chars``).
"""

from ._plugin import SpillConfig as SpillConfig
from ._plugin import SpillPlugin as SpillPlugin
from ._stored import SpillStored as SpillStored

__all__ = ["SpillConfig", "SpillPlugin", "SpillStored"]
