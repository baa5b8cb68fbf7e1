"""Steering, continuation, terminal stops, max-tokens, cancellation and disposal."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from dsh_core import ContinuationDecision, ContinuationStop, hookimpl, tool
from dsh_core.llm import Usage
from dsh_core.testing import ScriptedModel

from .loop_kit import MODEL, running, trail

pytestmark = pytest.mark.anyio


async def test_steering_mid_turn_is_seen_by_the_next_step() -> None:
    """Steering sent during a tool runs as a steering/message at the end of that step."""

    @tool
    def work() -> str:
        """Do some work."""
        return "worked"

    class SteerOnce:
        done = False

        @hookimpl
        def dsh_tools_result(self, execution: Any) -> None:
            if not self.done:
                self.done = True
                agent.steer("also check the tests")

    model = ScriptedModel([ScriptedModel.tool_call("work"), "all done"])
    async with running(model, plugins=[SteerOnce()]) as ctx:
        ctx.tools.register(work)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            await agent.run("start")
            events = agent.session.events
    assert trail(events) == [
        "inbox/queued", "turn/start", "user/message",
        "step/start", "assistant/message", "tool/call", "inbox/queued", "tool/result", "steering/message",
        "step/start", "assistant/message", "turn/end",
    ]
    assert model.requests[1].messages[-1].text == "also check the tests"  # type: ignore[union-attr]
    steering = next(e for e in events if e.type == "steering/message")
    queued = [e for e in events if e.type == "inbox/queued"][1]
    assert steering.data["queued_id"] == queued.data["id"]


async def test_steering_overrides_an_ordinary_stop() -> None:
    """A text step would end the turn, but pending steering makes another step run."""

    class SteerAtStepResult:
        done = False

        @hookimpl
        def dsh_agent_step_result(self, agent: Any) -> None:
            if not self.done:
                self.done = True
                agent.steer("one more thing")

    model = ScriptedModel(["first answer", "second answer"])
    async with running(model, plugins=[SteerAtStepResult()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("go")
            events = handle.agent.session.events
    assert outcome.text == "second answer"
    assert trail(events).count("step/start") == 2
    assert trail(events).count("turn/start") == 1
    model.assert_consumed()


async def test_continuation_with_a_reason_runs_another_step() -> None:
    """A continue decision with a reason is logged as steering (source continuation)."""

    class KeepGoing:
        @hookimpl
        def dsh_agent_turn_continuation(self, step: int) -> Any:
            return ContinuationDecision(action="continue", reason="verify your answer") if step == 1 else None

    model = ScriptedModel(["draft", "verified"])
    async with running(model, plugins=[KeepGoing()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("go")
            events = handle.agent.session.events
    assert outcome.kind == "completed"
    assert trail(events) == [
        "inbox/queued", "turn/start", "user/message",
        "step/start", "assistant/message", "steering/message",
        "step/start", "assistant/message", "turn/end",
    ]
    steering = next(e for e in events if e.type == "steering/message")
    assert steering.data["message"]["source"] == {"kind": "continuation"}
    assert "queued_id" not in steering.data


async def test_terminal_stop_ends_the_turn_stopped_even_when_tools_ran() -> None:
    """agent/turn-stop returning ContinuationStop ends the turn `stopped` with its reason."""

    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    class Budget:
        @hookimpl
        def dsh_agent_turn_stop(self, step: int) -> Any:
            return ContinuationStop("step budget reached") if step == 1 else None

    model = ScriptedModel([ScriptedModel.tool_call("noop")])
    async with running(model, plugins=[Budget()]) as ctx:
        ctx.tools.register(noop)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("go")
    assert outcome.reason == {"kind": "stopped", "reason": "step budget reached"}
    model.assert_consumed()


async def test_max_tokens_drops_tool_calls_and_is_sticky() -> None:
    """A max-tokens step runs no tools; a later tool step does not clear max-tokens."""

    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    class Continue:
        @hookimpl
        def dsh_agent_turn_continuation(self, step: int, decision: ContinuationDecision) -> Any:
            return ContinuationDecision(action="continue", reason="go on") if step == 1 else None

    truncated = ScriptedModel.tool_call("noop", text="partial", usage=Usage(10, 5))
    truncated = ScriptedModel.chunks(*truncated.chunks[:-1], *ScriptedModel.text("", finish="max-tokens").chunks[-1:])
    model = ScriptedModel([truncated, ScriptedModel.tool_call("noop"), "done"])
    async with running(model, plugins=[Continue()]) as ctx:
        ctx.tools.register(noop)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("go")
            events = handle.agent.session.events
    assert outcome.kind == "max-tokens"
    calls = [e for e in events if e.type == "tool/call"]
    assert len(calls) == 1
    assert calls[0].data["step"] == 2
    first_message = next(e for e in events if e.type == "assistant/message")
    assert [b["type"] for b in first_message.data["message"]["content"]] == ["text"]
    model.assert_consumed()


async def test_cancel_during_stream_keeps_what_was_streamed() -> None:
    """cancel() mid-stream: the turn ends aborted and the streamed text is kept, interrupted."""
    model = ScriptedModel([ScriptedModel.hang("partial answer")])

    class CancelOnChunk:
        @hookimpl
        def dsh_session_event(self, event: Any) -> None:
            if event.type == "assistant/chunk":
                agent.cancel()

    async with running(model, plugins=[CancelOnChunk()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                outcome = await agent.run("go")
            events = agent.session.events
            messages = list(agent.session.derive_messages())
    assert outcome.kind == "aborted"
    message = next(e for e in events if e.type == "assistant/message")
    assert message.data["interrupted"] is True
    assert messages[-1].text == "partial answer"  # type: ignore[union-attr]
    assert trail(events)[-1] == "turn/end"


async def test_cancel_during_a_tool_gives_results_to_every_call() -> None:
    """cancel() while a tool runs: that call ends ABORTED, the unstarted ones get ABORTED pairs."""
    started = anyio.Event()

    @tool
    async def slow() -> str:
        """Wait forever."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    @tool
    def fast() -> str:
        """Quick."""
        return "quick"

    from dsh_core.testing import Reply

    model = ScriptedModel([Reply(ScriptedModel.call("slow"), ScriptedModel.call("fast"))])
    async with running(model) as ctx:
        ctx.tools.register(slow)
        ctx.tools.register(fast)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            async with anyio.create_task_group() as tg:
                result: list[Any] = []

                async def run() -> None:
                    result.append(await agent.run("go"))

                tg.start_soon(run)
                await started.wait()
                agent.cancel()
            events = agent.session.events
            messages = list(agent.session.derive_messages())
    assert result[0].kind == "aborted"
    codes = [e.data.get("error_code") for e in events if e.type == "tool/result"]
    assert codes == ["ABORTED", "ABORTED"]
    assert trail(events)[-4:] == ["tool/result", "tool/call", "tool/result", "turn/end"]
    assert [type(m).__name__ for m in messages] == ["UserMessage", "AssistantMessage", "ToolResultMessage", "ToolResultMessage"]


