"""Crash repair and approvals (SPEC §10.1): a parked turn is left for resume; any other open turn is repaired,
a waiting request resolved ``cancelled`` by ``repair`` and its call ``TOOL_NOT_STARTED``."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core import AssistantMessage, Harness, SessionEvent, Text, ToolCall, UserMessage, repair_events
from dsh_core.session_log import (
    ApprovalRequestedEvent,
    ApprovalResolvedEvent,
    AssistantMessageEvent,
    LogEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnStartEvent,
    UserMessageEvent,
    parked_turn,
)
from dsh_core.vocabulary import ToolResultMessage

pytestmark = pytest.mark.anyio

A = ToolCall("a", "write", '{"text": "x"}')
B = ToolCall("b", "read", '{"path": "y"}')


def log(*payloads: LogEvent) -> list[SessionEvent]:
    return [SessionEvent(payload.type, seq, 1.0, payload.to_data()) for seq, payload in enumerate(payloads)]


def opening(*calls: ToolCall) -> list[LogEvent]:
    return [
        TurnStartEvent(turn=1),
        UserMessageEvent(message=UserMessage("go", id="u1")),
        StepStartEvent(turn=1, step=1),
        AssistantMessageEvent(turn=1, step=1, message=AssistantMessage((Text("ok"), *calls), id="m1")),
    ]


def request(call: ToolCall) -> ApprovalRequestedEvent:
    return ApprovalRequestedEvent(call_id=call.id, tool=call.name, arguments={"text": "x"}, reason="needs a yes")


def result(call: ToolCall) -> ToolResultEvent:
    return ToolResultEvent(turn=1, step=1, message=ToolResultMessage(call.id, "done", False, "r-" + call.id))


def types_and_codes(events: list[SessionEvent]) -> list[Any]:
    return [(e.type, e.data.get("error_code") or e.data.get("decision")) for e in events]


def test_a_turn_waiting_for_approval_with_nothing_in_doubt_is_parked_not_repaired() -> None:
    events = log(*opening(A, B), ToolCallEvent.trusted(1, 1, A), request(A))
    parked = parked_turn(events)
    assert parked is not None
    assert (parked.turn, parked.step, parked.waiting, parked.logged, parked.finished) == (
        1,
        1,
        frozenset({"a"}),
        frozenset({"a"}),
        frozenset(),
    )
    assert repair_events(events) == []


def test_a_finished_call_before_the_waiting_one_keeps_the_turn_parked() -> None:
    events = log(*opening(B, A), ToolCallEvent.trusted(1, 1, B), result(B), ToolCallEvent.trusted(1, 1, A), request(A))
    parked = parked_turn(events)
    assert parked is not None
    assert parked.finished == frozenset({"b"})


def test_a_call_in_doubt_beside_a_waiting_one_is_repaired_and_the_request_cancelled_by_repair() -> None:
    # a and b ran as one parallel group: b may have run, so the turn is not parked
    events = log(*opening(A, B), ToolCallEvent.trusted(1, 1, A), ToolCallEvent.trusted(1, 1, B), request(A))
    assert parked_turn(events) is None
    repaired = repair_events(events)
    assert types_and_codes(repaired) == [
        ("approval/resolved", "cancelled"),
        ("tool/result", "TOOL_NOT_STARTED"),  # a waited for approval: it never ran
        ("tool/result", "TOOL_OUTCOME_UNKNOWN"),
        ("turn/end", None),
    ]
    assert repaired[0].data["by"] == "repair"
    assert [e.seq for e in repaired] == list(range(len(events), len(events) + 4))


def test_a_resolved_call_that_has_no_result_is_in_doubt() -> None:
    resolved = ApprovalResolvedEvent(call_id="a", decision="once", by="cli")
    events = log(*opening(A), ToolCallEvent.trusted(1, 1, A), request(A), resolved)
    assert parked_turn(events) is None
    assert types_and_codes(repair_events(events)) == [("tool/result", "TOOL_OUTCOME_UNKNOWN"), ("turn/end", None)]


async def test_a_seed_may_end_in_a_parked_turn_but_not_in_another_open_one() -> None:
    async with Harness(autoload=False) as ctx:
        parked = ctx.sessions.prepare("p", seed=log(*opening(A), ToolCallEvent.trusted(1, 1, A), request(A)))
        assert parked.open_turn == 1
        with pytest.raises(ValueError, match="ends inside turn 1"):
            ctx.sessions.prepare("q", seed=log(*opening(A), ToolCallEvent.trusted(1, 1, A)))
