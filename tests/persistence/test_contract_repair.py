"""Crash repair, on every backend: a stored log that ends inside a turn is closed by appended events."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core import Text, ToolResultMessage, UserMessage
from dsh_core.testing import ScriptedModel
from dsh_core.vocabulary import AssistantMessage, ToolCall

from .backends import MODEL, Backend

pytestmark = pytest.mark.anyio


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
    """A turn cut off in its second step: three tool calls, one finished, one running, one not started."""
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


async def store_log(backend: Backend, events: list[tuple[str, dict[str, Any]]]) -> None:
    """Store session ``crafted`` with ``events``, as a process would that stopped right after them."""
    async with backend.harness() as ctx:
        session = await ctx.sessions.create("crafted")
        for event_type, data in events:
            session.append(event_type, data)


async def test_open_turn_is_closed_by_appended_repair_events(backend: Backend) -> None:
    """Open calls get TOOL_OUTCOME_UNKNOWN, unstarted ones a TOOL_NOT_STARTED pair, then turn/end interrupted."""
    await store_log(backend, open_tool_turn())
    before = backend.stored("crafted")
    async with backend.harness() as ctx:
        loaded = await ctx.session_persistence.load("crafted")
    repaired = [(event.type, dict(event.data)) for event in loaded.repaired]
    assert [kind for kind, _ in repaired] == ["tool/result", "tool/call", "tool/result", "turn/end"]
    unknown, call, not_started, end = (data for _, data in repaired)
    assert unknown["error_code"] == "TOOL_OUTCOME_UNKNOWN"
    assert unknown["message"]["call_id"] == "c2"
    assert unknown["message"]["is_error"] is True
    text = unknown["message"]["content"][0]["text"]
    assert "unknown" in text
    assert "only if the call is idempotent" in text
    assert call == {"turn": 2, "step": 1, "call_id": "c3", "name": "three", "arguments": "{}"}
    assert not_started["error_code"] == "TOOL_NOT_STARTED"
    assert not_started["message"]["call_id"] == "c3"
    assert end == {"turn": 2, "reason": {"kind": "interrupted"}}
    assert [event.seq for event in loaded.events] == list(range(len(loaded.events)))
    assert loaded.repaired[0].time == loaded.events[len(open_tool_turn()) - 1].time
    # Appended, never rewritten: the old events are a prefix, and the new ones are stored.
    after = backend.stored("crafted")
    assert after[: len(before)] == before
    assert after == list(loaded.events)
    async with backend.harness() as ctx:
        again = await ctx.session_persistence.load("crafted")
    assert again.events == loaded.events
    assert again.repaired == ()


async def test_open_turn_without_tool_calls_just_ends(backend: Backend) -> None:
    """A turn cut off while the model streamed ends interrupted, with nothing else added."""
    prompt = UserMessage(content=(Text("hi"),))
    await store_log(
        backend,
        [
            ("turn/start", {"turn": 1}),
            ("user/message", {"message": prompt.to_json()}),
            ("step/start", {"turn": 1, "step": 1}),
        ],
    )
    async with backend.harness() as ctx:
        loaded = await ctx.session_persistence.load("crafted")
    assert [(e.type, dict(e.data)) for e in loaded.repaired] == [
        ("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}})
    ]


async def test_repaired_session_resumes_with_a_valid_request(backend: Backend) -> None:
    """After repair every tool call has a result, so the next request is valid and tells the model."""
    await store_log(backend, open_tool_turn())
    model = ScriptedModel([ScriptedModel.text("I will check c2 first")])
    async with backend.harness(model) as ctx, await ctx.agents.resume("crafted", agent_options=MODEL) as handle:
        outcome = await handle.agent.run("what happened?")
        turns = [e.data["turn"] for e in handle.agent.session.events if e.type == "turn/start"]
    assert outcome.kind == "completed"
    assert turns == [1, 2, 3]
    messages = model.requests[0].messages
    assert_every_call_answered(messages)
    results = {m.call_id: m.content[0].text for m in messages if isinstance(m, ToolResultMessage)}  # type: ignore[union-attr]
    assert results["c1"] == "done"
    assert "outcome of the tool call two (c2) is unknown" in results["c2"]
    assert "was not started" in results["c3"]


def assert_every_call_answered(messages: Any) -> None:
    """Each assistant tool call is followed, before the next assistant message, by its result."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            assert not open_calls, f"calls without results: {open_calls}"
            open_calls = {block.id for block in message.content if isinstance(block, ToolCall)}
        elif isinstance(message, ToolResultMessage):
            open_calls.discard(message.call_id)
    assert not open_calls, f"calls without results: {open_calls}"


async def test_read_views_an_open_turn_without_writing_or_locking(backend: Backend) -> None:
    """read() shows the repaired log but stores nothing, and takes no lock."""
    async with backend.harness() as ctx:
        session = await ctx.sessions.create("open")
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
    before = backend.stored("open")
    async with backend.harness() as ctx:
        viewed = await ctx.session_persistence.read("open")
        again = await ctx.session_persistence.read("open")  # no lock was kept by the first read
        assert backend.stored("open") == before  # nothing written by read()
        loaded = await ctx.session_persistence.load("open")  # and load can still take it
    assert [event.type for event in viewed.events] == ["turn/start", "turn/end"]
    assert viewed.events[-1].data["reason"] == {"kind": "interrupted"}
    assert again.events == viewed.events
    assert loaded.events == viewed.events
    assert backend.stored("open") != before  # load (not read) appended the repair


async def test_read_while_another_harness_holds_the_session(backend: Backend) -> None:
    """read() works while the session is live elsewhere, and sees what that owner flushed."""
    async with backend.harness() as owner, backend.harness() as viewer:
        session = await owner.sessions.create("busy")
        session.append("note/one", {})
        await owner.sessions.flush(session)
        viewed = await viewer.session_persistence.read("busy")
        assert [event.type for event in viewed.events] == ["note/one"]
        with pytest.raises(backend.errors.SessionInUseError):
            await viewer.session_persistence.load("busy")
