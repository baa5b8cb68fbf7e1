"""The ``dsh`` command: ``run`` one turn, ``chat`` in the terminal, manage ``sessions``, and an offline ``demo``.

``main`` is the console script; ``CliPlugin`` (entry point ``cli``) owns the ``[plugins.cli]``
table and, inside the command, provides the ``approval`` service.
"""

from ._exit import ExitCode as ExitCode
from ._main import main as main
from ._plugin import CliConfig as CliConfig
from ._plugin import CliPlugin as CliPlugin

__all__ = ["CliConfig", "CliPlugin", "ExitCode", "main"]
