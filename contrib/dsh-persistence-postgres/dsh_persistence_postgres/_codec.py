"""Events to rows and back: the columns of a batch, the strict read of stored rows, the listing title.

Writing: ``data`` is encoded with orjson (the hot path of every write; the data was checked as
lossless JSON at append). Reading: each ``data`` text is decoded straight into frozen values (the
decoder freezes every object as it builds it), and a row that is not a well-formed event — a gap
in the seqs, data that is not a JSON object — is an error naming the session and the seq, never
skipped. Reading pauses the cyclic garbage collector, as the JSONL loader does: every container
built stays alive, and the collections they would trigger cost a third of the read.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, NoReturn

import attrs
import orjson

from dsh_core import FrozenDict, SessionEvent, UserMessage
from dsh_core.session_log import TurnStartEvent, UserMessageEvent
from dsh_core.vocabulary import frozen_trusted

from ._errors import SessionCorruptError

__all__ = ["Batch", "decode_event", "decode_rows", "encode_batch", "gc_paused"]

_TITLE_LENGTH: Final = 80


@attrs.frozen
class Batch:
    """The column arrays of a batch of events, and what it adds to the session's listing."""

    types: list[str]
    times: list[float]
    datas: list[str]
    turns: int
    title: str | None


def encode_batch(events: Sequence[SessionEvent], *, want_title: bool) -> Batch:
    """The columns of ``events``; ``title`` from its first prompt when ``want_title``."""
    types: list[str] = []
    times: list[float] = []
    datas: list[str] = []
    turns = 0
    title = None
    dumps = orjson.dumps
    for event in events:
        kind = event.type
        types.append(kind)
        times.append(event.time)
        datas.append(dumps(event.data).decode("utf-8"))
        if kind == TurnStartEvent.type:
            turns += 1
        elif want_title and title is None and kind == UserMessageEvent.type:
            title = _title(event)
    return Batch(types, times, datas, turns, title)


def _title(event: SessionEvent) -> str | None:
    data: Any = event.data
    try:
        message = UserMessage.from_json(data["message"])
    except (ValueError, KeyError, TypeError):
        return None
    text = " ".join(message.text.split()).replace("\x00", "\ufffd")  # a text column holds no NUL
    return text if len(text) <= _TITLE_LENGTH else text[: _TITLE_LENGTH - 1] + "…"


def _refuse_constant(name: str) -> NoReturn:
    msg = f"{name} is not JSON (only finite numbers are)"
    raise ValueError(msg)


def _tuple_of(items: list[Any]) -> tuple[Any, ...]:
    return tuple([_tuple_of(item) if type(item) is list else item for item in items])


def _freeze_object(obj: dict[str, Any]) -> FrozenDict:
    for key, value in obj.items():
        if type(value) is list:
            obj[key] = _tuple_of(value)
    return frozen_trusted(obj)


_decode = json.JSONDecoder(object_hook=_freeze_object, parse_constant=_refuse_constant).decode


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
        data = _decode(text)
    except ValueError as exc:
        _corrupt(session_id, seq, f"its data is not JSON ({exc})")
    if type(data) is not FrozenDict:
        _corrupt(session_id, seq, "its data is not a JSON object")
    try:
        return SessionEvent(kind, seq, time, data)
    except (TypeError, ValueError) as exc:
        _corrupt(session_id, seq, str(exc))


def _corrupt(session_id: str, seq: int, problem: str) -> NoReturn:
    msg = (
        f"session {session_id!r}: event {seq} cannot be read: {problem}; the stored log is damaged, so "
        f"it is not repaired automatically and nothing was changed. Fix or delete that row of "
        f"dsh_events, or delete the session"
    )
    raise SessionCorruptError(msg, session_id=session_id, seq=seq)


_gc_lock = threading.Lock()
_gc_users = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause cyclic collection while building objects that all stay alive (nests across threads)."""
    global _gc_users, _gc_was_enabled
    with _gc_lock:
        if _gc_users == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0 and _gc_was_enabled:
                gc.enable()
