"""Events to rows and back: the row an event is written as, the strict read and check of stored rows.

Writing: each event becomes ``(session_id, seq, type, time, data)`` as it is published, ``data``
as JSON text from orjson on ``plain_data`` (an event appended as a payload is encoded without its
frozen copy); what orjson refuses (an int beyond 64 bits, a lone surrogate) the standard encoder
writes, ASCII-escaped. Reading: each ``data`` text is decoded straight into frozen values
(``dsh_core.persistence.decode_frozen``), a row that is not a well-formed event (a gap in the seqs,
data that is not a JSON object) is an error naming the session and the seq, never skipped; then
every event goes through the checks ``session.append`` makes (``check_log``), so a row that breaks
its type's rules is reported at load, naming seq, type and field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Final, NoReturn

import orjson

from dsh_core import EventDataError, FrozenDict, SessionEvent, SessionMeta
from dsh_core.persistence import SessionCorruptError, decode_frozen, gc_paused
from dsh_core.session_log import CheckedLog, TurnStartEvent, check_log

__all__ = ["Row", "check_events", "decode_event", "decode_rows", "encode_row", "sound_prefix", "turns_in"]

#: ``(session_id, seq, type, time, data)``: an event as ``dsh_events`` stores it
Row = tuple[str, int, str, float, str]

_TURN_START: Final = TurnStartEvent.type


def encode_row(session_id: str, event: SessionEvent) -> Row:
    """``event`` as the row ``dsh_events`` stores (see the module docstring)."""
    data = event.plain_data()
    try:
        text = orjson.dumps(data).decode()
    except TypeError:
        text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return (session_id, event.seq, event.type, event.time, text)


def turns_in(rows: Sequence[Row]) -> int:
    """How many turns ``rows`` begin."""
    return sum(1 for row in rows if row[2] == _TURN_START)


def decode_rows(session_id: str, rows: Iterable[tuple[Any, ...]]) -> list[SessionEvent]:
    """The events of ``rows`` (``seq, type, time, data`` text), which must number 0, 1, 2, ...

    :raises SessionCorruptError: a gap or a malformed row, naming the session and the seq.
    """
    events: list[SessionEvent] = []
    append = events.append
    with gc_paused():
        for index, (seq, kind, time, text) in enumerate(rows):
            if seq != index:
                _corrupt(session_id, index, f"the stored seqs jump from {index - 1} to {seq}")
            append(decode_event(session_id, seq, kind, time, text))
    return events


def decode_event(session_id: str, seq: int, kind: str, time: float, text: str) -> SessionEvent:
    """One stored row as an event. :raises SessionCorruptError: naming the session and the seq."""
    try:
        data = decode_frozen(text)
    except (ValueError, RecursionError) as exc:
        _corrupt(session_id, seq, f"its data is not JSON ({exc})")
    if type(data) is not FrozenDict:
        _corrupt(session_id, seq, "its data is not a JSON object")
    try:
        return SessionEvent(kind, seq, time, data)
    except (TypeError, ValueError) as exc:
        _corrupt(session_id, seq, str(exc))


def check_events(session_id: str, meta: SessionMeta, events: Sequence[SessionEvent]) -> CheckedLog:
    """Every event through the checks of ``session.append``, in order; what ``check_log`` returned.

    :raises SessionCorruptError: for the first event refused, naming its seq, type and field.
    """
    try:
        return check_log(session_id, meta, events)
    except EventDataError as exc:
        seq = exc.seq if exc.seq is not None else len(events) - 1
        _corrupt(session_id, seq, str(exc), event_type=exc.event_type, field=exc.field or None)


def sound_prefix(
    session_id: str, meta: SessionMeta, rows: Iterable[tuple[Any, ...]]
) -> tuple[list[SessionEvent], SessionCorruptError | None]:
    """The events before the first row ``load`` refuses, and why it refuses it (``None``: all sound)."""
    events: list[SessionEvent] = []
    problem: SessionCorruptError | None = None
    with gc_paused():
        for index, (seq, kind, time, text) in enumerate(rows):
            try:
                if seq != index:
                    _corrupt(session_id, index, f"the stored seqs jump from {index - 1} to {seq}")
                events.append(decode_event(session_id, seq, kind, time, text))
            except SessionCorruptError as exc:
                problem = exc
                break
    try:
        check_events(session_id, meta, events)
    except SessionCorruptError as exc:
        del events[exc.seq or 0 :]
        problem = exc
    return events, problem


def _corrupt(
    session_id: str, seq: int, problem: str, *, event_type: str | None = None, field: str | None = None
) -> NoReturn:
    msg = (
        f"session {session_id!r}: event {seq} cannot be read: {problem}; the stored log is damaged, so it "
        f"is not repaired automatically and nothing was changed. Fix that row of dsh_events by hand, cut "
        f"the log before it with `dsh sessions repair <id>` (which keeps the rows it drops in "
        f"dsh_damaged), or delete the session"
    )
    raise SessionCorruptError(msg, session_id=session_id, seq=seq, event_type=event_type, field=field)