async def test_cancel_interrupts_a_blocking_continuation_listener() -> None:
    """An agent/turn-continuation listener that blocks is interrupted by cancel(); the turn ends aborted."""
    entered = anyio.Event()

    class SlowContinuation:
        @hookimpl
        async def dsh_agent_turn_continuation(self) -> None:
            entered.set()
            await anyio.sleep_forever()

    model = ScriptedModel(["answer"])
    async with running(model, plugins=[SlowContinuation()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.send("go")
            with anyio.fail_after(5):
                await entered.wait()
                agent.cancel()
                await agent.when_idle()
            events = agent.session.events
    assert trail(events) == ["inbox/queued", "turn/start", "user/message", "step/start", "assistant/message", "turn/end"]
    assert events[-1].data["reason"] == {"kind": "aborted"}


async def test_a_cancel_during_a_tool_interrupts_the_continuation_listener_after_it() -> None:
    """A cancel that lands while a tool runs reaches the blocking continuation listener that follows
    at once, and the tool's results are still heard by an awaiting tools/result listener."""
    started = anyio.Event()
    heard: list[str] = []

    @tool
    async def slow() -> str:
        """Wait forever."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    class Listeners:
        @hookimpl
        async def dsh_tools_result(self, result: Any) -> None:
            await anyio.lowlevel.checkpoint()  # a cancelled scope would raise here
            heard.append(result.error_code)

        @hookimpl
        async def dsh_agent_turn_continuation(self) -> None:
            await anyio.sleep_forever()

    model = ScriptedModel([ScriptedModel.tool_call("slow")])
    async with running(model, plugins=[Listeners()]) as ctx:
        ctx.tools.register(slow)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.send("go")
            with anyio.fail_after(5):
                await started.wait()
                agent.cancel()
                await agent.when_idle()
            events = agent.session.events
    assert heard == ["ABORTED"]
    assert trail(events)[-3:] == ["tool/call", "tool/result", "turn/end"]
    assert events[-1].data["reason"] == {"kind": "aborted"}


async def test_cancel_during_pre_step_aborts_before_the_request() -> None:
    """A pre-step listener that blocks is interrupted by cancel(); no model call is made."""
    entered = anyio.Event()

    class SlowPreStep:
        @hookimpl
        async def dsh_agent_pre_step(self) -> None:
            entered.set()
            await anyio.sleep_forever()

    model = ScriptedModel([])
    async with running(model, plugins=[SlowPreStep()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.send("go")
            await entered.wait()
            agent.cancel()
            await agent.when_idle()
            events = agent.session.events
    assert trail(events) == ["inbox/queued", "turn/start", "user/message", "turn/end"]
    assert events[-1].data["reason"] == {"kind": "aborted"}
    assert model.requests == []


async def test_cancel_while_idle_arms_nothing() -> None:
    """cancel() with nothing running or queued is a no-op; the next send runs normally."""
    model = ScriptedModel(["fine"])
    async with running(model) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.cancel()
            agent.cancel()
            outcome = await agent.run("hello")
            events = agent.session.events
    assert outcome.kind == "completed"
    assert "inbox/cleared" not in trail(events)


async def test_cancel_right_after_send_drops_the_prompt_durably() -> None:
    """send() then cancel() before the turn starts: no turn, and the prompt is recorded cleared."""
    model = ScriptedModel(["later"])
    async with running(model) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            first = agent.send("never runs")
            agent.cancel()
            await agent.when_idle()
            outcome = await agent.run("runs")
            events = agent.session.events
    assert outcome.text == "later"
    cleared = next(e for e in events if e.type == "inbox/cleared")
    assert list(cleared.data["ids"]) == [first]
    assert trail(events).count("turn/start") == 1
    assert [m.text for m in model.requests[0].messages] == ["runs"]  # type: ignore[union-attr]


async def test_cancel_twice_governs_one_turn() -> None:
    """Two cancels during one turn abort that turn only; the next prompt runs."""
    model = ScriptedModel([ScriptedModel.hang("x"), "next"])

    class CancelTwice:
        @hookimpl
        def dsh_session_event(self, event: Any) -> None:
            if event.type == "assistant/chunk" and event.data["turn"] == 1:
                agent.cancel()
                agent.cancel()

    async with running(model, plugins=[CancelTwice()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                first = await agent.run("one")
                second = await agent.run("two")
    assert (first.kind, second.kind, second.text) == ("aborted", "completed", "next")


async def test_dispose_mid_turn_ends_it_disposed() -> None:
    """Disposing the handle during a stream: status disposed, turn ends disposed, events paired."""
    seen: list[str] = []
    streaming = anyio.Event()

    class Watch:
        @hookimpl
        def dsh_agent_status(self, status: str) -> None:
            seen.append(f"status:{status}")

        @hookimpl
        def dsh_agent_disposed(self) -> None:
            seen.append("agent/disposed")

        @hookimpl
        def dsh_session_disposed(self) -> None:
            seen.append("session/disposed")

        @hookimpl
        def dsh_session_event(self, event: Any) -> None:
            if event.type == "assistant/chunk":
                streaming.set()

    model = ScriptedModel([ScriptedModel.hang("x")])
    async with running(model, plugins=[Watch()]) as ctx:
        handle = await ctx.agents.create("a1", agent_options=MODEL)
        agent = handle.agent
        agent.send("go")
        await streaming.wait()
        with anyio.fail_after(5):
            await handle.dispose()
            await handle.dispose()
        assert ctx.agents.get("a1") is None
        assert ctx.sessions.get("a1") is None
    assert agent.session.events[-1].data["reason"] == {"kind": "disposed"}
    assert seen == ["status:running", "status:disposed", "agent/disposed", "session/disposed"]
    assert agent.status == "disposed"


async def test_send_after_dispose_raises() -> None:
    """A disposed agent refuses new prompts with an error saying what to do."""
    from dsh_core import AgentDisposedError

    async with running(ScriptedModel()) as ctx:
        handle = await ctx.agents.create("a1", agent_options=MODEL)
        await handle.dispose()
        with pytest.raises(AgentDisposedError, match="create or resume"):
            handle.agent.send("hello")


async def test_owner_disposal_disposes_the_agent() -> None:
    """An agent created through a plugin's context goes away when that context is disposed."""
    async with running(ScriptedModel()) as ctx:
        owner = ctx.child("plugin:owner")
        handle = await owner.agents.create("owned", agent_options=MODEL)
        assert ctx.agents.get("owned") is handle.agent
        await owner.dispose()
        assert ctx.agents.get("owned") is None
        assert handle.agent.status == "disposed"
