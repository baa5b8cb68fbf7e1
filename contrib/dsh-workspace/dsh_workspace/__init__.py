"""dsh plugin with the tools a coding agent needs, rooted at the session's cwd (the workspace).

Load the ``workspace`` plugin (entry point) and tune it in ``[plugins.workspace]``. A policy
plugin widens or narrows what the tools may touch through two optional services whose shapes
are ``WorkspacePolicy`` and ``Sandbox`` (whose ``wrap`` may return a ``Confined`` command). ``COMMAND_ENV`` adds variables to one ``bash`` call's
environment (set it around ``call_next()`` in a ``tools/execute`` listener).

A plugin that runs commands of its own the way ``bash`` does (background jobs) uses
``start_process`` (a new process group, output merged into one pipe), ``stop_group`` (everything
the command started gone, sandboxed or not) and ``command_environment`` (no credentials).
"""

from ._command_env import COMMAND_ENV as COMMAND_ENV
from ._config import WorkspaceConfig as WorkspaceConfig
from ._plugin import WorkspacePlugin as WorkspacePlugin
from ._process import ChildProcess as ChildProcess
from ._process import start_process as start_process
from ._seams import Access as Access
from ._seams import Confined as Confined
from ._seams import Sandbox as Sandbox
from ._seams import WorkspacePolicy as WorkspacePolicy
from ._shell import stop_group as stop_group
from ._tools import command_environment as command_environment

__all__ = [
    "COMMAND_ENV",
    "Access",
    "ChildProcess",
    "Confined",
    "Sandbox",
    "WorkspaceConfig",
    "WorkspacePlugin",
    "WorkspacePolicy",
    "command_environment",
    "start_process",
    "stop_group",
]
