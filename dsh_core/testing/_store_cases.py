"""The cases of ``check_session_store``: the persistence contract, through the public seam only.

Each case is an ``async def`` taking a ``KitStore`` (a fresh, empty store) and asserting; its name
is its docstring's first line. The child processes run the backend's plugin from its import path.
"""

from __future__ import annotations

import functools
import os
import textwrap
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from dsh_core.llm import Finish, TextDelta, ToolCallDelta, Usage
from dsh_core.persistence import (
    SessionConflictError,
    SessionCorruptError,
    SessionInUseError,
    SessionNotFoundError,
)
from dsh_core.services.sessions import Session
from dsh_core.session_log import SessionEvent, SurfaceOp
from dsh_core.testing._scripted import ScriptedModel
from dsh_core.testing._store_harness import MODEL, Child, KitStore
from dsh_core.tools._definition import tool
from dsh_core.vocabulary import AssistantMessage, Text, ToolCall, ToolResultMessage, UserMessage

__all__ = ["CASES", "Case"]

Case = Callable[[KitStore], Awaitable[None]]

CASES: dict[str, Case] = {}


def case(fn: Case) -> Case:
    """Register ``fn`` under its name (``test_`` dropped)."""
    CASES[fn.__name__] = fn
    return fn


@tool(parallel_safe=True)
def read_note(name: str) -> str:
    """Read a note by name."""
    return f"note {name}"


def _types(events: Any) -> list[str]:
    return [event.type for event in events]


E = TypeVar("E", bound=BaseException)


async def expect(error: type[E], what: str, call: Callable[..., Awaitable[object]], *args: object) -> E:
    """The ``error`` that ``await call(*args)`` raises; an ``AssertionError`` saying ``what`` when it does not."""
    try:
        await call(*args)
    except error as exc:
        return exc
    msg = f"{what} did not raise {error.__name__}"
    raise AssertionError(msg)


# ---------------------------------------------------------------------- the write path


@case
async def stop_writes_what_is_pending(store: KitStore) -> None:
    """Stopping the harness stores every followed session's events, with no flush asked for."""
    async with store.harness() as ctx:
        session = await ctx.sessions.create("stop")
        for index in range(10):
            session.append("note/added", {"index": index})
        events = tuple(session.events)
    assert (await store.read("stop")).events == events


@case
async def flush_makes_everything_published_durable(store: KitStore) -> None:
    """After ``flush`` another harness reads every event published, while the session stays live."""
    async with store.harness() as ctx:
        session = await ctx.sessions.create("batch")
        for index in range(1000):
            session.append("note/added", {"index": index})
        await ctx.sessions.flush(session)
        assert (await store.read("batch")).events == tuple(session.events)


@case
async def new_session_is_stored_with_its_seed(store: KitStore) -> None:
    """A new session's seed is stored when it goes live; before that nothing is."""
    seed = [("note/a", {}), ("note/b", {"x": 1})]
    async with store.harness() as ctx:
        assert not await ctx.session_persistence.exists("seeded")
        assert tuple(await ctx.session_persistence.list()) == ()
        session = await ctx.sessions.create("seeded", seed=seed)
        assert await ctx.session_persistence.exists("seeded")
        assert _types((await store.read("seeded")).events) == ["note/a", "note/b"]
        assert session.meta.seed_length == 2


@case
async def flush_of_a_session_that_cannot_be_persisted_says_why(store: KitStore) -> None:
    """A fresh session created under a stored one's id is refused: its flush raises SessionConflictError."""
    async with store.harness() as ctx:
        session = await ctx.sessions.create("taken")
        session.append("note/added", {})
    async with store.harness() as ctx:
        session = await ctx.sessions.create("taken")  # not a resume: it does not continue the stored log
        session.append("note/other", {})
        what = "flush() of a session clashing with a stored one"
        error = await expect(SessionConflictError, what, ctx.sessions.flush, session)
        assert error.session_id == "taken", error.session_id
    assert _types((await store.read("taken")).events) == ["note/added"]


