"""Round trips, on every backend: what a live session publishes is what load() returns, and a resumed
agent continues exactly."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dsh_core import Session, SessionEvent, SurfaceOp, Text, ToolResultMessage, UserMessage, tool
from dsh_core.llm import Finish, TextDelta, ToolCallDelta, Usage
from dsh_core.testing import ScriptedModel
from dsh_core.vocabulary import AssistantMessage, ToolCall

from .backends import MODEL, Backend

pytestmark = pytest.mark.anyio


@tool(parallel_safe=True)
def read_note(name: str) -> str:
    """Read a note by name."""
    return f"note {name}"


async def test_resume_continues_the_agent_exactly(backend: Backend) -> None:
    """A resumed agent has the same derived messages, continues turn numbers and runs a valid next turn."""
    first = ScriptedModel(
        [ScriptedModel.tool_call("read_note", {"name": "a"}), ScriptedModel.text("read it")]
    )
    async with backend.harness(first) as ctx:
        ctx.tools.register(read_note)
        async with await ctx.agents.create("s1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("read note a")
            before = list(handle.agent.session.derive_messages())
            stored_before = list(handle.agent.session.events)
    assert outcome.kind == "completed"
    assert backend.stored("s1") == stored_before

    second = ScriptedModel([ScriptedModel.text("still here")])
    async with backend.harness(second) as ctx:
        ctx.tools.register(read_note)
        async with await ctx.agents.resume("s1", agent_options=MODEL) as handle:
            session = handle.agent.session
            assert list(session.derive_messages()) == before
            assert list(session.events) == stored_before
            outcome = await handle.agent.run("are you there?")
            events = list(session.events)
    assert outcome.kind == "completed"
    assert outcome.text == "still here"
    turns = [event.data["turn"] for event in events if event.type == "turn/start"]
    assert turns == [1, 2]
    request = second.requests[0]
    assert list(request.messages[: len(before)]) == before  # the history went out unchanged
    assert request.messages[-1].text == "are you there?"
    assert [e.type for e in events[len(stored_before) :]].count("request/header") == 1  # logged again
    assert backend.stored("s1") == events
    second.assert_consumed()


def _every_event_type() -> list[tuple[str, dict[str, Any]]]:
    """One of each event type the loop writes, plus plugin events of types nobody knows."""
    user = UserMessage(content=(Text('hi ✓ \u2028 "quoted" \\ back \u0000 nul'),))
    steering = UserMessage(content=(Text("steer"),), source={"kind": "steering"})
    context = UserMessage(content=(Text("ctx"),), source={"kind": "context"})
    call = ToolCall("call_1", "read_note", '{"name": "a"}')
    reply = AssistantMessage(content=(Text("let me look"), call), provider="scripted", model="test")
    result = ToolResultMessage(call_id="call_1", content=(Text("note a"),))
    summary = UserMessage(content=(Text("summary"),), source={"kind": "compaction"})
    queued = {"id": "q1", "kind": "send", "message": user.to_json()}
    return [
        ("inbox/queued", queued),
        ("turn/start", {"turn": 1}),
        ("user/message", {"message": user.to_json(), "queued_id": "q1"}),
        ("prompt/blocked", {"queued_id": "q0", "reason": "no", "message": user.to_json()}),
        ("context/message", {"message": context.to_json()}),
        ("step/start", {"turn": 1, "step": 1}),
        (
            "request/header",
            {"config": {"provider": "scripted", "model": "test"}, "system": "be nice", "tools": [], "prefix": []},
        ),
        ("request/header-delta", {"system": "be nicer"}),
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": TextDelta(0, "let me look").to_json()}),
        (
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": ToolCallDelta(1, "call_1", "read_note", "{}").to_json()},
        ),
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": Usage(10, 5).to_json()}),
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": Finish("tool-calls").to_json()}),
        (
            "assistant/message",
            {"turn": 1, "step": 1, "message": reply.to_json(), "usage": Usage(10, 5).to_json()},
        ),
        (
            "tool/call",
            {"turn": 1, "step": 1, "call_id": "call_1", "name": "read_note", "arguments": '{"name": "a"}'},
        ),
        ("tool/result", {"turn": 1, "step": 1, "message": result.to_json()}),
        ("steering/message", {"message": steering.to_json()}),
        ("user/message", {"message": summary.to_json(), "surface": SurfaceOp.replace(0, 2).to_json()}),
        ("turn/end", {"turn": 1, "reason": {"kind": "error", "failure": {"message": "x", "code": "SERVER"}}}),
        ("inbox/cleared", {"ids": ["q9"]}),
        (
            "my-plugin/thing",
            {"nested": {"list": [1, 2.5, None, True, "s"], "empty": {}}, "big": 2**62, "float": 1.0,
             "tiny": 5e-324, "neg": -0.0, "huge": 1e300, "order": {"b": 1, "a": 2}},
        ),
        ("x", {}),
        ('odd/"type" ✓\n\\', {}),
    ]


async def test_every_event_type_round_trips(backend: Backend) -> None:
    """Events of every type, unknown plugin types included, come back from load() exactly."""
    async with backend.harness() as ctx:
        session = await ctx.sessions.create("all", meta={"cwd": "/work", "extra": {"title": "t"}})
        for event_type, data in _every_event_type():
            session.append(event_type, data)
        await ctx.sessions.flush(session)
        live = list(session.events)
        meta = session.meta
        messages = list(session.derive_messages())
    stored = backend.stored("all")
    assert [event.to_json() for event in stored] == [event.to_json() for event in live]
    assert [repr(event.data) for event in stored] == [repr(event.data) for event in live]  # 1.0 stays a float, -0.0 too
    async with backend.harness() as ctx:
        loaded = await ctx.session_persistence.load("all")
        assert loaded.events == tuple(live)
        assert [repr(event.data) for event in loaded.events] == [repr(event.data) for event in live]
        assert loaded.meta == meta
        assert loaded.repaired == ()
        session = ctx.sessions.prepare("all", meta=loaded.meta, seed=loaded.events)
        assert list(session.derive_messages()) == messages


async def test_list_shows_sessions_and_their_children(backend: Backend) -> None:
    """list() gives id, times, cwd, parent, seed length, event and turn counts and a title for each session."""
    model = ScriptedModel([ScriptedModel.text("one"), ScriptedModel.text("two")])
    async with backend.harness(model) as ctx:
        async with await ctx.agents.create("main", agent_options=MODEL, meta={"cwd": "/work/here"}) as handle:
            await handle.agent.run("Plan the   release\nof version 2")
            await handle.agent.run("and then?")
            main = handle.agent.session
            child = await ctx.sessions.fork(main, len(main.events) - 1, "main/sub-1")
            child.append("note/x", {})
            count = len(main.events)
            await ctx.sessions.flush(child)
        infos = {info.id: info for info in await ctx.session_persistence.list()}
    assert set(infos) == {"main", "main/sub-1"}
    parent, sub = infos["main"], infos["main/sub-1"]
    assert (parent.cwd, parent.parent_id, parent.seed_length) == ("/work/here", None, 0)
    assert (parent.events, parent.turns, parent.title) == (count, 2, "Plan the release of version 2")
    assert (sub.parent_id, sub.seed_length, sub.events, sub.turns) == ("main", count, count + 1, 2)
    assert parent.created <= sub.created
    assert parent.modified >= parent.created - 1
    assert [info.id for info in infos.values() if info.parent_id == "main"] == ["main/sub-1"]


async def test_exists_load_and_delete(backend: Backend) -> None:
    """exists() follows the store; delete() refuses a live session and removes a stored one."""
    errors = backend.errors
    async with backend.harness() as ctx:
        persistence = ctx.session_persistence
        assert not await persistence.exists("gone")
        session = await ctx.sessions.create("gone")
        assert await persistence.exists("gone")  # stored when the session went live
        with pytest.raises(errors.SessionInUseError, match="live in this harness"):
            await persistence.delete("gone")
        with pytest.raises(errors.SessionInUseError, match="live in this harness"):
            await persistence.load("gone")
        await ctx.sessions.flush(session)
    async with backend.harness() as ctx:
        persistence = ctx.session_persistence
        await persistence.load("gone")  # holds the session for a resume; delete() takes it over
        await persistence.delete("gone")
        assert not await persistence.exists("gone")
        assert backend.is_empty()
        with pytest.raises(errors.SessionNotFoundError, match="no stored session 'gone'") as caught:
            await persistence.load("gone")
        assert isinstance(caught.value, LookupError)
        with pytest.raises(errors.SessionNotFoundError):
            await persistence.delete("gone")
        with pytest.raises(errors.SessionNotFoundError):
            await ctx.agents.resume("gone")


async def test_pending_inbox_is_restored_and_waits_for_the_next_send(backend: Backend) -> None:
    """Queued prompts stored without a consuming event are pending after resume, and run with the next send."""
    waiting = UserMessage(content=(Text("queued before the stop"),))
    async with backend.harness() as ctx:
        session = await ctx.sessions.create("inbox")
        session.append("inbox/queued", {"id": "q1", "kind": "send", "message": waiting.to_json()})
        dropped = UserMessage(content=(Text("cancelled"),))
        session.append("inbox/queued", {"id": "q2", "kind": "send", "message": dropped.to_json()})
        session.append("inbox/cleared", {"ids": ["q2"]})
    model = ScriptedModel([ScriptedModel.text("both seen")])
    async with backend.harness(model) as ctx, await ctx.agents.resume("inbox", agent_options=MODEL) as handle:
        agent = handle.agent
        with anyio.fail_after(5):
            await agent.when_idle()
        assert model.requests == []  # restored, not run
        outcome = await agent.run("and this one")
    assert outcome.kind == "completed"
    texts = [message.text for message in model.requests[0].messages]
    assert texts == ["queued before the stop", "and this one"]


async def test_configured_agent_resumes_its_stored_session(backend: Backend) -> None:
    """An agent configured with a session_id is created the first time and resumed the next."""
    agents = {
        "agent-loop": {"agents": [{"id": "bot", "session_id": "bot-session", "model": "scripted/test"}]}
    }
    async with backend.harness(extra=agents) as ctx:
        agent = ctx.agents.get("bot-session")
        assert agent is not None
        ctx.llm.register_adapter("scripted", ScriptedModel([ScriptedModel.text("first")]))
        await agent.run("one")
        before = list(agent.session.derive_messages())
    async with backend.harness(extra=agents) as ctx:
        agent = ctx.agents.get("bot-session")
        assert agent is not None
        assert list(agent.session.derive_messages()) == before
        model = ScriptedModel([ScriptedModel.text("second")])
        ctx.llm.register_adapter("scripted", model)
        outcome = await agent.run("two")
        assert [e.data["turn"] for e in agent.session.events if e.type == "turn/start"] == [1, 2]
    assert outcome.text == "second"


async def test_resume_checks_each_stored_event_once(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """load() checks the stored events by append's rules and the resume's prepare takes that check over
    (the loaded session carries it): over load and resume every event, crash repair's too, is checked once."""
    async with backend.harness() as ctx:
        session = await ctx.sessions.create("once")
        session.append("inbox/queued", {"id": "q1", "kind": "send", "message": UserMessage("hi").to_json()})
        session.append("turn/start", {"turn": 1})
        session.append("user/message", {"message": UserMessage("hi").to_json(), "queued_id": "q1"})
        reply = AssistantMessage(content=(Text("hello"),), provider="scripted", model="test")
        session.append("assistant/message", {"turn": 1, "step": 1, "message": reply.to_json()})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        session.append("turn/start", {"turn": 2})  # left open: the load closes it
        await ctx.sessions.flush(session)
    checked: list[int] = []
    admit = Session._admit

    def counting(self: Session, event: SessionEvent, *, validate: bool) -> SessionEvent:
        checked.append(event.seq)  # from the loader's worker thread too: list.append is atomic
        return admit(self, event, validate=validate)

    monkeypatch.setattr(Session, "_admit", counting)
    async with backend.harness(ScriptedModel()) as ctx:
        async with await ctx.agents.resume("once", agent_options=MODEL) as handle:
            events = list(handle.agent.session.events)
            monkeypatch.undo()
    assert [event.type for event in events[-1:]] == ["turn/end"]  # crash repair's
    assert sorted(checked) == [event.seq for event in events]  # each stored event once, none skipped


async def test_json_orjson_cannot_write_round_trips(backend: Backend) -> None:
    """Lossless JSON that orjson refuses to write, an int beyond 64 bits or a lone surrogate, is
    stored and read back exactly, and the events after it too (it used to stop the session's writes)."""
    wide = {"big": 2**70, "negative": -(2**65), "lone": "a\ud800b", "fine": "ok"}
    async with backend.harness() as ctx:
        session = await ctx.sessions.create("wide")
        session.append("my-plugin/wide", wide)
        session.append("my-plugin/after", {"n": 1})
        await ctx.sessions.flush(session)
        live = list(session.events)
    assert backend.stored("wide") == live
    async with backend.harness() as ctx:
        loaded = await ctx.session_persistence.load("wide")
        assert loaded.events == tuple(live)
        assert loaded.events[0].data == wide
