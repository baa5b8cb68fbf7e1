"""Every limit of ``[plugins.budget]``, per turn and per session; max_tokens lowered; budget/usage at each turn end."""

from __future__ import annotations

from typing import Any

import pytest
from dsh_budget import BudgetPlugin

from dsh_core import ConfigError, Harness
from dsh_core.llm import Usage
from dsh_core.testing import Reply, ScriptedModel

from .budget_kit import MODEL, PRICES, answer, budgeted, call, step_count, usage_records

pytestmark = pytest.mark.anyio


async def _run(model: ScriptedModel, limits: dict[str, Any], *prompts: str) -> tuple[list[Any], list[Any]]:
    async with budgeted(model, limits) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            outcomes = [await handle.agent.run(prompt) for prompt in prompts]
            return outcomes, list(handle.agent.session.events)


async def test_max_turn_tokens_stops_the_turn_naming_the_key_figure_and_limit() -> None:
    """A turn that used >= max_turn_tokens ends stopped after that step; the next turn starts afresh."""
    model = ScriptedModel([call(600, 100), call(300, 50), answer("second turn", 100, 10)])
    outcomes, events = await _run(model, {"max_turn_tokens": 1000}, "one", "two")
    assert outcomes[0].reason == {
        "kind": "stopped",
        "reason": "budget: max_turn_tokens reached: 1050 tokens used in this turn, the limit is 1000",
    }
    assert outcomes[1].kind == "completed"
    model.assert_consumed()
    assert usage_records(events) == [
        {"turn": 1, "tokens": 1050, "cost": None},
        {"turn": 2, "tokens": 110, "cost": None},
    ]


async def test_max_tokens_is_lowered_to_what_the_tightest_token_limit_leaves() -> None:
    """Each request's max_tokens is at most what the turn and session token limits leave."""
    model = ScriptedModel([call(600, 100), answer("done", 100, 20)], max_output_tokens=8192)
    limits = {"max_turn_tokens": 1000, "max_session_tokens": 5000}
    outcomes, _ = await _run(model, limits, "go")
    assert outcomes[0].kind == "completed"
    assert [request.max_tokens for request in model.requests] == [1000, 300]


async def test_max_tokens_is_left_alone_while_the_model_cannot_use_the_room_then_lowered() -> None:
    """A model that writes at most 100 tokens under a 1000-token turn limit: no max_tokens until fewer than 100 are left."""
    model = ScriptedModel([call(600, 100), call(200, 50), answer("done", 10, 5)], max_output_tokens=100)
    outcomes, _ = await _run(model, {"max_turn_tokens": 1000}, "go")
    assert outcomes[0].kind == "completed"
    assert [request.max_tokens for request in model.requests] == [None, None, 50]


async def test_a_lower_max_tokens_of_the_agent_is_kept() -> None:
    """max_tokens already below what the limits leave is not raised."""
    from dsh_core import AgentOptions

    model = ScriptedModel([answer("done", 10, 5)])
    async with budgeted(model, {"max_turn_tokens": 1000}) as ctx:
        options = AgentOptions(model="scripted/test", max_tokens=64)
        async with await ctx.agents.create("a1", agent_options=options) as handle:
            await handle.agent.run("go")
    assert model.requests[0].max_tokens == 64


async def test_max_session_tokens_stops_then_refuses_the_next_turn_before_any_model_call() -> None:
    """The turn that reaches max_session_tokens ends stopped; the next one ends stopped with no step."""
    model = ScriptedModel([answer("first", 300, 100), answer("second", 500, 150)])
    outcomes, events = await _run(model, {"max_session_tokens": 1000}, "one", "two", "three")
    assert outcomes[0].kind == "completed"
    assert outcomes[1].reason == {
        "kind": "stopped",
        "reason": "budget: max_session_tokens reached: 1050 tokens used by this session, the limit is 1000",
    }
    assert outcomes[2].reason == outcomes[1].reason
    assert len(model.requests) == 2
    model.assert_consumed()
    assert step_count(events) == 2
    assert usage_records(events)[-1] == {"turn": 3, "tokens": 0, "cost": 0.0}  # nothing was spent


