"""Crash repair, for every persistence backend: the events that close a turn a stored log leaves open.

A process that dies inside a turn leaves its log open: a ``turn/start`` without its ``turn/end``,
maybe tool calls without results. ``repair_events`` computes, from the events alone, what closes
it — events a backend appends (it never rewrites what is stored):

* each tool call of the turn's last assistant message that has no ``tool/call`` gets a
  ``tool/call`` + error ``tool/result`` pair coded ``TOOL_NOT_STARTED``;
* each ``tool/call`` without a ``tool/result`` gets an error result coded ``TOOL_OUTCOME_UNKNOWN``
  telling the model to retry only an idempotent call;
* a call waiting for approval (``approval/requested`` without ``approval/resolved``) gets
  ``approval/resolved`` ``cancelled`` by ``repair``, and its result is coded ``TOOL_NOT_STARTED``
  (an approval comes before the body: it never ran);
* then ``turn/end`` with reason ``{"kind": "interrupted"}``.

One open turn is not repaired: a **parked** one (SPEC §10.1, ``parked_turn``), whose step waits
for approval with none of its calls in doubt. A resume re-opens it where it stopped.

Results come in the model's order, as the loop writes them, so the next request is valid. The
pending inbox needs no repair event: a resumed agent restores it from ``inbox/queued``,
``inbox/cleared`` and the consuming messages (``Inbox.restore``). Plain, blocking code over a
sequence of events, so a backend may run it in a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs

from dsh_core.session_log._catalogue import (
    ApprovalRequestedEvent,
    ApprovalResolvedEvent,
    AssistantMessageEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from dsh_core.session_log._event import SessionEvent
from dsh_core.vocabulary._content import AssistantMessage, Text, ToolCall, ToolResultMessage
from dsh_core.vocabulary._errors import DshError

__all__ = ["NOT_STARTED", "OUTCOME_UNKNOWN", "ParkedTurn", "StoredLogError", "parked_turn", "repair_events"]

NOT_STARTED: Final = "TOOL_NOT_STARTED"
OUTCOME_UNKNOWN: Final = "TOOL_OUTCOME_UNKNOWN"


class StoredLogError(DshError, ValueError):
    """A stored log cannot be understood where it matters (the open turn holds a malformed event).

    ``seq`` is the event's seq; a backend names the place in its own terms (file and line, row).
    """

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


def _not_started(name: str, call_id: str) -> str:
    return (
        f"Error: the tool call {name} ({call_id}) was not started: the session was interrupted "
        f"(the harness stopped) before it ran. Call it again if it is still needed."
    )


def _outcome_unknown(name: str, call_id: str) -> str:
    return (
        f"Error: the outcome of the tool call {name} ({call_id}) is unknown: the session was "
        f"interrupted (the harness stopped) while it was running, so it may or may not have taken "
        f"effect. Check its effects before going on, and retry it only if the call is idempotent "
        f"(safe to repeat)."
    )


@attrs.define
class _OpenTurn:
    turn: int
    start: int
    #: the last assistant message of the turn, and its step
    message: AssistantMessage | None = None
    message_step: int = 0
    #: call_id -> the tool/call event, in log order
    calls: dict[str, SessionEvent] = attrs.Factory(dict)
    results: set[str] = attrs.Factory(set)
    #: calls whose approval/requested has no approval/resolved yet
    waiting: set[str] = attrs.Factory(set)


def _open_turn(events: Sequence[SessionEvent]) -> _OpenTurn | None:
    for index in range(len(events) - 1, -1, -1):
        kind = events[index].type
        if kind == TurnEndEvent.type:
            return None
        if kind == TurnStartEvent.type:
            turn: Any = events[index].data.get("turn")
            found = _OpenTurn(turn if isinstance(turn, int) else 0, index)
            break
    else:
        return None
    for event in events[found.start + 1 :]:
        try:
            _note(found, event)
        except (ValueError, LookupError, TypeError) as exc:
            problem = f"cannot close the open turn {found.turn}: its {event.type} event is malformed ({exc})"
            raise StoredLogError(problem, seq=event.seq) from exc
    return found


def _note(found: _OpenTurn, event: SessionEvent) -> None:
    # The typed payload (read from data once, and checked, when the event was admitted).
    payload: Any = event.payload
    if event.type == AssistantMessageEvent.type:
        found.message = payload.message
        found.message_step = payload.step or 0
    elif event.type == ToolCallEvent.type:
        found.calls[payload.call_id] = event
    elif event.type == ToolResultEvent.type:
        found.results.add(payload.message.call_id)
    elif event.type == ApprovalRequestedEvent.type:
        found.waiting.add(payload.call_id)
    elif event.type == ApprovalResolvedEvent.type:
        found.waiting.discard(payload.call_id)


@attrs.frozen
class ParkedTurn:
    """An open turn that waits for approval at its last step, none of its calls in doubt (SPEC §10.1).

    ``message`` is the step's assistant message; ``logged`` the calls with a ``tool/call`` in the
    log, ``finished`` those with a ``tool/result``; ``waiting`` the calls whose request is pending.
    """

    turn: int
    step: int
    message: AssistantMessage
    logged: frozenset[str]
    finished: frozenset[str]
    waiting: frozenset[str]


def _parked(opened: _OpenTurn) -> ParkedTurn | None:
    message = opened.message
    if message is None or not opened.waiting or not opened.message_step:
        return None
    step_calls = {call.id for call in message.content if isinstance(call, ToolCall)}
    if not opened.waiting <= step_calls:
        return None  # a request of an earlier step: the loop never leaves one open
    for call_id in opened.calls:
        if call_id not in opened.results and call_id not in opened.waiting:
            return None  # a call that may have run: in doubt, so repaired
    return ParkedTurn(
        turn=opened.turn,
        step=opened.message_step,
        message=message,
        logged=frozenset(opened.calls),
        finished=frozenset(opened.results & step_calls),
        waiting=frozenset(opened.waiting),
    )


def parked_turn(events: Sequence[SessionEvent]) -> ParkedTurn | None:
    """The parked turn ``events`` end in (a resume re-opens it), or ``None``.

    :raises StoredLogError: the open turn holds a malformed event (naming its seq).
    """
    opened = _open_turn(events)
    return None if opened is None else _parked(opened)


def repair_events(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """The events that close a turn left open at the end of ``events`` (``[]`` if none is).

    They continue the seqs and reuse the last event's time (the moment of the crash is unknown;
    it came after that). Appending them to the log makes it end between turns, as
    ``ctx.sessions.prepare`` requires of a seed.

    :raises StoredLogError: the open turn holds a malformed event (naming its seq).
    """
    opened = _open_turn(events)
    if opened is None or _parked(opened) is not None:
        return []
    turn = opened.turn
    at = events[-1].time
    added: list[SessionEvent] = []

    def add(event_type: str, data: dict[str, Any]) -> None:
        added.append(SessionEvent(event_type, len(events) + len(added), at, data))

    def result(step: int, call_id: str, text: str, code: str) -> None:
        message = ToolResultMessage(call_id=call_id, content=(Text(text),), is_error=True)
        add(ToolResultEvent.type, {"turn": turn, "step": step, "message": message.to_json(), "error_code": code})

    model_calls: list[ToolCall] = []
    message = opened.message
    if message is not None:
        model_calls = [block for block in message.content if isinstance(block, ToolCall)]
    in_message = {call.id for call in model_calls}
    for call_id in sorted(opened.waiting, key=lambda ident: opened.calls[ident].seq if ident in opened.calls else -1):
        cancelled = ApprovalResolvedEvent(call_id=call_id, decision="cancelled", by="repair")
        add(ApprovalResolvedEvent.type, dict(cancelled.to_data()))
    # Calls logged outside the last message (an earlier step): the loop never leaves these, but
    # an open call is closed wherever it is.
    for call_id, call_event in opened.calls.items():
        if call_id not in opened.results and call_id not in in_message:
            data: Any = call_event.data
            name = str(data.get("name"))
            result(int(data.get("step", 0)), call_id, _outcome_unknown(name, call_id), OUTCOME_UNKNOWN)
    for call in model_calls:
        if call.id in opened.results:
            continue
        logged = opened.calls.get(call.id)
        if logged is not None:
            logged_data: Any = logged.data
            step = int(logged_data.get("step", opened.message_step))
            if call.id in opened.waiting:  # it waited for approval: its body never ran
                result(step, call.id, _not_started(call.name, call.id), NOT_STARTED)
            else:
                result(step, call.id, _outcome_unknown(call.name, call.id), OUTCOME_UNKNOWN)
            continue
        step = opened.message_step
        add(
            ToolCallEvent.type,
            {"turn": turn, "step": step, "call_id": call.id, "name": call.name, "arguments": call.arguments},
        )
        result(step, call.id, _not_started(call.name, call.id), NOT_STARTED)
    add(TurnEndEvent.type, {"turn": turn, "reason": {"kind": "interrupted"}})
    return added
