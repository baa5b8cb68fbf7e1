"""Workspace path resolution: turn a tool's path argument into a real path, and refuse escapes.

The workspace is the session's cwd (``execution.cwd``). A path argument is taken relative to
it (``~`` is expanded; absolute paths are taken as they are), then resolved with every symlink
followed. A result inside the workspace is used; one outside is refused unless the
``workspace_policy`` service allows it. The refusal says how the path escaped: through ``..``,
as an absolute path elsewhere, or through a symlink that points out.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import anyio.to_thread
import attrs

from dsh_core import ToolError

from ._seams import POLICY_SERVICE, Access

if TYPE_CHECKING:
    from dsh_core import Context, ToolExecution

__all__ = ["ResolvedPath", "Workspace", "WorkspaceError", "workspace_of"]


class WorkspaceError(ToolError):
    """A tool call the workspace refuses or cannot do; the model reads ``Error: <message>``.

    A ``ToolError``: raised out of a tool body, the tool runtime makes it the call's ``TOOL_ERROR``
    result, so the tools need no ``try`` of their own.
    """


@attrs.frozen
class ResolvedPath:
    """A path argument after resolution."""

    #: the argument as the model gave it
    raw: str
    #: absolute, normalised, symlinks followed
    real: str
    #: how the tools show it: relative to the workspace (posix), or absolute when outside
    shown: str
    inside: bool


@attrs.frozen
class Workspace:
    """The root a call works in, and the policy it consults for paths outside it."""

    #: the workspace root, absolute and with symlinks followed
    root: str
    execution: ToolExecution
    ctx: Context

    def show(self, real: str) -> str:
        """``real`` as the tools show it: relative to the root, or absolute when outside."""
        if real == self.root:
            return "."
        if _is_within(real, self.root):
            return os.path.relpath(real, self.root)
        return real

    async def resolve(self, raw: str, access: Access) -> ResolvedPath:
        """Resolve ``raw`` for ``access``; a path outside the workspace must be allowed by the policy.

        :raises WorkspaceError: for an empty path, or one that leaves the workspace and is not allowed.
        """
        if not raw or not raw.strip():
            msg = (
                "the path is empty; give a path relative to the workspace (for example 'src/main.py' or '.')"
            )
            raise WorkspaceError(msg)
        if "\x00" in raw:
            msg = f"the path {raw!r} contains a NUL character, which no file name can hold"
            raise WorkspaceError(msg)
        resolved, lexical, expanded = await anyio.to_thread.run_sync(self._locate, raw)
        if resolved.inside:
            return resolved
        policy = self.ctx.get_service(POLICY_SERVICE)
        if policy is not None and await policy.allows_outside(self.execution, resolved.real, access) is True:
            return resolved
        raise WorkspaceError(self._escape_message(raw, expanded, lexical, resolved.real, access))

    def _locate(self, raw: str) -> tuple[ResolvedPath, str, str]:
        """The resolved path, the lexically normalised one and ``raw`` with ``~`` expanded (blocking)."""
        expanded = os.path.expanduser(raw)
        joined = os.path.join(self.root, expanded)  # an absolute `expanded` replaces the root
        lexical = os.path.normpath(joined)
        try:
            real = os.path.realpath(joined)
        except OSError as exc:  # a symlink on the way vanished while it was followed (a race)
            msg = f"the path {raw!r} changed while its symlinks were followed ({exc.strerror or exc}); call again"
            raise WorkspaceError(msg) from None
        inside = real == self.root or _is_within(real, self.root)
        return ResolvedPath(raw=raw, real=real, shown=self.show(real), inside=inside), lexical, expanded

    def _escape_message(self, raw: str, expanded: str, lexical: str, real: str, access: Access) -> str:
        verb = "write" if access == "write" else "read"
        if lexical == self.root or _is_within(lexical, self.root):
            how = f"it goes through a symlink that points outside the workspace (to {real})"
        elif os.path.isabs(expanded):
            how = "it is an absolute path outside the workspace"
        else:
            how = f"it leaves the workspace through '..' (to {real})"
        return (
            f"refused to {verb} {raw!r}: {how}. The tools work inside the workspace {self.root}; "
            "use a path inside it (paths outside need a permission mode or rule that allows them)."
        )


def _is_within(path: str, root: str) -> bool:
    return path.startswith(root.rstrip(os.sep) + os.sep)


async def workspace_of(execution: ToolExecution, ctx: Context, *, in_thread: bool = True) -> Workspace:
    """The workspace of ``execution``: its cwd, resolved (in a worker thread unless ``in_thread`` is false).

    :raises WorkspaceError: when the call has no cwd, or the cwd is not a directory.
    """
    cwd = execution.cwd
    if not cwd:
        msg = (
            f"tool {execution.name!r} works in a workspace, but this agent has no working directory. "
            "Tell the user to give the agent a cwd, e.g. ctx.agents.create(id, meta={'cwd': '/path/to/project'})."
        )
        raise WorkspaceError(msg)
    root = await anyio.to_thread.run_sync(_existing_directory, cwd) if in_thread else _existing_directory(cwd)
    if root is None:
        msg = (
            f"the workspace {cwd} (this agent's cwd) is not an existing directory; tell the user to create it"
        )
        raise WorkspaceError(msg)
    return Workspace(root=root, execution=execution, ctx=ctx)


def _existing_directory(path: str) -> str | None:
    real = os.path.realpath(path)
    return real if os.path.isdir(real) else None
