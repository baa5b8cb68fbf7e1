"""A sub-agent's usage counts against its parent's session limits: a task tool cannot escape a budget."""

from __future__ import annotations

from typing import Any

import pytest
from dsh_subagents import SubagentsPlugin

from dsh_core import hookimpl
from dsh_core.llm import Usage
from dsh_core.testing import ScriptedModel

from .budget_kit import MODEL, PRICES, budgeted, call, usage_records

pytestmark = pytest.mark.anyio


class TurnEnds:
    """Hears every turn/end of the harness, by session id (a child's session is gone once it is disposed)."""

    def __init__(self) -> None:
        self.ends: dict[str, list[Any]] = {}

    @hookimpl
    def dsh_session_event(self, session: Any, event: Any) -> None:
        if event.type == "turn/end":
            self.ends.setdefault(session.id, []).append(dict(event.data["reason"]))

    def of_child(self) -> list[Any]:
        (child,) = [ends for session_id, ends in self.ends.items() if session_id != "parent"]
        return child


def _task(tokens_in: int, tokens_out: int) -> Any:
    arguments = {"description": "look around", "prompt": "Look around and report."}
    return ScriptedModel.tool_call("task", arguments, usage=Usage(tokens_in, tokens_out))


async def test_a_child_is_stopped_by_its_parents_session_limit_and_the_parent_counts_its_usage() -> None:
    """Parent 600 + child 500 >= 1000: the child stops naming the parent's session; the parent stops too."""
    model = ScriptedModel([_task(500, 100), call(400, 100)], prices=PRICES)
    heard = TurnEnds()
    async with budgeted(model, {"max_session_tokens": 1000}, plugins=[SubagentsPlugin(), heard]) as ctx:
        async with await ctx.agents.create("parent", agent_options=MODEL) as handle:
            parent = handle.agent
            outcome = await parent.run("delegate")
            refused = await parent.run("more")
            events = list(parent.session.events)
    model.assert_consumed()
    # the child was given at most what the parent's session had left
    assert model.requests[1].max_tokens == 400
    assert heard.of_child() == [
        {
            "kind": "stopped",
            "reason": "budget: max_session_tokens reached: 1100 tokens used by session 'parent' "
            "(this sub-agent's parent or above), the limit is 1000",
        }
    ]
    (record,) = [e.data for e in events if e.type == "budget/subagent-usage"]
    assert record["tokens"] == 500
    assert record["turn"] == 1
    assert record["session_id"].startswith("parent-sub-")
    assert record["cost"] == pytest.approx(400 / 1e6 + 100 * 10 / 1e6)
    assert outcome.reason == {
        "kind": "stopped",
        "reason": "budget: max_session_tokens reached: 1100 tokens used by this session, the limit is 1000",
    }
    assert usage_records(events)[0]["tokens"] == 1100
    assert refused.kind == "stopped"
    assert len(model.requests) == 2  # the refused turn made no model call


async def test_a_child_started_when_the_parents_budget_is_spent_makes_no_model_call() -> None:
    """The parent's step spent its whole session budget in the step that delegates: the child's turn is refused."""
    model = ScriptedModel([_task(900, 100)])
    heard = TurnEnds()
    async with budgeted(model, {"max_session_tokens": 1000}, plugins=[SubagentsPlugin(), heard]) as ctx:
        async with await ctx.agents.create("parent", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("delegate")
            records = [e.data for e in handle.agent.session.events if e.type == "budget/subagent-usage"]
    assert len(model.requests) == 1
    assert records == []  # the child spent nothing
    (child_end,) = heard.of_child()
    assert child_end["kind"] == "stopped"
    assert "max_session_tokens reached: 1000 tokens used by session 'parent'" in child_end["reason"]
    assert outcome.kind == "stopped"
