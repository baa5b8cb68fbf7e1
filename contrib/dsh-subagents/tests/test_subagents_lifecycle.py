"""Who stops a child: the parent's cancel, the parent's disposal, the run itself; and what the log keeps."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from dsh_subagents import PROVIDER_NAME, InProcessRun

from dsh_core import TurnOutcome, hookimpl
from dsh_core.services.sessions import Session
from dsh_core.services.subagents import SubagentRefusedError, SubagentRequest
from dsh_core.testing import Reply, ScriptedModel

from .subagent_kit import (
    MODEL,
    BarrierModel,
    is_child_event,
    of_type,
    result_text,
    running,
    task_call,
    task_reply,
    trail,
)

pytestmark = pytest.mark.anyio


def streaming(sessions: list[Session]) -> list[Session]:
    """The sessions whose model request has been sent."""
    return [s for s in sessions if of_type(s.events, "request/header")]


class DisposedAgents:
    """Records the ids of agents as ``agent/disposed`` is emitted for them."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    @hookimpl
    def dsh_agent_disposed(self, agent: Any) -> None:
        self.ids.append(agent.id)


async def test_cancelling_the_parent_cancels_the_running_child() -> None:
    """parent.cancel() mid-task: the child's turn ends aborted, the task result is ABORTED, the child is gone."""
    model = ScriptedModel([task_reply("slow", "take forever"), ScriptedModel.hang()])
    async with (
        running({"scripted": model}) as (ctx, recorder),
        await ctx.agents.create("p1", agent_options=MODEL) as handle,
    ):
        parent = handle.agent
        outcomes: list[TurnOutcome] = []

        async def run_parent() -> None:
            outcomes.append(await parent.run("go"))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_parent)
                child, _ = await recorder.wait_for(is_child_event("p1", "request/header"))
                parent.cancel()
        events = parent.session.events
        assert ctx.agents.get(child.id) is None
    (outcome,) = outcomes
    assert outcome.kind == "aborted"
    assert of_type(child.events, "turn/end")[-1].data["reason"] == {"kind": "aborted"}
    (result,) = of_type(events, "tool/result")
    assert result.data["error_code"] == "ABORTED"
    (end,) = of_type(events, "subagent/end")
    assert end.data["stop_reason"] == "aborted"
    assert end.data["child_session_id"] == child.id
    assert trail(events)[-4:] == ["subagent/start", "subagent/end", "tool/result", "turn/end"]


async def test_cancelling_the_parent_cancels_every_parallel_child() -> None:
    """Two children running side by side are both cancelled, and both calls are closed."""
    parent_model = ScriptedModel([Reply(task_call("a", "one"), task_call("b", "two"))])
    never = BarrierModel(parties=3)  # only two children ever come: both hang until cancelled
    config = {"plugins": {"subagents": {"model": "kids/any"}}}
    async with (
        running({"scripted": parent_model, "kids": never}, config) as (ctx, recorder),
        await ctx.agents.create("p1", agent_options=MODEL) as handle,
    ):
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(handle.agent.run, "go")
                await recorder.wait_for(lambda _s, _e: len(streaming(recorder.children_of("p1"))) == 2)
                handle.agent.cancel()
        events = handle.agent.session.events
        children = recorder.children_of("p1")
    assert len(children) == 2
    assert [of_type(c.events, "turn/end")[-1].data["reason"] for c in children] == [{"kind": "aborted"}] * 2
    assert [e.data["stop_reason"] for e in of_type(events, "subagent/end")] == ["aborted", "aborted"]
    assert [e.data["error_code"] for e in of_type(events, "tool/result")] == ["ABORTED", "ABORTED"]


async def test_disposing_the_parent_disposes_a_running_child() -> None:
    """Disposing the parent mid-task disposes its child too; nothing is left running."""
    model = ScriptedModel([task_reply("slow", "take forever"), ScriptedModel.hang()])
    disposed = DisposedAgents()
    async with running({"scripted": model}, plugins=[disposed]) as (ctx, recorder):
        handle = await ctx.agents.create("p1", agent_options=MODEL)
        outcomes: list[TurnOutcome] = []

        async def run_parent() -> None:
            outcomes.append(await handle.agent.run("go"))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_parent)
                child, _ = await recorder.wait_for(is_child_event("p1", "request/header"))
                await handle.dispose()
        assert ctx.agents.list() == ()
        assert ctx.sessions.get(child.id) is None
    assert outcomes[0].kind == "disposed"
    assert disposed.ids == [child.id, "p1"]
    assert of_type(child.events, "turn/end")[-1].data["reason"] == {
        "kind": "aborted"
    }  # the task call cancelled it first


async def test_stopping_the_harness_mid_task_stops_parent_and_child() -> None:
    """Leaving the harness while a child runs tears both down; both turns are closed, nothing hangs."""
    model = ScriptedModel([task_reply("slow", "take forever"), ScriptedModel.hang()])
    with anyio.fail_after(5):
        async with running({"scripted": model}) as (ctx, recorder):
            handle = await ctx.agents.create("p1", agent_options=MODEL)
            handle.agent.send("go")
            child, _ = await recorder.wait_for(is_child_event("p1", "request/header"))
    assert child.meta.parent_id == "p1"
    assert trail(child.events)[-1] == "turn/end"
    parent_trail = trail(handle.agent.session.events)
    assert parent_trail[-4:] == ["subagent/start", "subagent/end", "tool/result", "turn/end"]
    assert handle.agent.status == "disposed"