@case
async def many_sessions_written_concurrently(store: KitStore) -> None:
    """Twenty sessions appended to from twenty tasks each store exactly their own events."""
    async with store.harness() as ctx:
        sessions = [await ctx.sessions.create(f"s{index}") for index in range(20)]

        async def fill(session: Session) -> None:
            for index in range(200):
                session.append("note/added", {"index": index, "id": session.id})
                if index % 7 == 0:
                    await anyio.lowlevel.checkpoint()
            await ctx.sessions.flush(session)

        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(fill, session)
        expected = {session.id: tuple(session.events) for session in sessions}
    for session_id, events in expected.items():
        assert (await store.read(session_id)).events == events, session_id


@case
async def disposed_session_releases_it(store: KitStore) -> None:
    """When a session leaves the store it is complete, and another harness can take it over at once."""
    async with store.harness() as first, store.harness() as second:
        session = first.sessions.prepare("handover")
        detach = await first.sessions.enter(session)
        session.append("note/added", {})
        await detach()
        loaded = await second.session_persistence.load("handover")
        assert _types(loaded.events) == ["note/added"]


@case
async def an_agent_whose_session_cannot_be_persisted_is_refused(store: KitStore) -> None:
    """Creating an agent over a stored session's id fails at create (the agent/created veto), not silently."""
    async with store.harness(ScriptedModel(["stored answer"])) as ctx:
        async with await ctx.agents.create("taken", agent_options=MODEL) as handle:
            await handle.agent.run("remember this")
    async with store.harness() as ctx:
        create = functools.partial(ctx.agents.create, agent_options=MODEL)
        await expect(SessionConflictError, "create() of an agent over a stored session's id", create, "taken")
        assert ctx.agents.get("taken") is None


# ---------------------------------------------------------------------- round trips


