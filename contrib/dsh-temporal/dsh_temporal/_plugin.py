"""The ``temporal`` plugin: its config table, and the worker's answer to calls that need approval.

Found through the entry point it is inert: it validates ``[plugins.temporal]`` and keeps it for
``dsh worker`` and ``TemporalAgents``. The worker passes its own instance with ``serving=True``,
which also provides the ``approval`` service: a worker has no terminal to ask on, so a call an
``ask`` rule matches is denied with a reason saying remote approval is not available.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._config import TemporalConfig

if TYPE_CHECKING:
    from dsh_core import Context, ToolExecution

__all__ = ["RemoteApprovalUnavailable", "TemporalPlugin"]


class RemoteApprovalUnavailable(RuntimeError):
    """A worker was asked to approve a call: nobody is there to ask."""


class _NoRemoteApproval:
    """The ``approval`` service of a worker: every ask is denied, saying why."""

    async def approve(self, execution: ToolExecution, reason: str) -> bool:
        msg = (
            f"remote approval is not available: tool {execution.name!r} needs approval, "
            "and a dsh worker has no one to ask (allow or deny it with a rule instead)"
        )
        raise RemoteApprovalUnavailable(msg)


class TemporalPlugin:
    """Entry point ``temporal``: ``[plugins.temporal]`` address, namespace, task_queue, heartbeat_timeout."""

    name = "temporal"
    Config = TemporalConfig

    def __init__(self, *, serving: bool = False) -> None:
        self.serving = serving
        #: read by the host on the instance
        self.provides: tuple[str, ...] = ("approval",) if serving else ()
        self.config = TemporalConfig()

    def start(self, ctx: Context) -> None:
        if isinstance(ctx.config, TemporalConfig):
            self.config = ctx.config
        if self.serving:
            ctx.provide("approval", _NoRemoteApproval())
