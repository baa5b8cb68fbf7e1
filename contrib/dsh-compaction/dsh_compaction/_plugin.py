"""The ``compaction`` plugin: its hooks on the agent loop, and the ``compaction`` service it provides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_core import CancelSignal, Message, Retry, hookimpl
from dsh_core.llm import Failure

from ._compactor import Compactor
from ._config import CompactionConfig

if TYPE_CHECKING:
    from dsh_core import Context
    from dsh_core.vocabulary import Agent

__all__ = ["CompactionPlugin"]


class CompactionPlugin:
    """Keeps every agent's requests inside its model's context window by summarising old history.

    * ``agent/pre-step``: when the next request is estimated above ``threshold`` times the window,
      the oldest history is summarised (one model call) and replaced by the summary.
    * ``agent/request-error``: a ``CONTEXT_WINDOW_EXCEEDED`` failure is answered by compacting and
      retrying, once per step; a second overflow in the same step fails the turn.
    * ``ctx.compaction.compact_now(agent)`` compacts an idle agent on demand.
    """

    name = "compaction"
    provides = ("compaction",)
    requires = ("llm",)
    Config = CompactionConfig

    def __init__(self) -> None:
        self._compactor = Compactor()

    def start(self, ctx: Context) -> None:
        if isinstance(ctx.config, CompactionConfig):
            self._compactor = Compactor(ctx.config)
        ctx.provide("compaction", self._compactor)

    @property
    def service(self) -> Compactor:
        """The ``compaction`` service."""
        return self._compactor

    @hookimpl
    async def dsh_agent_pre_step(
        self, agent: Agent, turn: int, step: int, prefix: tuple[Message, ...], signal: CancelSignal
    ) -> None:
        """Compact before the step when the request would be over the threshold."""
        await self._compactor.before_step(agent, turn, step, prefix, signal)

    @hookimpl
    async def dsh_agent_request_error(
        self,
        agent: Agent,
        decision: Retry | None,
        failure: Failure,
        turn: int,
        step: int,
        signal: CancelSignal,
    ) -> Retry | None:
        """On a context overflow, compact and retry once per step; keep an earlier decision."""
        if decision is not None or failure.code != "CONTEXT_WINDOW_EXCEEDED":
            return None
        retry = await self._compactor.after_request_error(agent, failure, turn, step, signal)
        return Retry() if retry else None

    @hookimpl
    def dsh_agent_disposed(self, agent: Agent) -> None:
        """Forget the agent."""
        self._compactor.forget(agent)
