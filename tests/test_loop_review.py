"""Behaviours fixed after the contract review: each test failed before its fix."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dsh_core import AgentOptions, ContinuationDecision, ContinuationStop, hookimpl
from dsh_core.llm import LlmCallConfig
from dsh_core.testing import ScriptedModel

from .loop_kit import MODEL, running, trail

pytestmark = pytest.mark.anyio


async def test_a_terminal_stop_discards_steering_even_when_max_tokens_wins() -> None:
    """max-tokens outranks stopped in turn/end, but the stop stays terminal: no steering survives."""

    class Policy:
        @hookimpl
        def dsh_agent_turn_continuation(self, step: int) -> Any:
            return ContinuationDecision(action="continue") if step == 1 else None

        @hookimpl
        def dsh_agent_turn_stop(self, step: int) -> Any:
            return ContinuationStop("enough") if step == 2 else None

        @hookimpl
        async def dsh_session_flush(self) -> None:
            if not self.steered:
                self.steered = True
                agent.steer("late steering")

        steered = False

    truncated = ScriptedModel.text("cut", finish="max-tokens")
    model = ScriptedModel([truncated, "second"])
    async with running(model, plugins=[Policy()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                outcome = await agent.run("go")
                await agent.when_idle()
            events = agent.session.events
    assert outcome.kind == "max-tokens"
    assert trail(events).count("turn/start") == 1
    assert trail(events)[-1] == "inbox/cleared"
    model.assert_consumed()


async def test_cancel_then_dispose_ends_the_turn_disposed() -> None:
    """A cancel that disposal follows before the turn closes: disposed outranks aborted."""
    streaming = anyio.Event()

    class Watch:
        @hookimpl
        def dsh_session_event(self, event: Any) -> None:
            if event.type == "assistant/chunk":
                streaming.set()

    async with running(ScriptedModel([ScriptedModel.hang("x")]), plugins=[Watch()]) as ctx:
        handle = await ctx.agents.create("a1", agent_options=MODEL)
        handle.agent.send("go")
        await streaming.wait()
        handle.agent.cancel()
        with anyio.fail_after(5):
            await handle.dispose()
        end = handle.agent.session.events[-1]
    assert end.type == "turn/end"
    assert end.data["reason"]["kind"] == "disposed"


async def test_a_seed_that_ends_inside_a_turn_is_refused() -> None:
    """Seeding a log whose last turn is open is a ValueError at create, not a hang later."""
    async with running(ScriptedModel()) as ctx:
        with pytest.raises(ValueError, match="ends inside turn 1"):
            await ctx.agents.create("s", seed=[("turn/start", {"turn": 1})], agent_options=MODEL)
        assert ctx.agents.get("s") is None


async def test_a_vetoed_turn_start_returns_from_run_with_an_error() -> None:
    """A session validator refusing turn/start: run() returns error and the prompt is recorded cleared."""
    async with running(ScriptedModel()) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:

            def refuse(session: Any, event_type: str, data: Any) -> None:
                if event_type == "turn/start":
                    raise RuntimeError("no turns today")

            handle.agent.session.add_validator(refuse)
            with anyio.fail_after(5):
                outcome = await handle.agent.run("go")
            events = handle.agent.session.events
    assert outcome.kind == "error"
    assert "no turns today" in outcome.reason["failure"]["message"]
    assert trail(events) == ["inbox/queued", "inbox/cleared"]


async def test_an_agent_request_listener_may_choose_the_model() -> None:
    """An agent created without a model runs when an agent/request listener supplies one."""

    class Router:
        @hookimpl
        def dsh_agent_request(self, config: LlmCallConfig) -> LlmCallConfig:
            return LlmCallConfig(provider="scripted", model="routed")

    model = ScriptedModel(["routed answer"])
    async with running(model, plugins=[Router()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=AgentOptions()) as handle:
            outcome = await handle.agent.run("hi")
    assert outcome.text == "routed answer"
    assert model.requests[0].model == "routed"


async def test_run_returns_the_interrupted_message_after_a_cancel() -> None:
    """cancel() mid-stream: run() returns aborted with the text that was kept."""

    class CancelOnChunk:
        @hookimpl
        def dsh_session_event(self, event: Any) -> None:
            if event.type == "assistant/chunk":
                agent.cancel()

    async with running(ScriptedModel([ScriptedModel.hang("partial")]), plugins=[CancelOnChunk()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                outcome = await agent.run("go")
    assert outcome.kind == "aborted"
    assert outcome.text == "partial"
