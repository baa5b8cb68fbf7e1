"""Configuration of the ``budget`` plugin: the ``[plugins.budget]`` table (SPEC §10.3)."""

from __future__ import annotations

import math
from typing import Any

import attrs

__all__ = ["BudgetConfig"]


def _positive(instance: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    """A limit is absent, or a positive finite number (a bool is not one)."""
    if value is None:
        return
    if type(value) is bool or not isinstance(value, int | float) or not (math.isfinite(value) and value > 0):
        msg = f"{attribute.name} must be a positive number, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class BudgetConfig:
    """The ``[plugins.budget]`` table: every limit is optional, and absent means no limit.

    Tokens are ``input_tokens + output_tokens`` of each step's ``Usage``; costs are in the currency
    of the price table (``ModelInfo.prices``). A limit is reached when the usage is at least the
    limit.
    """

    #: tokens one turn may use (its sub-agents' included)
    max_turn_tokens: int | None = attrs.field(default=None, validator=_positive)
    #: tokens the whole session may use, across turns and resumes (its sub-agents' included)
    max_session_tokens: int | None = attrs.field(default=None, validator=_positive)
    #: what one turn may cost
    max_turn_cost: float | None = attrs.field(default=None, validator=_positive)
    #: what the whole session may cost
    max_session_cost: float | None = attrs.field(default=None, validator=_positive)
    #: model calls in one turn
    max_steps_per_turn: int | None = attrs.field(default=None, validator=_positive)
    #: tool calls in one turn; a call beyond the limit is denied
    max_tool_calls_per_turn: int | None = attrs.field(default=None, validator=_positive)

    @property
    def wants_cost(self) -> bool:
        """Whether a cost limit is set (so prices must be known)."""
        return self.max_turn_cost is not None or self.max_session_cost is not None
