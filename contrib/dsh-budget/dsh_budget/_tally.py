"""What a session has used, folded from its log: per turn and in all, tokens, cost, steps, tool calls.

The log is the source of truth, so totals survive resume: a ``Tally`` reads a session's events
from where it stopped last time (the first read starts after the inherited seed) and adds up
every ``assistant/message`` usage (its cost at the prices of the model that answered) and every
``budget/subagent-usage`` record (what a sub-agent spent on this session's account).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from dsh_core.llm import Prices
from dsh_core.session_log import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    SessionEvent,
    StepStartEvent,
    ToolCallEvent,
    TurnStartEvent,
)

from ._events import SubagentUsageEvent

__all__ = ["PricesOf", "Tally"]

#: The prices of ``(provider, model)``, or ``None`` when they are unknown.
PricesOf = Callable[[str, str], Prices | None]

_CHUNK: Final = AssistantChunkEvent.type
_ASSISTANT: Final = AssistantMessageEvent.type
_STEP: Final = StepStartEvent.type
_TOOL_CALL: Final = ToolCallEvent.type
_TURN_START: Final = TurnStartEvent.type
_SUBAGENT: Final = SubagentUsageEvent.type


class Tally:
    """Running totals of one session. ``read(events)`` folds the events appended since the last read.

    ``cost`` counts only what had prices; ``unpriced`` says some usage had none (then the true cost
    is unknown). ``own_tokens`` / ``own_cost`` are this session's own steps only, which is what
    it reports to its ancestors (a descendant reports to each ancestor itself).
    """

    __slots__ = (
        "_last_model",
        "_last_prices",
        "_prices_of",
        "_read",
        "cost",
        "own_cost",
        "own_tokens",
        "own_unpriced",
        "tokens",
        "turn",
        "turn_cost",
        "turn_steps",
        "turn_tokens",
        "turn_tool_calls",
        "turn_unpriced",
        "unpriced",
    )

    def __init__(self, prices_of: PricesOf, *, start: int = 0) -> None:
        self._prices_of = prices_of
        #: the model of the last reply and its prices: most replies come from the same model
        self._last_model: tuple[str | None, str | None] | None = None
        self._last_prices: Prices | None = None
        self._read = start
        self.tokens = 0
        self.cost = 0.0
        self.unpriced = False
        self.own_tokens = 0
        self.own_cost = 0.0
        #: how many of this session's own replies had no prices
        self.own_unpriced = 0
        self.turn = 0
        self.turn_tokens = 0
        self.turn_cost = 0.0
        self.turn_unpriced = False
        self.turn_steps = 0
        self.turn_tool_calls = 0

    def read(self, events: Sequence[SessionEvent]) -> None:
        """Fold ``events[last read:]`` into the totals."""
        index = self._read
        stop = len(events)
        if index >= stop:
            return
        self._read = stop
        for event in events[index:stop]:  # one slice: indexing the log's view event by event costs more
            kind = event.type
            if kind == _CHUNK:  # most events are chunks: out of the way first
                continue
            if kind == _ASSISTANT:
                self._reply(event)
            elif kind == _STEP:
                self.turn_steps += 1
            elif kind == _TOOL_CALL:
                self.turn_tool_calls += 1
            elif kind == _TURN_START:
                payload = event.payload
                self.turn = payload.turn if isinstance(payload, TurnStartEvent) else self.turn + 1
                self.turn_tokens = self.turn_steps = self.turn_tool_calls = 0
                self.turn_cost = 0.0
                self.turn_unpriced = False
            elif kind == _SUBAGENT:
                self._subagent(event)

    def _reply(self, event: SessionEvent) -> None:
        payload = event.payload
        if not isinstance(payload, AssistantMessageEvent) or payload.usage is None:
            return
        usage = payload.usage
        tokens = usage.input_tokens + usage.output_tokens
        message = payload.message
        model = (message.provider, message.model)
        if model == self._last_model:
            prices = self._last_prices
        else:
            prices = self._last_prices = self._prices_of(message.provider or "", message.model or "")
            self._last_model = model
        self.tokens += tokens
        self.own_tokens += tokens
        self.turn_tokens += tokens
        if prices is None:
            self.unpriced = self.turn_unpriced = True
            self.own_unpriced += 1
            return
        cost = prices.cost(usage)
        self.cost += cost
        self.own_cost += cost
        self.turn_cost += cost

    def _subagent(self, event: SessionEvent) -> None:
        payload = event.payload
        if not isinstance(payload, SubagentUsageEvent):
            return
        self.tokens += payload.tokens
        in_turn = payload.turn == self.turn
        if in_turn:
            self.turn_tokens += payload.tokens
        if payload.cost is None:
            self.unpriced = True
            self.turn_unpriced = self.turn_unpriced or in_turn
            return
        self.cost += payload.cost
        if in_turn:
            self.turn_cost += payload.cost

    @property
    def turn_cost_or_none(self) -> float | None:
        """The turn's cost, or ``None`` when some of its usage had no prices."""
        return None if self.turn_unpriced else self.turn_cost

    @property
    def cost_or_none(self) -> float | None:
        """The session's cost, or ``None`` when some of its usage had no prices."""
        return None if self.unpriced else self.cost
