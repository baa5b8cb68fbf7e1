"""The CLI's usage figures: folded from a session's log, priced by the model's own prices (one source)."""

from __future__ import annotations

import pytest
from dsh_budget import BudgetPlugin
from dsh_cli._usage import Usage, prices_from

from dsh_core import AgentOptions, Harness, SessionEvent
from dsh_core.llm import Prices
from dsh_core.llm import Usage as StepUsage
from dsh_core.testing import ScriptedModel

pytestmark = pytest.mark.anyio


async def _log(prices: Prices | None) -> tuple[list[object], Usage]:
    model = ScriptedModel(
        [ScriptedModel.text("one", usage=StepUsage(1000, 100)), ScriptedModel.text("two", usage=StepUsage(2000, 200))],
        prices=prices,
    )
    async with Harness(plugins=[BudgetPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("s1", agent_options=AgentOptions(model="scripted/m")) as handle:
            await handle.agent.run("first")
            await handle.agent.run("second")
            events = list(handle.agent.session.events)
            return events, Usage.from_events(events, prices_from(ctx))


async def test_a_log_gives_the_sessions_and_the_last_turns_tokens_and_cost() -> None:
    """Both turns count for the session, the last one for the turn; cost at the model's prices."""
    _, usage = await _log(Prices(input=1.0, output=10.0))
    assert (usage.session.input_tokens, usage.session.output_tokens) == (3000, 300)
    assert (usage.turn.input_tokens, usage.turn.output_tokens) == (2000, 200)
    assert usage.session.cost == pytest.approx(0.003 + 0.003)
    assert usage.cost_text() == "$0.0060"
    assert usage.turn_cost_text() == "$0.0040"
    assert usage.report() == [
        "this turn: ↑2.0k ↓200 tokens · $0.0040",
        "this session (2 turns): ↑3.0k ↓300 tokens · $0.0060",
    ]
    assert usage.summary("s1") == "session s1: ↑3.0k ↓300 tokens · $0.0060"


async def test_without_prices_no_cost_is_shown_and_report_says_why() -> None:
    """A model with no prices: tokens only, and /cost names the model."""
    _, usage = await _log(None)
    assert usage.cost_text() is None
    assert usage.summary("s1") == "session s1: ↑3.0k ↓300 tokens"
    assert "no prices are known for scripted/m" in usage.report()[-1]


async def test_a_sub_agents_usage_record_counts_for_the_session() -> None:
    """budget/subagent-usage records add their tokens and cost."""
    events, _ = await _log(Prices(input=1.0, output=10.0))
    usage = Usage.from_events(events, lambda model: Prices(input=1.0, output=10.0))
    data = {"turn": 2, "session_id": "c", "tokens": 500, "cost": 0.5}
    record = SessionEvent("budget/subagent-usage", len(events), 0.0, data)
    usage.observe(record)
    assert usage.session.tokens == 3300 + 500
    assert usage.session.cost == pytest.approx(0.506)
    assert "(+500 by sub-agents)" in usage.report()[1]