async def test_a_child_started_directly_is_owned_by_the_parent_context() -> None:
    """ctx.subagents.start through the parent's context: disposing the parent disposes the child."""
    model = ScriptedModel([ScriptedModel.hang()])
    async with running({"scripted": model}) as (ctx, recorder):
        handle = await ctx.agents.create("p1", agent_options=MODEL)
        parent = handle.agent
        request = SubagentRequest(
            description="watch", prompt="wait here", parent_ctx=parent.ctx, parent_id=parent.id
        )
        run = await parent.ctx.subagents.start(PROVIDER_NAME, request)
        assert run.agent is not None
        assert run.agent.session.meta.parent_id == "p1"
        with anyio.fail_after(5):
            await recorder.wait_for(is_child_event("p1", "request/header"))
            await handle.dispose()
            result = await run.result
        assert run.agent.status == "disposed"
        assert ctx.agents.get(run.id) is None
    assert result.stop_reason == "disposed"
    assert result.output == ""
    assert of_type(run.agent.session.events, "turn/end")[-1].data["reason"] == {"kind": "disposed"}


async def test_run_cancel_before_and_during_the_childs_turn() -> None:
    """run.cancel() stops the child (aborted); awaiting the result twice gives the same result."""
    model = ScriptedModel([ScriptedModel.hang()])
    async with (
        running({"scripted": model}) as (ctx, recorder),
        await ctx.agents.create("p1", agent_options=MODEL) as handle,
    ):
        parent = handle.agent
        request = SubagentRequest(description="d", prompt="p", parent_ctx=parent.ctx, parent_id=parent.id)
        early = await parent.ctx.subagents.start(PROVIDER_NAME, request)
        early.cancel()  # before its prompt was even sent
        running_run = await parent.ctx.subagents.start(PROVIDER_NAME, request)
        with anyio.fail_after(5):
            assert (await early.result).stop_reason == "aborted"
            await recorder.wait_for(lambda s, e: s.id == running_run.id and e.type == "request/header")
            running_run.cancel()
            first = await running_run.result
            second = await running_run.result
        await early.dispose()
        await running_run.dispose()
        await running_run.dispose()  # idempotent
    assert first is second
    assert first.stop_reason == "aborted"
    assert early.agent is not None
    assert of_type(early.agent.session.events, "turn/start") == []


async def test_the_provider_refuses_without_a_live_parent() -> None:
    """A request naming an agent that is not live is refused; one without parent_ctx is a TypeError."""
    async with running({}) as (ctx, _recorder):
        request = SubagentRequest(description="d", prompt="p", parent_ctx=ctx, parent_id="ghost")
        with pytest.raises(SubagentRefusedError, match="'ghost' is not live"):
            await ctx.subagents.start(PROVIDER_NAME, request)
        with pytest.raises(TypeError, match="parent_ctx"):
            await ctx.subagents.start(PROVIDER_NAME, SubagentRequest(description="d", prompt="p"))
        orphan = SubagentRequest(description="d", prompt="p", parent_ctx=ctx)
        with pytest.raises(SubagentRefusedError, match="no model"):
            await ctx.subagents.start(PROVIDER_NAME, orphan)


async def test_child_sessions_name_their_parent() -> None:
    """Every child session records its parent session and depth, so a store can list it as a child."""
    model = ScriptedModel([task_reply("a", "b"), ScriptedModel.text("child"), ScriptedModel.text("parent")])
    async with (
        running({"scripted": model}) as (ctx, recorder),
        await ctx.agents.create("p1", agent_options=MODEL) as handle,
    ):
        with anyio.fail_after(5):
            await handle.agent.run("go")
        (start,) = of_type(handle.agent.session.events, "subagent/start")
    sessions = recorder.sessions()
    child = sessions[str(start.data["child_session_id"])]
    assert child.meta.parent_id == "p1"
    assert child.meta.extra["depth"] == 1
    assert [s.id for s in sessions.values() if s.meta.parent_id == "p1"] == [child.id]
    assert result_text(of_type(handle.agent.session.events, "tool/result")[0]) == "child"


def test_in_process_run_is_exported() -> None:
    """The run class is public, for type annotations."""
    assert InProcessRun.__name__ == "InProcessRun"


async def test_child_sessions_are_persisted_and_listed_as_children(tmp_path: Any) -> None:
    """With persistence loaded, the child's log is stored and the listing names its parent."""
    persistence = pytest.importorskip("dsh_persistence_jsonl")
    model = ScriptedModel([task_reply("a", "b"), ScriptedModel.text("child"), ScriptedModel.text("parent")])
    config = {"plugins": {"persistence-jsonl": {"root": str(tmp_path), "batch_delay": 0}}}
    plugins = [persistence.PersistencePlugin()]
    async with running({"scripted": model}, config, plugins=plugins) as (ctx, _recorder):
        handle = await ctx.agents.create("p1", agent_options=MODEL)
        async with handle:
            with anyio.fail_after(5):
                await handle.agent.run("go")
            (start,) = of_type(handle.agent.session.events, "subagent/start")
        child_id = str(start.data["child_session_id"])
        with anyio.fail_after(5):  # both sessions are disposed (and so flushed) now
            listed = {info.id: info for info in await ctx.session_persistence.list()}
            loaded = await ctx.session_persistence.load(child_id)
            stored_parent = await ctx.session_persistence.load("p1")
    assert set(listed) == {"p1", child_id}
    assert listed[child_id].parent_id == "p1"
    assert listed["p1"].parent_id is None
    assert loaded.meta.parent_id == "p1"
    assert loaded.meta.extra["depth"] == 1
    assert [e.type for e in loaded.events if e.type == "turn/end"] == ["turn/end"]
    stored_types = [e.type for e in stored_parent.events]
    assert stored_types.count("subagent/start") == stored_types.count("subagent/end") == 1
