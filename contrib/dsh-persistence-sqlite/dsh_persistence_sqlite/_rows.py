"""Events to rows: the row each event is written as.

Each event becomes ``(session_id, seq, type, time, data)`` as it is published, ``data`` as JSON
text from orjson on ``plain_data`` (an event appended as a payload is encoded without its frozen
copy); what orjson refuses (an int beyond 64 bits, a lone surrogate) the standard encoder writes,
ASCII-escaped. Reading rows back is the core's strict read (``dsh_core.persistence``:
``decode_event_rows``, ``check_stored_events``, ``sound_prefix``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

import orjson

from dsh_core import SessionEvent
from dsh_core.session_log import TurnStartEvent

__all__ = ["Row", "encode_row", "turns_in"]

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
