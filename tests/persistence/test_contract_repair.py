"""Crash repair, on every backend: a stored log that ends inside a turn is closed by appended events."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core import Text, ToolResultMessage, UserMessage
from dsh_core.testing._store_cases import closed_turn as closed_turn
from dsh_core.testing._store_cases import open_tool_turn as open_tool_turn
from dsh_core.vocabulary import AssistantMessage, ToolCall

from .backends import MODEL, Backend

pytestmark = pytest.mark.anyio


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
    raw_before = backend.raw("crafted")
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
    # Appended, never rewritten: what was stored stays byte for byte, and the new events are stored.
    assert backend.raw("crafted")[: len(raw_before)] == raw_before
    after = backend.stored("crafted")
    assert after[: len(before)] == before
    assert after == list(loaded.events)
    async with backend.harness() as ctx:
        again = await ctx.session_persistence.load("crafted")
    assert again.events == loaded.events
    assert again.repaired == ()


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


# ---------------------------------------------------------------------- the explicit repair


def damaged_log() -> list[tuple[str, dict[str, Any]]]:
    """A closed turn, then a second one whose third event (seq 7) the test damages."""
    prompt = UserMessage(content=(Text("again"),))
    return [
        *closed_turn(),
        ("turn/start", {"turn": 2}),
        ("user/message", {"message": prompt.to_json()}),
        ("note/x", {}),  # seq 7: becomes a tool/call without its step
        ("turn/end", {"turn": 2, "reason": {"kind": "completed"}}),
    ]


async def test_load_refuses_an_event_that_breaks_its_rules(backend: Backend) -> None:
    """A stored event that append would refuse is a SessionCorruptError naming seq, type and field; nothing changes."""
    await store_log(backend, damaged_log())
    backend.damage("crafted", 7, "tool/call", {"turn": 2})
    damaged = backend.raw("crafted")
    async with backend.harness() as ctx:
        for view in (ctx.session_persistence.load, ctx.session_persistence.read):
            with pytest.raises(backend.errors.SessionCorruptError, match=r"tool/call: data\.step") as caught:
                await view("crafted")
            assert (caught.value.seq, caught.value.event_type, caught.value.field) == (7, "tool/call", "data.step")
            assert "dsh sessions repair" in str(caught.value)
        with pytest.raises(backend.errors.SessionCorruptError):
            await ctx.agents.resume("crafted", agent_options=MODEL)
    assert backend.raw("crafted") == damaged


async def test_repair_cuts_before_the_first_refused_event_and_keeps_what_it_cut(backend: Backend) -> None:
    """repair() cuts the log at the refused event, keeps the cut events aside, and the session then resumes
    (the turn the cut leaves open closed by crash repair); a sound log is left alone; delete() takes the backup."""
    await store_log(backend, damaged_log())
    backend.damage("crafted", 7, "tool/call", {"turn": 2})
    damaged = backend.raw("crafted")
    async with backend.harness() as ctx:
        persistence = ctx.session_persistence
        report = await persistence.repair("crafted")
        assert (report.id, report.seq, report.dropped_events, report.events) == ("crafted", 7, 2, 7)
        assert report.backup is not None
        assert report.problem is not None
        assert "tool/call: data.step" in report.problem
        assert report.describe()[0].startswith("session crafted: cut at ")
        assert backend.raw("crafted") == damaged[:7]
        assert backend.backed_up("crafted", report) == damaged[7:]
        (info,) = await persistence.list()
        assert (info.events, info.turns, info.title) == (7, 2, "hello")
        async with await ctx.agents.resume("crafted", agent_options=MODEL) as handle:
            kinds = [event.type for event in handle.agent.session.events]
        assert kinds[-3:] == ["turn/start", "user/message", "turn/end"]
        again = await persistence.repair("crafted")  # sound now: nothing cut
        assert (again.seq, again.backup, again.dropped_events) == (None, None, 0)
        assert again.describe() == [f"session crafted: nothing to repair ({again.events} events, every {_unit(backend)} sound)"]
        await persistence.delete("crafted")
    assert backend.is_empty()  # the backup went with the session


def _unit(backend: Backend) -> str:
    return "line" if backend.name == "persistence-jsonl" else "event"