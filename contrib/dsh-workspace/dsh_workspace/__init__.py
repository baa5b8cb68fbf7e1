"""dsh plugin with the tools a coding agent needs, rooted at the session's cwd (the workspace).

Load the ``workspace`` plugin (entry point) and tune it in ``[plugins.workspace]``. A policy
plugin widens or narrows what the tools may touch through two optional services whose shapes
are ``WorkspacePolicy`` and ``Sandbox`` (whose ``wrap`` may return a ``Confined`` command). ``COMMAND_ENV`` adds variables to one ``bash`` call's
environment (set it around ``call_next()`` in a ``tools/execute`` listener).
"""

from ._command_env import COMMAND_ENV as COMMAND_ENV
from ._config import WorkspaceConfig as WorkspaceConfig
from ._plugin import WorkspacePlugin as WorkspacePlugin
from ._seams import Access as Access
from ._seams import Confined as Confined
from ._seams import Sandbox as Sandbox
from ._seams import WorkspacePolicy as WorkspacePolicy

__all__ = ["COMMAND_ENV", "Access", "Confined", "Sandbox", "WorkspaceConfig", "WorkspacePlugin", "WorkspacePolicy"]
