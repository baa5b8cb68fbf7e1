"""Stored event rows to events, strictly, for a backend that keeps one row per event.

A row is ``(seq, type, time, data)`` with ``data`` the event's data as JSON text. Rows must number
0, 1, 2, ...; each ``data`` is decoded straight into frozen values (``decode_frozen``); a row that
is not a well-formed event (a gap in the seqs, data that is not a JSON object) is a
``SessionCorruptError`` naming the session and the seq, never skipped. Then every event goes through
the checks ``session.append`` makes (``check_log``), so a row that breaks its type's rules is
reported at load, naming seq, type and field. Nothing here is guessed or repaired: ``sound_prefix``
says what ``repair`` may keep.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from dsh_core.persistence._decoding import decode_frozen, gc_paused
from dsh_core.persistence._errors import SessionCorruptError
from dsh_core.session_log._event import SessionEvent
from dsh_core.session_log._session import CheckedLog, SessionMeta, check_log
from dsh_core.vocabulary import FrozenDict
from dsh_core.vocabulary._errors import EventDataError

__all__ = ["check_stored_events", "continues_log", "decode_event_row", "decode_event_rows", "sound_prefix"]


def decode_event_rows(session_id: str, rows: Iterable[tuple[Any, ...]]) -> list[SessionEvent]:
    """The events of ``rows`` (``seq, type, time, data`` text), which must number 0, 1, 2, ...

    :raises SessionCorruptError: a gap or a malformed row, naming the session and the seq.
    """
    events: list[SessionEvent] = []
    append = events.append
    with gc_paused():
        for index, (seq, kind, time, text) in enumerate(rows):
            if seq != index:
                _corrupt(session_id, index, f"the stored seqs jump from {index - 1} to {seq}")
            append(decode_event_row(session_id, seq, kind, time, text))
    return events


def decode_event_row(session_id: str, seq: int, kind: str, time: float, text: str) -> SessionEvent:
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


def check_stored_events(session_id: str, meta: SessionMeta, events: Sequence[SessionEvent]) -> CheckedLog:
    """Every event through the checks of ``session.append`` (data rules, turns, surfaces), in order.

    Returns what ``check_log`` returned, for the resume's ``prepare`` (so no event is checked twice).

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
    """The events before the first row ``load`` refuses, and why it refuses it (``None``: all sound).

    What ``repair`` keeps: rows are decoded in seq order up to the first gap or malformed row, then
    the decoded events are checked as ``session.append`` would; the cut is at the first refusal.
    """
    events: list[SessionEvent] = []
    problem: SessionCorruptError | None = None
    with gc_paused():
        for index, (seq, kind, time, text) in enumerate(rows):
            try:
                if seq != index:
                    _corrupt(session_id, index, f"the stored seqs jump from {index - 1} to {seq}")
                events.append(decode_event_row(session_id, seq, kind, time, text))
            except SessionCorruptError as exc:
                problem = exc
                break
    try:
        check_stored_events(session_id, meta, events)
    except SessionCorruptError as exc:
        del events[exc.seq or 0 :]
        problem = exc
    return events, problem


def continues_log(events: Sequence[SessionEvent], count: int, last: SessionEvent | None) -> bool:
    """Whether a live session's ``events`` continue a stored log of ``count`` events ending in ``last``
    (``None``: empty): a session created with a stored session's id, instead of resuming it, does not."""
    return count <= len(events) and (last is None or events[count - 1] == last)


def _corrupt(
    session_id: str, seq: int, problem: str, *, event_type: str | None = None, field: str | None = None
) -> NoReturn:
    msg = (
        f"session {session_id!r}: event {seq} cannot be read: {problem}; the stored log is damaged, so it is "
        f"not repaired automatically and nothing was changed. Fix that row of dsh_events by hand, cut the "
        f"log before it with `dsh sessions repair <id>` (which keeps the rows it drops in dsh_damaged), or "
        f"delete the session"
    )
    raise SessionCorruptError(msg, session_id=session_id, seq=seq, event_type=event_type, field=field)
