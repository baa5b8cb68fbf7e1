"""``agent/turn-gate`` (a turn refused before any model call) and ``agent/turn-end`` (the last word in a turn)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dsh_core import Block, ContinuationStop, hookimpl
from dsh_core.testing import ScriptedModel

from .loop_kit import MODEL, running, trail

pytestmark = pytest.mark.anyio


async def test_a_gate_stop_ends_the_turn_stopped_before_any_model_call() -> None:
    """A ContinuationStop from agent/turn-gate: the prompt is logged, no step runs, the turn ends stopped."""

    class Spent:
        def __init__(self) -> None:
            self.turns: list[int] = []

        @hookimpl
        def dsh_agent_turn_gate(self, turn: int) -> Any:
            self.turns.append(turn)
            return ContinuationStop("nothing left to spend") if turn == 2 else None

    model = ScriptedModel(["first"])
    gate = Spent()
    async with running(model, plugins=[gate]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            first = await handle.agent.run("one")
            second = await handle.agent.run("two")
            events = handle.agent.session.events
    assert first.kind == "completed"
    assert second.reason == {"kind": "stopped", "reason": "nothing left to spend"}
    assert gate.turns == [1, 2]
    assert len(model.requests) == 1
    assert trail(events)[-3:] == ["turn/start", "user/message", "turn/end"]
    model.assert_consumed()


async def test_the_gate_is_not_consulted_when_every_prompt_was_blocked() -> None:
    """A rejected turn has nothing to gate: it ends rejected and the gate never hears of it."""

    class BlockAll:
        gated = 0

        @hookimpl
        def dsh_agent_prompt_submit(self) -> Any:
            return Block("no")

        @hookimpl
        def dsh_agent_turn_gate(self) -> None:
            self.gated += 1

    plugin = BlockAll()
    async with running(ScriptedModel([]), plugins=[plugin]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("one")
    assert outcome.kind == "rejected"
    assert plugin.gated == 0


async def test_a_raising_gate_ends_the_turn_error_and_the_loop_goes_on() -> None:
    """A gate that raises fails its turn closed (error, no model call); the next turn runs."""

    class Broken:
        calls = 0

        @hookimpl
        def dsh_agent_turn_gate(self) -> None:
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("gate broke")

    model = ScriptedModel(["second"])
    async with running(model, plugins=[Broken()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            first = await handle.agent.run("one")
            second = await handle.agent.run("two")
    assert first.kind == "error"
    assert "gate broke" in first.reason["failure"]["message"]
    assert second.text == "second"
    model.assert_consumed()


async def test_cancel_reaches_a_gate_that_waits() -> None:
    """cancel() while agent/turn-gate waits ends the turn aborted, with no model call."""
    entered = anyio.Event()

    class Waits:
        @hookimpl
        async def dsh_agent_turn_gate(self) -> None:
            entered.set()
            await anyio.sleep_forever()

    model = ScriptedModel([])
    async with running(model, plugins=[Waits()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            async with anyio.create_task_group() as tg:
                outcome: list[Any] = []

                async def run() -> None:
                    outcome.append(await agent.run("go"))

                tg.start_soon(run)
                await entered.wait()
                agent.cancel()
    assert outcome[0].kind == "aborted"
    assert model.requests == []


async def test_turn_end_listeners_log_into_the_turn_before_its_end() -> None:
    """agent/turn-end fires with the turn's reason, for every ending; what it appends precedes turn/end."""
    heard: list[tuple[int, str]] = []

    class Summary:
        @hookimpl
        def dsh_agent_turn_end(self, agent: Any, turn: int, reason: Any) -> None:
            heard.append((turn, reason.kind))
            agent.session.append("test/turn-summary", {})

        @hookimpl
        def dsh_agent_prompt_submit(self, turn: int) -> Any:
            return Block("second is blocked") if turn == 2 else None

    model = ScriptedModel(["first"])
    async with running(model, plugins=[Summary()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            await handle.agent.run("one")
            await handle.agent.run("two")
            events = handle.agent.session.events
    assert heard == [(1, "completed"), (2, "rejected")]
    types = trail(events)
    ends = [i for i, t in enumerate(types) if t == "turn/end"]
    assert [types[i - 1] for i in ends] == ["test/turn-summary", "test/turn-summary"]