async def test_max_session_tokens_lowers_max_tokens_across_turns() -> None:
    """The second turn's request may only spend what the session has left."""
    model = ScriptedModel([answer("first", 300, 100), answer("second", 100, 10)])
    await _run(model, {"max_session_tokens": 1000}, "one", "two")
    assert [request.max_tokens for request in model.requests] == [1000, 600]


async def test_max_turn_cost_stops_the_turn_and_usage_records_carry_the_cost() -> None:
    """Cost is input at the input price plus output at the output price; max_turn_cost stops at it."""
    model = ScriptedModel([call(100_000, 10_000), call(100_000, 10_000), answer("x", 1, 1)], prices=PRICES)
    outcomes, events = await _run(model, {"max_turn_cost": 0.35}, "go", "again")
    # each call step: 0.1 + 0.1 = 0.2; two of them reach 0.4 >= 0.35
    assert outcomes[0].reason == {
        "kind": "stopped",
        "reason": "budget: max_turn_cost reached: 0.4 spent in this turn, the limit is 0.35",
    }
    assert outcomes[1].kind == "completed"
    records = usage_records(events)
    assert records[0] == {"turn": 1, "tokens": 220_000, "cost": pytest.approx(0.4)}
    assert records[1]["cost"] == pytest.approx(0.000011)


async def test_a_cost_limit_lowers_max_tokens_at_the_output_price() -> None:
    """What a cost limit leaves, divided by the output price, bounds the step's output tokens."""
    model = ScriptedModel([call(100_000, 0), answer("x", 0, 0)], prices=PRICES)
    await _run(model, {"max_turn_cost": 0.5}, "go")
    # 0.5 / 10 per million = 50,000 tokens; after the first step (0.1 spent): 40,000
    assert [request.max_tokens for request in model.requests] == [None, None]  # more than the model can write
    model = ScriptedModel([call(100_000, 0), answer("x", 0, 0)], prices=PRICES, max_output_tokens=100_000)
    await _run(model, {"max_turn_cost": 0.5}, "go")
    assert [request.max_tokens for request in model.requests] == [50_000, 40_000]


async def test_max_session_cost_refuses_the_turn_after_the_one_that_spent_it() -> None:
    """Once the session cost reaches max_session_cost, the next turn is stopped before any model call."""
    model = ScriptedModel([answer("pricey", 1_000_000, 0)], prices=PRICES)
    outcomes, _ = await _run(model, {"max_session_cost": 1.0}, "one", "two")
    assert outcomes[0].reason["reason"] == (
        "budget: max_session_cost reached: 1 spent by this session, the limit is 1"
    )
    assert outcomes[1].reason == outcomes[0].reason
    assert len(model.requests) == 1


async def test_a_cost_limit_without_prices_refuses_the_turn_saying_so() -> None:
    """No prices for the model under a cost limit: the turn ends stopped, no model call, and says why."""
    model = ScriptedModel([])
    outcomes, events = await _run(model, {"max_turn_cost": 1.0}, "go")
    reason = outcomes[0].reason
    assert reason["kind"] == "stopped"
    assert "max_turn_cost is set but no prices are known for the model scripted/test" in reason["reason"]
    assert "input_price and output_price" in reason["reason"]
    assert model.requests == []
    assert step_count(events) == 0


async def test_max_steps_per_turn_stops_after_that_many_steps() -> None:
    """max_steps_per_turn = 2: the turn stops after its second model call, though tools ran."""
    model = ScriptedModel([call(1, 1), call(1, 1)])
    outcomes, events = await _run(model, {"max_steps_per_turn": 2}, "go")
    assert outcomes[0].reason == {
        "kind": "stopped",
        "reason": "budget: max_steps_per_turn reached: 2 steps in this turn, the limit is 2",
    }
    assert step_count(events) == 2
    model.assert_consumed()


async def test_max_tool_calls_per_turn_denies_calls_beyond_it_and_stops_the_turn() -> None:
    """Three calls in one step with a limit of 2: the third is denied, and the turn stops after the step."""
    three = Reply(
        ScriptedModel.call("noop", id="c1"), ScriptedModel.call("noop", id="c2"), ScriptedModel.call("noop", id="c3")
    )
    model = ScriptedModel([three])
    outcomes, events = await _run(model, {"max_tool_calls_per_turn": 2}, "go")
    results = [e.data for e in events if e.type == "tool/result"]
    assert [r.get("error_code") for r in results] == [None, None, "DENIED"]
    assert "max_tool_calls_per_turn" in results[2]["message"]["content"][0]["text"]
    assert outcomes[0].reason == {
        "kind": "stopped",
        "reason": "budget: max_tool_calls_per_turn reached: 3 tool calls in this turn, the limit is 2",
    }


