"""Events to rows and back: the columns of a batch, the strict read and check of stored rows, the listing.

Writing: a batch is one text, a line per event (type, time, data; ``encode_line``, made as each
event is published), which the write statement splits on the server; ``data`` is encoded with
orjson (the hot path of every write; the data was checked as lossless JSON at append). Reading: each ``data`` text is decoded straight into frozen values (the
decoder freezes every object as it builds it), and a row that is not a well-formed event — a gap
in the seqs, data that is not a JSON object — is an error naming the session and the seq, never
skipped; and every event then goes through the checks ``session.append`` makes (``check_events``),
so a row that breaks its type's rules is reported at load, naming seq, type and field. Reading pauses the cyclic garbage collector, as the JSONL loader does: every container
built stays alive, and the collections they would trigger cost a third of the read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import attrs
import orjson

from dsh_core import SessionEvent
from dsh_core.persistence import check_stored_events as check_events
from dsh_core.persistence import decode_event_row as decode_event
from dsh_core.persistence import decode_event_rows as decode_rows
from dsh_core.persistence import gc_paused, sound_prefix, title_of
from dsh_core.session_log import TurnStartEvent, UserMessageEvent

__all__ = [
    "Batch",
    "Pending",
    "check_events",
    "decode_event",
    "decode_rows",
    "encode_batch",
    "encode_line",
    "encoded",
    "gc_paused",
    "sound_prefix",
    "summarize",
]

#: an event and its line of the write statement's text (``encode_line``), made when it was published
Pending = tuple[SessionEvent, bytes]


@attrs.frozen
class Batch:
    """A batch of events as the write statement takes it, and what it adds to the session's listing."""

    #: a line per event, in seq order: the type as a JSON string, tab, the time, tab, the data as JSON
    payload: str
    count: int
    turns: int
    title: str | None


def encode_line(event: SessionEvent, _dumps: Callable[[Any], bytes] = orjson.dumps) -> bytes:
    """``event``'s line of a batch: the type as a JSON string, tab, the time, tab, the data as JSON.

    The listener encodes each event as it is published, while its objects are still in the CPU's
    caches: encoding a 100-step turn's 404 events at its flush cost 3 us an event. Here a streamed
    chunk costs 0.6 us: ``plain_data`` skips the frozen copy of the data (made only if somebody
    reads it), and orjson writes the time too (``b"%r"`` of a float alone cost 0.37 us). orjson
    writes JSON without whitespace and escapes control characters inside strings, so no line holds
    a raw tab or newline but the separators; a float's shortest text reads back exactly.
    """
    kind = _TYPE_TEXTS.get(event.type) or _type_text(event.type)
    data = event.plain_data()
    try:
        text = _dumps(data)
    except TypeError:  # an int beyond 64 bits or a lone surrogate: orjson writes neither, json does
        text = json.dumps(data, separators=(",", ":"), allow_nan=False).encode("ascii")
    return kind + _dumps(event.time) + b"\t" + text


#: an event type's JSON text and the tab after it, by type (a session repeats a few types)
_TYPE_TEXTS: Final[dict[str, bytes]] = {}


def _type_text(kind: str) -> bytes:
    text = orjson.dumps(kind) + b"\t"
    if len(_TYPE_TEXTS) < 4096:  # bounded: types are a plugin's choice
        _TYPE_TEXTS[kind] = text
    return text


def encoded(events: Iterable[SessionEvent]) -> list[Pending]:
    """``events`` with their lines, for ``Database.append``."""
    return [(event, encode_line(event)) for event in events]


def encode_batch(pending: Sequence[Pending], *, want_title: bool) -> Batch:
    """``pending`` as the write statement's text; ``title`` from the first prompt when ``want_title``."""
    turns, title = summarize([event for event, _ in pending], want_title=want_title)
    text = b"\n".join([line for _, line in pending]).decode("utf-8")
    return Batch(text, len(pending), turns, title)


def summarize(events: Sequence[SessionEvent], *, want_title: bool = True) -> tuple[int, str | None]:
    """What ``events`` add to the listing: their number of turns, and a title from the first prompt."""
    turns = 0
    title = None
    for event in events:
        kind = event.type
        if kind == TurnStartEvent.type:
            turns += 1
        elif want_title and title is None and kind == UserMessageEvent.type:
            title = _title(event)
    return turns, title


def _title(event: SessionEvent) -> str | None:
    title = title_of(event)
    return None if title is None else title.replace("\x00", "\ufffd")  # a text column holds no NUL