@case
async def resume_continues_the_agent_exactly(store: KitStore) -> None:
    """A resumed agent has the same derived messages, continues turn numbers and runs a valid next turn."""
    first = ScriptedModel([ScriptedModel.tool_call("read_note", {"name": "a"}), ScriptedModel.text("read it")])
    async with store.harness(first) as ctx:
        ctx.tools.register(read_note)
        async with await ctx.agents.create("s1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("read note a")
            before = list(handle.agent.session.derive_messages())
            stored_before = tuple(handle.agent.session.events)
    assert outcome.kind == "completed", outcome
    assert (await store.read("s1")).events == stored_before
    second = ScriptedModel([ScriptedModel.text("still here")])
    async with store.harness(second) as ctx:
        ctx.tools.register(read_note)
        async with await ctx.agents.resume("s1", agent_options=MODEL) as handle:
            session = handle.agent.session
            assert list(session.derive_messages()) == before
            assert tuple(session.events) == stored_before
            outcome = await handle.agent.run("are you there?")
            events = tuple(session.events)
    assert (outcome.kind, outcome.text) == ("completed", "still here"), outcome
    assert [event.data["turn"] for event in events if event.type == "turn/start"] == [1, 2]
    request = second.requests[0]
    assert list(request.messages[: len(before)]) == before  # the history went out unchanged
    assert (await store.read("s1")).events == events


def every_event_type() -> list[tuple[str, dict[str, Any]]]:
    """One of each event type the loop writes, plus plugin events of types nobody knows."""
    user = UserMessage(content=(Text('hi ✓ \u2028 "quoted" \\ back \u0000 nul'),))
    steering = UserMessage(content=(Text("steer"),), source={"kind": "steering"})
    context = UserMessage(content=(Text("ctx"),), source={"kind": "context"})
    call = ToolCall("call_1", "read_note", '{"name": "a"}')
    reply = AssistantMessage(content=(Text("let me look"), call), provider="scripted", model="test")
    result = ToolResultMessage(call_id="call_1", content=(Text("note a"),))
    summary = UserMessage(content=(Text("summary"),), source={"kind": "compaction"})
    queued = {"id": "q1", "kind": "send", "message": user.to_json()}
    header = {"config": {"provider": "scripted", "model": "test"}, "system": "be nice", "tools": [], "prefix": []}
    chunk = {"turn": 1, "step": 1}
    return [
        ("inbox/queued", queued),
        ("turn/start", {"turn": 1}),
        ("user/message", {"message": user.to_json(), "queued_id": "q1"}),
        ("prompt/blocked", {"queued_id": "q0", "reason": "no", "message": user.to_json()}),
        ("context/message", {"message": context.to_json()}),
        ("step/start", {"turn": 1, "step": 1}),
        ("request/header", header),
        ("request/header-delta", {"system": "be nicer"}),
        ("assistant/chunk", {**chunk, "chunk": TextDelta(0, "let me look").to_json()}),
        ("assistant/chunk", {**chunk, "chunk": ToolCallDelta(1, "call_1", "read_note", "{}").to_json()}),
        ("assistant/chunk", {**chunk, "chunk": Usage(10, 5).to_json()}),
        ("assistant/chunk", {**chunk, "chunk": Finish("tool-calls").to_json()}),
        ("assistant/message", {**chunk, "message": reply.to_json(), "usage": Usage(10, 5).to_json()}),
        ("tool/call", {**chunk, "call_id": "call_1", "name": "read_note", "arguments": '{"name": "a"}'}),
        ("tool/result", {**chunk, "message": result.to_json()}),
        ("steering/message", {"message": steering.to_json()}),
        ("user/message", {"message": summary.to_json(), "surface": SurfaceOp.replace(0, 2).to_json()}),
        ("turn/end", {"turn": 1, "reason": {"kind": "error", "failure": {"message": "x", "code": "SERVER"}}}),
        ("inbox/cleared", {"ids": ["q9"]}),
        (
            "my-plugin/thing",
            {"nested": {"list": [1, 2.5, None, True, "s"], "empty": {}}, "big": 2**62, "float": 1.0,
             "tiny": 5e-324, "neg": -0.0, "huge": 1e300, "order": {"b": 1, "a": 2}},
        ),
        ("my-plugin/wide", {"big": 2**70, "negative": -(2**65), "lone": "a\ud800b"}),
        ("x", {}),
        ('odd/"type" ✓\n\\', {}),
    ]


@case
async def every_event_type_round_trips(store: KitStore) -> None:
    """Events of every type, unknown plugin types and JSON beyond 64-bit ints included, come back exactly."""
    async with store.harness() as ctx:
        session = await ctx.sessions.create("all", meta={"cwd": "/work", "extra": {"title": "t"}})
        for event_type, data in every_event_type():
            session.append(event_type, data)
        await ctx.sessions.flush(session)
        live = tuple(session.events)
        meta = session.meta
        messages = list(session.derive_messages())
    async with store.harness() as ctx:
        loaded = await ctx.session_persistence.load("all")
        assert [event.to_json() for event in loaded.events] == [event.to_json() for event in live]
        assert loaded.events == live
        # 1.0 stays a float and -0.0 keeps its sign; key order is kept
        assert [repr(event.data) for event in loaded.events] == [repr(event.data) for event in live]
        assert loaded.meta == meta
        assert loaded.repaired == ()
        session = ctx.sessions.prepare("all", meta=loaded.meta, seed=loaded.events)
        assert list(session.derive_messages()) == messages


@case
async def list_shows_sessions_and_their_children(store: KitStore) -> None:
    """list() gives id, times, cwd, parent, seed length, event and turn counts and a title for each session."""
    model = ScriptedModel([ScriptedModel.text("one"), ScriptedModel.text("two")])
    async with store.harness(model) as ctx:
        async with await ctx.agents.create("main", agent_options=MODEL, meta={"cwd": "/work/here"}) as handle:
            await handle.agent.run("Plan the   release\nof version 2")
            await handle.agent.run("and then?")
            main = handle.agent.session
            child = await ctx.sessions.fork(main, len(main.events) - 1, "main/sub-1")
            child.append("note/x", {})
            count = len(main.events)
            await ctx.sessions.flush(child)
        infos = {info.id: info for info in await ctx.session_persistence.list()}
    assert set(infos) == {"main", "main/sub-1"}, set(infos)
    parent, sub = infos["main"], infos["main/sub-1"]
    assert (parent.cwd, parent.parent_id, parent.seed_length) == ("/work/here", None, 0)
    assert (parent.events, parent.turns, parent.title) == (count, 2, "Plan the release of version 2")
    assert (sub.parent_id, sub.seed_length, sub.events, sub.turns) == ("main", count, count + 1, 2)
    assert parent.created <= sub.created
    assert parent.modified >= parent.created - 1


@case
async def exists_load_and_delete(store: KitStore) -> None:
    """exists() follows the store; delete() refuses a live session and removes a stored one."""
    async with store.harness() as ctx:
        persistence = ctx.session_persistence
        assert not await persistence.exists("gone")
        session = await ctx.sessions.create("gone")
        assert await persistence.exists("gone")  # stored when the session went live
        for refused in (persistence.delete, persistence.load):
            what = f"{refused.__name__}() of a session live in this harness"
            error = await expect(SessionInUseError, what, refused, "gone")
            assert error.pid == os.getpid(), error.pid
        await ctx.sessions.flush(session)
    async with store.harness() as ctx:
        persistence = ctx.session_persistence
        await persistence.load("gone")  # holds the session for a resume; delete() takes it over
        await persistence.delete("gone")
        assert not await persistence.exists("gone")
        assert tuple(await persistence.list()) == ()
        for missing in (persistence.load, persistence.delete, persistence.read, persistence.repair, ctx.agents.resume):
            gone = await expect(SessionNotFoundError, f"{missing.__name__}() of a deleted session", missing, "gone")
            assert isinstance(gone, LookupError)
            assert "gone" in str(gone), str(gone)


@case
async def pending_inbox_is_restored_and_waits_for_the_next_send(store: KitStore) -> None:
    """Queued prompts stored without a consuming event are pending after resume, and run with the next send."""
    waiting = UserMessage(content=(Text("queued before the stop"),))
    async with store.harness() as ctx:
        session = await ctx.sessions.create("inbox")
        session.append("inbox/queued", {"id": "q1", "kind": "send", "message": waiting.to_json()})
        dropped = UserMessage(content=(Text("cancelled"),))
        session.append("inbox/queued", {"id": "q2", "kind": "send", "message": dropped.to_json()})
        session.append("inbox/cleared", {"ids": ["q2"]})
    model = ScriptedModel([ScriptedModel.text("both seen")])
    async with store.harness(model) as ctx, await ctx.agents.resume("inbox", agent_options=MODEL) as handle:
        agent = handle.agent
        with anyio.fail_after(5):
            await agent.when_idle()
        assert model.requests == []  # restored, not run
        outcome = await agent.run("and this one")
    assert outcome.kind == "completed", outcome
    assert [message.text for message in model.requests[0].messages] == ["queued before the stop", "and this one"]


@case
async def configured_agent_resumes_its_stored_session(store: KitStore) -> None:
    """An agent configured with a session_id is created the first time and resumed the next."""
    agents = {"agent-loop": {"agents": [{"id": "bot", "session_id": "bot-session", "model": "scripted/test"}]}}
    async with store.harness(extra=agents) as ctx:
        agent = ctx.agents.get("bot-session")
        assert agent is not None
        ctx.llm.register_adapter("scripted", ScriptedModel([ScriptedModel.text("first")]))
        await agent.run("one")
        before = list(agent.session.derive_messages())
    async with store.harness(extra=agents) as ctx:
        agent = ctx.agents.get("bot-session")
        assert agent is not None
        assert list(agent.session.derive_messages()) == before
        ctx.llm.register_adapter("scripted", ScriptedModel([ScriptedModel.text("second")]))
        outcome = await agent.run("two")
        assert [e.data["turn"] for e in agent.session.events if e.type == "turn/start"] == [1, 2]
    assert outcome.text == "second", outcome


@case
async def resume_checks_each_stored_event_once(store: KitStore) -> None:
    """load() checks the stored events by append's rules and hands that check to the resume (``checked``):
    over load and resume every event, crash repair's too, is checked exactly once."""
    async with store.harness() as ctx:
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
        checked.append(event.seq)  # from a loader's worker thread too: list.append is atomic
        return admit(self, event, validate=validate)

    async with store.harness(ScriptedModel()) as ctx:
        Session._admit = counting  # type: ignore[method-assign]
        try:
            async with await ctx.agents.resume("once", agent_options=MODEL) as handle:
                events = list(handle.agent.session.events)
                Session._admit = admit  # type: ignore[method-assign]
        finally:
            Session._admit = admit  # type: ignore[method-assign]
    assert _types(events[-1:]) == ["turn/end"]  # crash repair's
    assert sorted(checked) == [event.seq for event in events], sorted(checked)


# ---------------------------------------------------------------------- crash repair


def closed_turn() -> list[tuple[str, dict[str, Any]]]:
    prompt = UserMessage(content=(Text("hello"),))
    answer = AssistantMessage(content=(Text("hi"),), provider="scripted", model="test")
    return [
        ("turn/start", {"turn": 1}),
        ("user/message", {"message": prompt.to_json()}),
        ("step/start", {"turn": 1, "step": 1}),
        ("assistant/message", {"turn": 1, "step": 1, "message": answer.to_json()}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]


def open_tool_turn() -> list[tuple[str, dict[str, Any]]]:
    """A turn cut off in its first step: three tool calls, one finished, one running, one not started."""
    prompt = UserMessage(content=(Text("do three things"),))
    calls = (ToolCall("c1", "one", "{}"), ToolCall("c2", "two", '{"x": 1}'), ToolCall("c3", "three", "{}"))
    reply = AssistantMessage(content=(Text("on it"), *calls), provider="scripted", model="test")
    done = ToolResultMessage(call_id="c1", content=(Text("done"),))
    return [
        *closed_turn(),
        ("inbox/queued", {"id": "q1", "kind": "send", "message": prompt.to_json()}),
        ("turn/start", {"turn": 2}),
        ("user/message", {"message": prompt.to_json(), "queued_id": "q1"}),
        ("step/start", {"turn": 2, "step": 1}),
        ("assistant/message", {"turn": 2, "step": 1, "message": reply.to_json()}),
        ("tool/call", {"turn": 2, "step": 1, "call_id": "c1", "name": "one", "arguments": "{}"}),
        ("tool/result", {"turn": 2, "step": 1, "message": done.to_json()}),
        ("tool/call", {"turn": 2, "step": 1, "call_id": "c2", "name": "two", "arguments": '{"x": 1}'}),
    ]


async def store_log(store: KitStore, events: list[tuple[str, dict[str, Any]]]) -> None:
    """Store session ``crafted`` with ``events``, as a process would that stopped right after them."""
    async with store.harness() as ctx:
        session = await ctx.sessions.create("crafted")
        for event_type, data in events:
            session.append(event_type, data)


@case
async def open_turn_is_closed_by_appended_repair_events(store: KitStore) -> None:
    """load() gives open calls TOOL_OUTCOME_UNKNOWN, unstarted ones a TOOL_NOT_STARTED pair, then turn/end
    interrupted, and stores them after the stored events (a second load repairs nothing)."""
    await store_log(store, open_tool_turn())
    viewed = await store.read("crafted")
    before = viewed.events[: len(viewed.events) - len(viewed.repaired)]
    assert len(before) == len(open_tool_turn())
    async with store.harness() as ctx:
        loaded = await ctx.session_persistence.load("crafted")
    repaired = [(event.type, dict(event.data)) for event in loaded.repaired]
    assert [kind for kind, _ in repaired] == ["tool/result", "tool/call", "tool/result", "turn/end"], repaired
    unknown, call, not_started, end = (data for _, data in repaired)
    assert unknown["error_code"] == "TOOL_OUTCOME_UNKNOWN"
    assert unknown["message"]["call_id"] == "c2"
    assert call == {"turn": 2, "step": 1, "call_id": "c3", "name": "three", "arguments": "{}"}
    assert not_started["error_code"] == "TOOL_NOT_STARTED"
    assert end == {"turn": 2, "reason": {"kind": "interrupted"}}
    assert [event.seq for event in loaded.events] == list(range(len(loaded.events)))
    assert loaded.events[: len(before)] == before
    after = await store.read("crafted")
    assert (after.events, after.repaired) == (loaded.events, ())
    async with store.harness() as ctx:
        again = await ctx.session_persistence.load("crafted")
    assert (again.events, again.repaired) == (loaded.events, ())


@case
async def open_turn_without_tool_calls_just_ends(store: KitStore) -> None:
    """A turn cut off while the model streamed ends interrupted, with nothing else added."""
    prompt = UserMessage(content=(Text("hi"),))
    await store_log(
        store,
        [("turn/start", {"turn": 1}), ("user/message", {"message": prompt.to_json()}), ("step/start", {"turn": 1, "step": 1})],
    )
    async with store.harness() as ctx:
        loaded = await ctx.session_persistence.load("crafted")
    assert [(e.type, dict(e.data)) for e in loaded.repaired] == [
        ("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}})
    ]


@case
async def repaired_session_resumes_with_a_valid_request(store: KitStore) -> None:
    """After repair every tool call has a result, so the next request is valid and tells the model."""
    await store_log(store, open_tool_turn())
    model = ScriptedModel([ScriptedModel.text("I will check c2 first")])
    async with store.harness(model) as ctx, await ctx.agents.resume("crafted", agent_options=MODEL) as handle:
        outcome = await handle.agent.run("what happened?")
        turns = [e.data["turn"] for e in handle.agent.session.events if e.type == "turn/start"]
    assert outcome.kind == "completed", outcome
    assert turns == [1, 2, 3]
    results = {m.call_id: m.text for m in model.requests[0].messages if isinstance(m, ToolResultMessage)}
    assert results["c1"] == "done"
    assert "outcome of the tool call two (c2) is unknown" in results["c2"], results["c2"]
    assert "was not started" in results["c3"], results["c3"]


@case
async def read_views_an_open_turn_without_writing_or_locking(store: KitStore) -> None:
    """read() shows the repaired log but stores nothing and takes no lock; load() then can take it."""
    async with store.harness() as ctx:
        session = await ctx.sessions.create("open")
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
    async with store.harness() as ctx:
        viewed = await ctx.session_persistence.read("open")
        again = await ctx.session_persistence.read("open")  # no lock was kept by the first read
        assert again.repaired == viewed.repaired  # nothing stored by read()
        loaded = await ctx.session_persistence.load("open")
    assert _types(viewed.events) == ["turn/start", "turn/end"]
    assert viewed.events[-1].data["reason"] == {"kind": "interrupted"}
    assert len(viewed.repaired) == 1
    assert (again.events, loaded.events) == (viewed.events, viewed.events)
    assert (await store.read("open")).repaired == ()  # load (not read) stored the repair


@case
async def read_while_another_harness_holds_the_session(store: KitStore) -> None:
    """read() works while the session is live elsewhere and sees what that owner flushed; load() is refused."""
    async with store.harness() as owner, store.harness() as viewer:
        session = await owner.sessions.create("busy")
        session.append("note/one", {})
        await owner.sessions.flush(session)
        viewed = await viewer.session_persistence.read("busy")
        assert _types(viewed.events) == ["note/one"]
        what = "load() of a session live in another harness"
        await expect(SessionInUseError, what, viewer.session_persistence.load, "busy")


@case
async def repair_leaves_a_sound_log_alone_and_refuses_live_or_unknown(store: KitStore) -> None:
    """repair() of a sound log cuts nothing; of a live session is SessionInUseError; of no session not found."""
    await store_log(store, closed_turn())
    async with store.harness() as ctx:
        report = await ctx.session_persistence.repair("crafted")
        assert (report.id, report.seq, report.dropped_events, report.events) == ("crafted", None, 0, 5), report
        assert report.backup is None
        assert report.describe()[0].startswith("session crafted: nothing to repair"), report.describe()
        await ctx.sessions.create("live")
        await expect(SessionInUseError, "repair() of a live session", ctx.session_persistence.repair, "live")


@case
async def corrupt_is_a_value_error(store: KitStore) -> None:
    """The errors are the core's: SessionCorruptError is a ValueError, SessionNotFoundError a LookupError."""
    assert issubclass(SessionCorruptError, ValueError)
    assert issubclass(SessionNotFoundError, LookupError)
    async with store.harness() as ctx:
        error = await expect(SessionNotFoundError, "load() of an unknown id", ctx.session_persistence.load, "nobody")
        assert error.session_id in (None, "nobody"), error.session_id


# ---------------------------------------------------------------------- one owner per session


@case
async def second_harness_in_this_process_is_refused(store: KitStore) -> None:
    """Two harnesses of one process on one store exclude each other: load() names this process."""
    async with store.harness() as first, store.harness() as second:
        session = await first.sessions.create("mine")
        await first.sessions.flush(session)
        what = "load() from a second harness of this process of a session live in the first"
        error = await expect(SessionInUseError, what, second.session_persistence.load, "mine")
        assert error.pid == os.getpid(), error.pid
        assert str(os.getpid()) in str(error), str(error)


@case
async def load_keeps_the_lock_for_the_resume(store: KitStore) -> None:
    """Between load() and the resume nobody else can take the session; release() and stopping let it go."""
    async with store.harness() as ctx:
        await ctx.sessions.create("reserved")
    async with store.harness() as first:
        await first.session_persistence.load("reserved")
        async with store.harness() as second:
            try:
                await second.session_persistence.load("reserved")
            except SessionInUseError:
                pass
            else:
                raise AssertionError("a session load() reserved was loaded by another harness")
            await first.session_persistence.load("reserved")  # the holder itself may load again
            first.session_persistence.release("reserved")
            await second.load_when_free if False else None
            await store.load_when_free(second, "reserved")  # release() may give the lock back soon, not at once
    async with store.harness() as third:
        await third.session_persistence.load("reserved")  # released when `second` stopped


HOLDER = textwrap.dedent(
    """
    import importlib, json, sys
    import anyio
    from dsh_core import Harness

    async def main(plugin_path: str, name: str, table: str) -> None:
        module, _, cls = plugin_path.partition(":")
        plugin = getattr(importlib.import_module(module), cls)()
        async with Harness(config={"plugins": {name: json.loads(table)}}, plugins=[plugin], autoload=False) as ctx:
            session = await ctx.sessions.create("shared")
            session.append("note/holder", {})
            await ctx.sessions.flush(session)
            print("READY", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.read)
            session.append("note/holder-done", {})

    anyio.run(main, *sys.argv[1:4], backend=sys.argv[4])
    """
)


@case
async def second_process_is_told_who_holds_the_session(store: KitStore) -> None:
    """load(), resume(), delete(), repair() and a same-id session meet SessionInUseError naming the holder's
    pid; after it exits the session loads with everything it wrote."""
    holder = await Child.start(HOLDER, *store.child_args())
    try:
        assert await holder.line() == "READY"
        pid = holder.process.pid
        async with store.harness() as ctx:
            persistence = ctx.session_persistence
            for refused in (persistence.load, ctx.agents.resume, persistence.delete, persistence.repair):
                what = f"{refused.__name__}() of a session another process holds"
                error = await expect(SessionInUseError, what, refused, "shared")
                assert error.pid == pid, (refused.__name__, error.pid, pid)
                assert f"process {pid}" in str(error), str(error)
            live = await ctx.sessions.create("shared")  # goes live here, but cannot be persisted
            live.append("note/intruder", {})
            what = "flush() of a session another process holds"
            await expect(SessionInUseError, what, ctx.sessions.flush, live)
        assert _types((await store.read("shared")).events) == ["note/holder"]
        await holder.close_stdin()
        with anyio.fail_after(30):
            assert await holder.process.wait() == 0
    finally:
        await holder.aclose()
    async with store.harness() as ctx:
        loaded = await store.load_when_free(ctx, "shared")
    assert _types(loaded.events) == ["note/holder", "note/holder-done"]


@case
async def sigkilled_holder_frees_the_session(store: KitStore) -> None:
    """A SIGKILLed holder frees the session with no manual step: a resume within 20 s of its death succeeds."""
    holder = await Child.start(HOLDER, *store.child_args())
    try:
        assert await holder.line() == "READY"
        async with store.harness() as ctx:
            resume = functools.partial(ctx.agents.resume, agent_options=MODEL)
            await expect(SessionInUseError, "resume() of a session a live process holds", resume, "shared")
        await holder.kill()
    finally:
        await holder.aclose()
    async with store.harness() as ctx:
        await store.load_when_free(ctx, "shared")
        ctx.session_persistence.release("shared")
        async with await ctx.agents.resume("shared", agent_options=MODEL) as handle:
            assert _types(handle.agent.session.events) == ["note/holder"]


# ---------------------------------------------------------------------- SIGKILL and §9.1

DOOMED = textwrap.dedent(
    """
    import importlib, json, sys
    import anyio
    from dsh_core import AgentOptions, Harness, ToolExecution, tool
    from dsh_core.testing import ScriptedModel

    @tool
    async def migrate(execution: ToolExecution, table: str) -> str:
        \"\"\"Migrate a table (slow).\"\"\"
        ctx = execution.ctx
        agent = ctx.agents.get(execution.agent_id)
        agent.send("second: and then report")
        await ctx.sessions.flush(agent.session)
        print("READY", flush=True)
        await anyio.sleep_forever()
        return "never"

    async def main(plugin_path: str, name: str, table: str) -> None:
        module, _, cls = plugin_path.partition(":")
        plugin = getattr(importlib.import_module(module), cls)()
        model = ScriptedModel([ScriptedModel.tool_call("migrate", {"table": "users"}, text="migrating")])
        async with Harness(config={"plugins": {name: json.loads(table)}}, plugins=[plugin], autoload=False) as ctx:
            ctx.llm.register_adapter("scripted", model)
            ctx.tools.register(migrate)
            handle = await ctx.agents.create("doomed", agent_options=AgentOptions(model="scripted/test"))
            await handle.agent.run("first: migrate the users table")

    anyio.run(main, *sys.argv[1:4], backend=sys.argv[4])
    """
)


@case
async def sigkill_mid_tool_then_resume(store: KitStore) -> None:
    """A process SIGKILLed inside a tool: the prompt it queued is stored, the open call is closed
    TOOL_OUTCOME_UNKNOWN and the turn interrupted at load; the resumed agent keeps the prompt pending."""
    doomed = await Child.start(DOOMED, *store.child_args())
    try:
        assert await doomed.line() == "READY"
        await doomed.kill()
    finally:
        await doomed.aclose()
    stored = (await store.read("doomed")).events
    assert [e.type for e in stored if e.type in ("inbox/queued", "tool/call")] == [
        "inbox/queued",
        "tool/call",
        "inbox/queued",
    ], _types(stored)
    model = ScriptedModel([ScriptedModel.text("the migration may have run; checking first")])
    async with store.harness(model) as ctx:
        loaded = await store.load_when_free(ctx, "doomed")
        assert [(e.type, e.data.get("error_code")) for e in loaded.repaired] == [
            ("tool/result", "TOOL_OUTCOME_UNKNOWN"),
            ("turn/end", None),
        ]
        async with await ctx.agents.resume("doomed", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                await agent.when_idle()
            assert model.requests == []  # the restored prompt waits for the next send
            outcome = await agent.run("third: what is the state?")
            events = tuple(agent.session.events)
    assert outcome.kind == "completed", outcome
    texts = [m.text for m in model.requests[0].messages if isinstance(m, UserMessage)]
    assert texts == ["first: migrate the users table", "second: and then report", "third: what is the state?"]
    assert (await store.read("doomed")).events == events


#: SPEC §9.1: a send that returned more than this long before the kill is never lost
WINDOW = 0.2

BLOCKED = textwrap.dedent(
    """
    import importlib, json, os, sys, time
    import anyio
    from dsh_core import AgentOptions, Harness
    from dsh_core.testing import ScriptedModel

    async def main(plugin_path: str, name: str, table: str, block: str) -> None:
        module, _, cls = plugin_path.partition(":")
        plugin = getattr(importlib.import_module(module), cls)()
        async with Harness(config={"plugins": {name: json.loads(table)}}, plugins=[plugin], autoload=False) as ctx:
            ctx.llm.register_adapter("scripted", ScriptedModel([ScriptedModel.text("done")]))
            handle = await ctx.agents.create("blocked", agent_options=AgentOptions(model="scripted/test"))
            await ctx.sessions.flush(handle.agent.session)  # the session is stored: only the send is at stake
            queued = handle.agent.send("the prompt")
            os.write(1, f"SENT {queued}\\n".encode())
            deadline = time.monotonic() + 60  # the loop gets no control back until the kill
            if block == "sleep":
                time.sleep(60)
            while time.monotonic() < deadline:
                sum(range(10_000))

    anyio.run(main, *sys.argv[1:5], backend=sys.argv[5])
    """
)


async def _send_survives(store: KitStore, block: str) -> None:
    child = await Child.start(BLOCKED, *store.child_args(), block)
    try:
        kind, queued = (await child.line()).split()
        assert kind == "SENT"
        # Deliberately let the contract's window pass (no event to wait for: SPEC §9.1's 0.2 s).
        await anyio.sleep(WINDOW + 0.05)
        await child.kill()
    finally:
        await child.aclose()
    stored = (await store.read("blocked")).events
    assert [event.data["id"] for event in stored if event.type == "inbox/queued"] == [queued], _types(stored)


@case
async def a_send_survives_a_sigkill_while_the_loop_sleeps(store: KitStore) -> None:
    """SPEC §9.1: the loop blocked (time.sleep) right after send() returned; 0.2 s later a SIGKILL: the send is stored."""
    await _send_survives(store, "sleep")


@case
async def a_send_survives_a_sigkill_while_the_loop_spins(store: KitStore) -> None:
    """SPEC §9.1: the loop busy (CPU-bound Python) right after send() returned; 0.2 s later a SIGKILL: stored."""
    await _send_survives(store, "spin")