async def test_the_tool_call_limit_counts_the_calls_of_earlier_steps() -> None:
    """A limit of 3: two calls run in step 1; in step 2 one more runs and the next is denied; the turn stops."""

    def two(first: str, second: str) -> Reply:
        return Reply(ScriptedModel.call("noop", id=first), ScriptedModel.call("noop", id=second))

    model = ScriptedModel([two("a1", "a2"), two("b1", "b2")])
    outcomes, events = await _run(model, {"max_tool_calls_per_turn": 3}, "go")
    results = [(e.data["message"]["call_id"], e.data.get("error_code")) for e in events if e.type == "tool/result"]
    assert results == [("a1", None), ("a2", None), ("b1", None), ("b2", "DENIED")]
    assert outcomes[0].reason["reason"] == (
        "budget: max_tool_calls_per_turn reached: 4 tool calls in this turn, the limit is 3"
    )
    model.assert_consumed()


async def test_the_tool_call_count_starts_again_each_turn() -> None:
    """A limit of 1: one call per turn runs, in every turn."""
    model = ScriptedModel([call(1, 1), call(1, 1)])
    _, events = await _run(model, {"max_tool_calls_per_turn": 1}, "one", "two")
    results = [e.data for e in events if e.type == "tool/result"]
    assert [r.get("error_code") for r in results] == [None, None]


async def test_without_limits_every_turn_still_logs_its_usage() -> None:
    """No limit set: nothing is stopped or lowered, and budget/usage is logged before each turn/end."""
    model = ScriptedModel([call(10, 5), answer("done", 20, 5)], prices=PRICES)
    outcomes, events = await _run(model, {}, "go")
    assert outcomes[0].kind == "completed"
    assert [request.max_tokens for request in model.requests] == [None, None]
    types = [e.type for e in events]
    assert types[-2:] == ["budget/usage", "turn/end"]
    assert usage_records(events) == [{"turn": 1, "tokens": 40, "cost": pytest.approx(30 / 1e6 + 10 * 10 / 1e6)}]


async def test_a_turn_ended_by_an_error_still_logs_its_usage() -> None:
    """A model failure ends the turn error; the usage of the steps before it is logged."""
    from dsh_core.llm import Failure

    failing = Reply(error=Failure("boom", "SERVER"))
    model = ScriptedModel([call(10, 5), failing])
    outcomes, events = await _run(model, {"max_turn_tokens": 1000}, "go")
    assert outcomes[0].kind == "error"
    assert usage_records(events) == [{"turn": 1, "tokens": 15, "cost": None}]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_turn_tokens", 0),
        ("max_session_tokens", -5),
        ("max_turn_cost", 0.0),
        ("max_session_cost", -1.5),
        ("max_steps_per_turn", 0),
        ("max_tool_calls_per_turn", -1),
        ("max_turn_tokens", "100"),
        ("max_turn_cost", float("nan")),
        ("max_session_cost", float("inf")),
        ("max_steps_per_turn", True),
    ],
)
async def test_a_limit_that_is_not_a_positive_number_is_refused_at_start(key: str, value: object) -> None:
    """The harness refuses to start with a ValueError naming the key."""
    config = {"plugins": {"budget": {key: value}}}
    with pytest.raises(ValueError, match=key) as caught:
        async with Harness(config=config, plugins=[BudgetPlugin()], autoload=False):
            pass
    assert isinstance(caught.value, ConfigError)


async def test_usage_with_cached_tokens_is_priced_at_the_cached_price() -> None:
    """A reply's cache_read_tokens cost cached_input."""
    from dsh_core.llm import Prices

    prices = Prices(input=1.0, output=10.0, cached_input=0.1)
    model = ScriptedModel(
        [ScriptedModel.text("x", usage=Usage(1_000_000, 0, cache_read_tokens=1_000_000))], prices=prices
    )
    _, events = await _run(model, {}, "go")
    assert usage_records(events)[0]["cost"] == pytest.approx(0.1)
