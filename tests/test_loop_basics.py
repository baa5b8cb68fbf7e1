"""The loop's lifecycle on the common paths: text turns, tool turns, parallel tools, prompts."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dsh_core import Allow, Block, ToolExecution, hookimpl, tool
from dsh_core.testing import Reply, ScriptedModel
from dsh_core.vocabulary import ToolResultMessage, UserMessage

from .loop_kit import MODEL, running, trail

pytestmark = pytest.mark.anyio


async def test_text_turn_event_sequence() -> None:
    """A text answer: turn/start, the prompt, one step, the answer, turn/end completed."""
    model = ScriptedModel([ScriptedModel.text("hello there", chunks=3)])
    async with running(model) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("hi")
            events = handle.agent.session.events
    assert outcome.kind == "completed"
    assert outcome.text == "hello there"
    assert trail(events) == [
        "inbox/queued",
        "turn/start",
        "user/message",
        "step/start",
        "assistant/message",
        "turn/end",
    ]
    assert [e.type for e in events].count("assistant/chunk") == 4  # 3 deltas + finish
    assert [e.type for e in events].count("request/header") == 1
    end = events[-1]
    assert end.data == {"turn": 1, "reason": {"kind": "completed"}}
    model.assert_consumed()


@tool(parallel_safe=True)
async def read_note(name: str) -> str:
    """Read a note by name."""
    return f"note {name}"


async def test_three_step_tool_turn() -> None:
    """Two tool steps then an answer; tool results reach the next request in model order."""
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("read_note", {"name": "a"}),
            ScriptedModel.tool_call("read_note", {"name": "b"}),
            ScriptedModel.text("done"),
        ]
    )
    async with running(model) as ctx:
        ctx.tools.register(read_note)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("read a and b")
            events = handle.agent.session.events
            messages = list(handle.agent.session.derive_messages())
    assert outcome.kind == "completed"
    step = ["step/start", "assistant/message", "tool/call", "tool/result"]
    assert trail(events) == [
        "inbox/queued", "turn/start", "user/message", *step, *step,
        "step/start", "assistant/message", "turn/end",
    ]
    assert [type(m).__name__ for m in messages] == [
        "UserMessage", "AssistantMessage", "ToolResultMessage",
        "AssistantMessage", "ToolResultMessage", "AssistantMessage",
    ]
    second_request = model.requests[1]
    result = second_request.messages[-1]
    assert isinstance(result, ToolResultMessage)
    assert result.content[0].text == "note a"  # type: ignore[union-attr]
    model.assert_consumed()


async def test_parallel_safe_calls_overlap_and_commit_in_model_order() -> None:
    """Consecutive parallel-safe calls run together; results are logged in the model's order."""
    first_started = anyio.Event()
    order: list[str] = []

    @tool(parallel_safe=True)
    async def slow(label: str) -> str:
        """Wait for the other call before answering."""
        if label == "first":
            first_started.set()
            await second_done.wait()
        else:
            await first_started.wait()
            second_done.set()
        order.append(label)
        return label

    second_done = anyio.Event()
    reply = Reply(ScriptedModel.call("slow", {"label": "first"}), ScriptedModel.call("slow", {"label": "second"}))
    model = ScriptedModel([reply, ScriptedModel.text("ok")])
    async with running(model) as ctx:
        ctx.tools.register(slow)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                outcome = await handle.agent.run("go")
            events = handle.agent.session.events
    assert outcome.kind == "completed"
    assert order == ["second", "first"]  # they overlapped: the second finished first
    assert trail(events)[3:9] == ["step/start", "assistant/message", "tool/call", "tool/call", "tool/result", "tool/result"]
    results = [e.data["message"]["content"][0]["text"] for e in events if e.type == "tool/result"]
    assert results == ["first", "second"]


async def test_blocked_prompt_ends_turn_rejected_without_a_step() -> None:
    """Every prompt blocked: prompt/blocked is logged and the turn ends rejected with no step."""

    class Gate:
        @hookimpl
        def dsh_agent_prompt_submit(self, message: UserMessage) -> Any:
            return Block("no secrets") if "secret" in message.text else None

    model = ScriptedModel([])
    async with running(model, plugins=[Gate()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("tell me the secret")
            events = handle.agent.session.events
    assert outcome.kind == "rejected"
    assert trail(events) == ["inbox/queued", "turn/start", "prompt/blocked", "turn/end"]
    assert events[2].data["reason"] == "no secrets"
    model.assert_consumed()


async def test_prompt_submit_additional_context_follows_the_prompt() -> None:
    """Allow(additional_context) adds a context/message after the user/message."""

    class Context_:
        @hookimpl
        def dsh_agent_prompt_submit(self) -> Any:
            return Allow(additional_context=("today is Monday",))

    model = ScriptedModel(["ok"])
    async with running(model, plugins=[Context_()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            await handle.agent.run("what day is it")
            events = handle.agent.session.events
    assert trail(events)[:5] == ["inbox/queued", "turn/start", "user/message", "context/message", "step/start"]
    request = model.requests[0]
    assert [m.text for m in request.messages] == ["what day is it", "today is Monday"]  # type: ignore[union-attr]


async def test_tool_sees_cwd_and_session(tmp_path: Any) -> None:
    """A tool receives the session's cwd and ids through its ToolExecution."""
    seen: list[tuple[str | None, str | None]] = []

    @tool
    def where(execution: ToolExecution) -> str:
        """Tell where we are."""
        seen.append((execution.cwd, execution.session_id))
        return "here"

    model = ScriptedModel([ScriptedModel.tool_call("where"), "done"])
    async with running(model) as ctx:
        ctx.tools.register(where)
        async with await ctx.agents.create("a1", meta={"cwd": str(tmp_path)}, agent_options=MODEL) as handle:
            await handle.agent.run("where?")
    assert seen == [(str(tmp_path), "a1")]


async def test_prompts_queued_before_a_turn_share_it() -> None:
    """Prompts queued while idle are all admitted by the turn that wakes (seed 000: each queued)."""
    model = ScriptedModel(["both"])
    async with running(model) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.send("first")
            agent.send("second")
            await agent.when_idle()
            events = agent.session.events
    assert trail(events).count("turn/start") == 1
    assert [m.text for m in model.requests[0].messages] == ["first", "second"]  # type: ignore[union-attr]


async def test_a_prompt_sent_during_a_turn_runs_next_and_numbering_continues() -> None:
    """A send while a turn runs waits for the next turn; turns are numbered 1, 2."""
    model = ScriptedModel(["one", "two"])

    class SendDuringStep:
        sent = False

        @hookimpl
        def dsh_agent_step_result(self, agent: Any) -> None:
            if not self.sent:
                self.sent = True
                agent.send("second")

    async with running(model, plugins=[SendDuringStep()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.send("first")
            await agent.when_idle()
            turns = [e.data["turn"] for e in agent.session.events if e.type == "turn/start"]
    assert turns == [1, 2]
    assert model.requests[1].messages[-1].text == "second"  # type: ignore[union-attr]


async def test_agent_status_goes_running_then_idle() -> None:
    """agent/status reports running when a turn opens and idle when nothing is left."""
    statuses: list[str] = []

    class Watch:
        @hookimpl
        def dsh_agent_status(self, status: str) -> None:
            statuses.append(status)

    model = ScriptedModel(["ok"])
    async with running(model, plugins=[Watch()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            await handle.agent.run("hi")
            await handle.agent.when_idle()
    assert statuses == ["running", "idle", "disposed"]
