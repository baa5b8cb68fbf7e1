"""The session-log events of the ``budget`` plugin."""

from __future__ import annotations

import attrs

from dsh_core.session_log import LogEvent, log_event

__all__ = ["BudgetUsageEvent", "SubagentUsageEvent"]


@log_event("budget/usage", in_turn=True)
@attrs.frozen(kw_only=True)
class BudgetUsageEvent(LogEvent):
    """What turn ``turn`` used, written just before its ``turn/end``: ``tokens`` (input + output of
    every step, its sub-agents' included) and ``cost`` (``null`` when a model's prices are unknown)."""

    turn: int
    tokens: int
    cost: float | None


@log_event("budget/subagent-usage")
@attrs.frozen(kw_only=True)
class SubagentUsageEvent(LogEvent):
    """A sub-agent (a descendant session, ``session_id``) used ``tokens`` costing ``cost`` during
    turn ``turn`` of this session: it counts against this session's limits, and survives resume."""

    turn: int
    session_id: str
    tokens: int
    cost: float | None
