"""What a session's model calls used: tokens, the share of the context window, and the cost when prices are known.

Prices are the model's own (``ctx.llm.model_info(model).prices``: the openai plugin's model table,
or the price registry), the same ones the budget plugin applies, so there is one source. A cost is
shown only when every call counted had a price, never a guess. The figures are folded from the
session's log (``observe`` each event, or ``from_events`` for a resumed log), so a resumed session
shows what it spent before, and a sub-agent's usage that a budget plugin recorded
(``budget/subagent-usage``) is counted too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

import attrs

from dsh_core.llm import Prices
from dsh_core.session_log import AssistantMessageEvent, SessionEvent, TurnStartEvent

from ._render import format_tokens

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["PricesOf", "Usage", "prices_from"]

#: The prices of a model string (``provider/model``), or ``None`` when they are unknown.
PricesOf = Callable[[str], Prices | None]

_ASSISTANT: Final = AssistantMessageEvent.type
_TURN_START: Final = TurnStartEvent.type
_SUBAGENT: Final = "budget/subagent-usage"


def prices_from(ctx: Context) -> PricesOf:
    """A price look-up through the harness's LLM runtime, remembered per model string."""
    known: dict[str, Prices | None] = {}

    def prices_of(model: str) -> Prices | None:
        try:
            return known[model]
        except KeyError:
            pass
        try:
            prices = ctx.llm.model_info(model).prices
        except (LookupError, TypeError, ValueError):
            prices = None
        known[model] = prices
        return prices

    return prices_of


def _no_prices(model: str) -> None:
    return None


def money(value: float) -> str:
    """``$0.0123``, or ``$1.23`` from one unit up."""
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"


@attrs.define
class _Spent:
    input_tokens: int = 0
    output_tokens: int = 0
    #: what sub-agents spent on this session's account (a budget plugin's records)
    subagent_tokens: int = 0
    cost: float = 0.0
    #: usage whose model had no price was counted: the cost is unknown
    unpriced: bool = False

    def add(self, input_tokens: int, output_tokens: int, cost: float | None, *, subagent_tokens: int = 0) -> None:
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.subagent_tokens += subagent_tokens
        if cost is None:
            self.unpriced = True
        else:
            self.cost += cost

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.subagent_tokens

    def cost_text(self) -> str | None:
        if self.unpriced or not self.tokens:
            return None
        return money(self.cost)

    def text(self) -> str:
        """``↑12k ↓3.1k tokens · $0.0123`` (no cost when it is unknown)."""
        line = f"↑{format_tokens(self.input_tokens)} ↓{format_tokens(self.output_tokens)} tokens"
        if self.subagent_tokens:
            line += f" (+{format_tokens(self.subagent_tokens)} by sub-agents)"
        cost = self.cost_text()
        return line if cost is None else f"{line} · {cost}"


@attrs.define
class Usage:
    """Tokens and cost of the session (as its log says) and of its current turn, and the last request's input size."""

    prices_of: PricesOf = _no_prices
    session: _Spent = attrs.Factory(_Spent)
    turn: _Spent = attrs.Factory(_Spent)
    turns: int = 0
    #: the input tokens of the last request: how full the context window is
    last_input: int = 0
    #: the model strings whose usage had no price
    unpriced_models: set[str] = attrs.Factory(set)

    @classmethod
    def from_events(cls, events: Iterable[SessionEvent], prices_of: PricesOf) -> Usage:
        """The usage a log records so far."""
        usage = cls(prices_of)
        for event in events:
            usage.observe(event)
        return usage

    def observe(self, event: SessionEvent) -> None:
        """Count one session event (only a few types matter)."""
        kind = event.type
        if kind == _ASSISTANT:
            payload = event.payload
            if isinstance(payload, AssistantMessageEvent) and payload.usage is not None:
                usage = payload.usage
                message = payload.message
                model = f"{message.provider}/{message.model}"
                prices = self.prices_of(model)
                if prices is None:
                    self.unpriced_models.add(model)
                cost = None if prices is None else prices.cost(usage)
                self.session.add(usage.input_tokens, usage.output_tokens, cost)
                self.turn.add(usage.input_tokens, usage.output_tokens, cost)
                if usage.input_tokens:
                    self.last_input = usage.input_tokens
        elif kind == _TURN_START:
            self.turn = _Spent()
            self.turns += 1
        elif kind == _SUBAGENT:
            data = event.data
            tokens, spent = data.get("tokens"), data.get("cost")
            if type(tokens) is int:
                price = float(spent) if isinstance(spent, int | float) and not isinstance(spent, bool) else None
                self.session.add(0, 0, price, subagent_tokens=tokens)
                self.turn.add(0, 0, price, subagent_tokens=tokens)

    def context_share(self, context_window: int | None) -> str | None:
        """``12% of 128k``: the last request's input against the window, or ``None`` before any request."""
        if not self.last_input or not context_window:
            return None
        return f"{100 * self.last_input / context_window:.0f}% of {format_tokens(context_window)}"

    def cost_text(self) -> str | None:
        """The session's cost (``$0.0123``), or ``None`` when it is unknown."""
        return self.session.cost_text()

    def turn_cost_text(self) -> str | None:
        """The current (or last) turn's cost, or ``None`` when it is unknown."""
        return self.turn.cost_text()

    def report(self) -> list[str]:
        """What ``/cost`` prints: the turn's and the session's tokens and cost, and why a cost is missing."""
        lines = [f"this turn: {self.turn.text()}", f"this session ({self.turns} turns): {self.session.text()}"]
        if self.unpriced_models:
            models = ", ".join(sorted(self.unpriced_models))
            lines.append(
                f"no cost shown: no prices are known for {models} (set input_price and output_price in "
                "[plugins.openai.providers.<provider>.models.<model>])"
            )
        return lines

    def summary(self, session_id: str) -> str | None:
        """The line printed on leaving: the session's tokens, and its cost when known; ``None`` if it used none."""
        if not self.session.tokens:
            return None
        return f"session {session_id}: {self.session.text()}"
