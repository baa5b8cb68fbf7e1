"""dsh plugin with the tools a coding agent needs, rooted at the session's cwd (the workspace).

Load the ``workspace`` plugin (entry point) and tune it in ``[plugins.workspace]``. A policy
plugin widens or narrows what the tools may touch through two optional services whose shapes
are ``WorkspacePolicy`` and ``Sandbox`` (whose ``wrap`` may return a ``Confined`` command). ``COMMAND_ENV`` adds variables to one ``bash`` call's
environment (set it around ``call_next()`` in a ``tools/execute`` listener).

A plugin that runs commands of its own the way ``bash`` does (background jobs) uses
``confined_command`` (the shell found, the ``sandbox`` service asked, the environment without
credentials: a ``ConfinedCommand``), ``start_process`` (a new process group, output merged into one
pipe) and ``stop_group`` (everything the command started gone, sandboxed or not).
"""

from ._command_env import COMMAND_ENV as COMMAND_ENV
from ._config import WorkspaceConfig as WorkspaceConfig
from ._confine import ConfinedCommand as ConfinedCommand
from ._confine import command_environment as command_environment
from ._confine import confined_command as confined_command
from ._plugin import WorkspacePlugin as WorkspacePlugin
from ._process import ChildProcess as ChildProcess
from ._process import start_process as start_process
from ._seams import Access as Access
from ._seams import Confined as Confined
from ._seams import Sandbox as Sandbox
from ._seams import WorkspacePolicy as WorkspacePolicy
from ._shell import stop_group as stop_group

__all__ = [
    "COMMAND_ENV",
    "Access",
    "ChildProcess",
    "Confined",
    "ConfinedCommand",
    "Sandbox",
    "WorkspaceConfig",
    "WorkspacePlugin",
    "WorkspacePolicy",
    "command_environment",
    "confined_command",
    "start_process",
    "stop_group",
]
