"""What a session's model calls used: tokens, the share of the context window, and the cost when prices are configured.

Prices come from ``[plugins.cli.prices."provider/model"]`` (``input`` and ``output``, in dollars per
million tokens); with none configured for the model no cost is shown, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._render import format_tokens

__all__ = ["Usage", "price_of"]


def price_of(prices: Any, model: str) -> tuple[float, float] | None:
    """``(input, output)`` dollars per million tokens for ``model`` from ``[plugins.cli.prices]``, or ``None``."""
    if not isinstance(prices, Mapping):
        return None
    entry = prices.get(model)
    if not isinstance(entry, Mapping):
        return None
    values = (entry.get("input"), entry.get("output"))
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return None
    return (float(values[0]), float(values[1]))  # type: ignore[arg-type]  # checked just above


@attrs.define
class Usage:
    """Tokens used so far (the whole session as this process saw it), and the last request's input size."""

    input_tokens: int = 0
    output_tokens: int = 0
    #: dollars, for the calls whose model had a price
    cost: float = 0.0
    priced: bool = False
    #: the input tokens of the last request: how full the context window is
    last_input: int = 0

    def add(self, input_tokens: int, output_tokens: int, price: tuple[float, float] | None) -> None:
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        if input_tokens:
            self.last_input = input_tokens
        if price is not None:
            self.cost += (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
            self.priced = True

    def context_share(self, context_window: int | None) -> str | None:
        """``12% of 128k``: the last request's input against the window, or ``None`` before any request."""
        if not self.last_input or not context_window:
            return None
        return f"{100 * self.last_input / context_window:.0f}% of {format_tokens(context_window)}"

    def cost_text(self) -> str | None:
        """``$0.0123``, or ``None`` when no price is configured."""
        if not self.priced:
            return None
        return f"${self.cost:.4f}" if self.cost < 1 else f"${self.cost:.2f}"
