"""The two optional services the workspace tools consult: a path policy and a process sandbox.

The workspace plugin works alone, and then it is strict: every path stays inside the workspace
and ``bash`` runs unconfined. A policy plugin (``permissions`` is one) widens or narrows that by
providing, under these service names, objects of these shapes; the workspace imports nothing
from it, and it need import nothing from here (the protocols are structural).

``workspace_policy``
    Asked only for a path that resolves outside the workspace (``..``, an absolute path
    elsewhere, a symlink pointing out). ``True`` lets the tool touch it; ``False`` refuses it
    with a message that names the path and the workspace.

``sandbox``
    Asked for every ``bash`` command: returns the argv to run instead (``bwrap ... -- argv``),
    the argv unchanged when the policy runs it unconfined, or raises to refuse the command. The
    workspace never falls back to running unconfined after a refusal: the exception's message is
    the tool's error. A sandbox that hands its wrapper data on descriptors (bubblewrap's
    ``--file FD``) returns a ``Confined`` instead: the argv and those descriptors, which the
    process inherits under the same numbers and the workspace closes once it has started.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from dsh_core import ToolExecution

__all__ = ["POLICY_SERVICE", "SANDBOX_SERVICE", "Access", "Confined", "Sandbox", "WorkspacePolicy"]

#: What a tool does with a path: ``read`` (read_file, list_dir, glob, grep) or ``write``.
Access: TypeAlias = Literal["read", "write"]

#: The service names the workspace looks up (``ctx.get_service``) at call time.
POLICY_SERVICE = "workspace_policy"
SANDBOX_SERVICE = "sandbox"


@runtime_checkable
class WorkspacePolicy(Protocol):
    """``ctx.workspace_policy``: may this call touch a path outside the workspace?"""

    async def allows_outside(self, execution: ToolExecution, path: str, access: Access) -> bool:
        """``path`` is absolute and fully resolved (symlinks followed); ``True`` allows it."""
        ...


@runtime_checkable
class Confined(Protocol):
    """What ``Sandbox.wrap`` may return instead of an argv: the argv, and descriptors it needs.

    ``pass_fds`` are open descriptors of the harness process (not inheritable, fresh for this
    command) that the command's process inherits under the same numbers, e.g. a pipe holding
    data for the wrapper. They become the workspace's: it closes them once the process has
    started, or has failed to.
    """

    @property
    def argv(self) -> Sequence[str]: ...

    @property
    def pass_fds(self) -> Sequence[int]: ...


@runtime_checkable
class Sandbox(Protocol):
    """``ctx.sandbox``: confines a command, or refuses to run it."""

    async def wrap(self, argv: Sequence[str], *, cwd: str, execution: ToolExecution) -> Sequence[str] | Confined:
        """The argv to run for ``argv`` in ``cwd`` (the workspace), or a ``Confined`` one.

        Raise (any ``Exception``) when the command must not run, e.g. a sandbox is required but
        cannot be made; the message becomes the tool's error.
        """
        ...
