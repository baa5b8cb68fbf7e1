"""The ``temporal`` plugin: its config table, and the worker's answerer for calls that need approval.

Found through the entry point it is inert: it validates ``[plugins.temporal]`` and keeps it for
``dsh worker`` and ``TemporalAgents``. The worker passes its own instance with ``serving=True``,
which also provides the ``approval`` service: a worker has no one to ask, so when a call waits for
approval (no policy answered it) the service tells the turn activity to let go of the session —
its turn stays parked in the log (SPEC §10.1) and no worker slot is held while it waits; the
answer comes through ``TemporalAgents.resolve_approval`` (a workflow update) and the next turn
activity, on any worker, re-opens the turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from ._config import TemporalConfig

if TYPE_CHECKING:
    from dsh_core import Context, ToolExecution

__all__ = ["ParkRemoteAsks", "TemporalPlugin"]


class ParkRemoteAsks:
    """The ``approval`` service of a worker: a call that waits parks its turn (the activity lets go)."""

    approval_by = "temporal"

    def __init__(self) -> None:
        #: session id -> what the running turn activity does when one of its calls waits
        self._parkers: dict[str, Callable[[], None]] = {}

    def on_wait(self, session_id: str, park: Callable[[], None]) -> Callable[[], None]:
        """While a turn activity runs ``session_id``: call ``park()`` when a call waits; returns the remover."""
        self._parkers[session_id] = park

        def remove() -> None:
            if self._parkers.get(session_id) is park:
                del self._parkers[session_id]

        return remove

    async def approve(self, execution: ToolExecution, reason: str) -> bool:
        park = self._parkers.get(execution.session_id or "")
        if park is not None:
            park()  # the activity disposes the agent: this wait ends with the turn parked in the log
        await anyio.sleep_forever()  # never answers: the answer comes through the engine
        raise AssertionError("unreachable")  # pragma: no cover


class TemporalPlugin:
    """Entry point ``temporal``: ``[plugins.temporal]`` address, namespace, task_queue, heartbeat_timeout."""

    name = "temporal"
    Config = TemporalConfig

    def __init__(self, *, serving: bool = False) -> None:
        self.serving = serving
        #: read by the host on the instance
        self.provides: tuple[str, ...] = ("approval",) if serving else ()
        self.config = TemporalConfig()
        self.asks = ParkRemoteAsks()

    def start(self, ctx: Context) -> None:
        if isinstance(ctx.config, TemporalConfig):
            self.config = ctx.config
        if self.serving:
            ctx.provide("approval", self.asks)
