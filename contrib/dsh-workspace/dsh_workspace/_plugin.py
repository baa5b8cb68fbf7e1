"""The ``workspace`` plugin: registers the workspace tools for every agent."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ._config import WorkspaceConfig
from ._seams import POLICY_SERVICE, SANDBOX_SERVICE
from ._tools import make_tools

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["WorkspacePlugin"]


class WorkspacePlugin:
    """Gives agents the tools a coding agent needs, rooted at the session's cwd.

    ``read_file``, ``list_dir``, ``glob`` and ``grep`` read (and are parallel-safe);
    ``write_file``, ``edit_file`` and ``bash`` change things. Paths stay inside the workspace
    unless the optional ``workspace_policy`` service allows otherwise, and ``bash`` runs through
    the optional ``sandbox`` service when one is loaded (see ``dsh_workspace.WorkspacePolicy``
    and ``dsh_workspace.Sandbox``).
    """

    name = "workspace"
    requires: ClassVar[tuple[str, ...]] = ("tools",)
    uses: ClassVar[tuple[str, ...]] = (POLICY_SERVICE, SANDBOX_SERVICE)
    Config = WorkspaceConfig

    def start(self, ctx: Context) -> None:
        config = ctx.config if isinstance(ctx.config, WorkspaceConfig) else WorkspaceConfig()
        for workspace_tool in make_tools(ctx, config):
            ctx.tools.register(workspace_tool)
