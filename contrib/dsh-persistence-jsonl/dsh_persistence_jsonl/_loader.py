"""Reading a stored log: the strict parse, the torn-tail rule, crash repair, and the listing scan.

Strict parse: line 1 is the header, every further line one ``SessionEvent`` whose ``seq`` is its
index and whose ``data`` keeps the rules of its type — the very checks ``session.append`` makes
(``dsh_core``'s data rules and the session's turn and surface checks, through ``check_log``).
Only a torn tail, a last line without its newline (a write cut short, or zeros after a power
loss), is dropped: the writer writes whole lines, so such a line was never acknowledged. A
complete line that is wrong, the last one included, is corruption: an error naming the file, the
line, and for an event that breaks its rules the event type and the field. Nothing is guessed.

Crash repair (closing a turn the log leaves open, with events a caller appends) is
``dsh_core.repair_events``, shared by every backend; here it only gains the file and line of a
malformed event. Everything here is plain blocking code over bytes; the store runs it in a worker thread.

Parsing pauses the cyclic garbage collector: a log of 100k events builds about a million
containers, all of them kept, and the collections they would trigger cost a third of the parse.
Nothing is freed late but cycles, and the pause lasts one parse.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final, NoReturn

import attrs

from dsh_core import EventDataError, FrozenDict, SessionEvent, StoredLogError
from dsh_core import repair_events as core_repair_events
from dsh_core.persistence import decode_frozen, gc_paused, loads_strict, title_of
from dsh_core.session_log import CheckedLog, TurnStartEvent, UserMessageEvent, check_log

from ._errors import SessionCorruptError
from ._format import Header, read_header

__all__ = ["LogSummary", "StoredLog", "parse_log", "repair_events", "summarize_log"]


@attrs.frozen
class StoredLog:
    """A parsed log: its header, its events, and where the valid part of the file ends."""

    header: Header
    events: tuple[SessionEvent, ...]
    #: bytes from the start of the file to the end of the last valid line
    valid_size: int
    #: bytes in the file (more than ``valid_size`` when the tail is torn)
    size: int
    #: what ``check_log`` returned for ``events``, for the resume's ``prepare`` (not compared)
    checked: CheckedLog | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def torn(self) -> int:
        """How many bytes of torn tail follow the last valid line."""
        return self.size - self.valid_size


_loads: Final = loads_strict
# The fast path: each line is decoded straight into frozen values (``decode_frozen``); a line the
# fast path does not take is re-read by the strict path (``SessionEvent.from_json``), which says
# exactly what is wrong with it.
_decode: Final = decode_frozen
_ENVELOPE: Final = frozenset({"type", "seq", "time", "data"})


def _event(line: bytes, seq: int) -> SessionEvent | None:
    """The event on ``line`` if it is a well-formed event numbered ``seq``, else ``None``.

    :raises ValueError: the line is not JSON text (NaN and Infinity are not).
    :raises RecursionError: the line nests deeper than the decoder goes.
    """
    parsed = _decode(line.decode("utf-8"))
    if type(parsed) is not FrozenDict or parsed.keys() != _ENVELOPE or parsed["seq"] != seq:
        return None
    kind, data = parsed["type"], parsed["data"]
    if type(kind) is not str or type(data) is not FrozenDict or type(parsed["seq"]) is not int:
        return None
    try:
        return SessionEvent(kind, seq, parsed["time"], data)
    except (TypeError, ValueError):
        return None


def parse_log(path: Path, data: bytes) -> StoredLog:
    """Parse the bytes of ``path`` strictly, allowing only a torn tail, and check every event.

    :raises SessionCorruptError: naming ``path`` and the 1-based line (the header is line 1).
    :raises SessionFormatError: the header's format version is not ours.
    """
    with gc_paused():
        return _parse(path, data)


def _parse(path: Path, data: bytes) -> StoredLog:
    if not data:
        msg = f"{path}: the file is empty: it has no header line; delete the session folder {path.parent}"
        raise SessionCorruptError(msg, path=path, line=1)
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: b"" unless the last line is unterminated
    if not lines:
        msg = f"{path}:1: the header line is unterminated (the file was cut short); the file was not modified"
        raise SessionCorruptError(msg, path=path, line=1)
    try:
        first = _loads(lines[0])
    except ValueError as exc:
        msg = f"{path}:1: the header is not JSON ({exc}); the file was not modified"
        raise SessionCorruptError(msg, path=path, line=1) from None
    header = read_header(first, path)
    valid_size = len(data) - len(tail)  # the torn tail, if any, is what follows the last newline
    events: list[SessionEvent] = []
    append = events.append
    for index in range(1, len(lines)):
        line = lines[index]
        try:
            event = _event(line, index - 1)
        except ValueError as exc:
            _corrupt(path, index + 1, f"not JSON ({exc})")
        except RecursionError:
            _corrupt(path, index + 1, "nested too deeply to be read (not a log line dsh wrote)")
        if event is None:
            _strict(path, index, line)
        append(event)
    checked = _check_rules(path, header, events)
    return StoredLog(header, tuple(events), valid_size, len(data), checked)


def _check_rules(path: Path, header: Header, events: Sequence[SessionEvent]) -> CheckedLog:
    """Every event through the checks of ``session.append`` (see the module docstring)."""
    try:
        return check_log(header.id, header.meta, events)
    except EventDataError as exc:
        seq = exc.seq if exc.seq is not None else len(events) - 1
        _corrupt(path, seq + 2, str(exc), event_type=exc.event_type, field=exc.field or None)


def _strict(path: Path, index: int, line: bytes) -> NoReturn:
    """Say exactly why ``line`` (line ``index + 1``) is not event ``index - 1``."""
    try:
        event = SessionEvent.from_json(_loads(line), field="event")
    except ValueError as exc:  # VocabularyError, EventDataError
        _corrupt(path, index + 1, str(exc))
    _corrupt(path, index + 1, f"the event has seq {event.seq} but is event {index - 1} of the log")


def _corrupt(
    path: Path, line: int, problem: str, *, event_type: str | None = None, field: str | None = None
) -> NoReturn:
    msg = (
        f"{path}:{line}: {problem}; this complete line is damaged (not a torn write), so the log is not "
        f"repaired automatically and the file was not modified. Fix that line by hand, cut the log "
        f"before it with `dsh sessions repair <id>` (which keeps a backup of the file), or delete the "
        f"session"
    )
    raise SessionCorruptError(
        msg, path=path, line=line, seq=line - 2 if line >= 2 else None, event_type=event_type, field=field
    )


# ---------------------------------------------------------------------- crash repair


def repair_events(events: Sequence[SessionEvent], path: Path) -> list[SessionEvent]:
    """The events that close a turn left open at the end of ``events`` (``[]`` if none is).

    ``dsh_core.repair_events``, the step every backend shares; this only names the place of a
    malformed event in this backend's terms: the file and the line.

    :raises SessionCorruptError: the open turn holds a malformed event (naming its line in ``path``).
    """
    try:
        return core_repair_events(events)
    except StoredLogError as exc:
        _corrupt(path, exc.seq + 2, str(exc))


# ---------------------------------------------------------------------- listing

_TURN_START: Final = b'{"type":"' + TurnStartEvent.type.encode() + b'",'
_USER_MESSAGE: Final = b'{"type":"' + UserMessageEvent.type.encode() + b'",'


@attrs.frozen
class LogSummary:
    """What a listing shows about one log, read without parsing every event."""

    header: Header
    events: int
    turns: int
    title: str | None


def summarize_log(path: Path, data: bytes) -> LogSummary:
    """The header, the number of complete event lines and of turns, and a title from the first prompt.

    Only the header and the first prompt are parsed; the counts come from a scan of the bytes.

    :raises SessionCorruptError: for a damaged header. :raises SessionFormatError:
    """
    end = data.rfind(b"\n") + 1  # complete lines only: a torn tail is not an event
    newline = data.find(b"\n")
    if newline < 0:
        msg = f"{path}:1: the header line is unterminated (the file was cut short)"
        raise SessionCorruptError(msg, path=path, line=1)
    try:
        first = _loads(data[:newline])
    except ValueError as exc:
        msg = f"{path}:1: the header is not JSON ({exc})"
        raise SessionCorruptError(msg, path=path, line=1) from None
    header = read_header(first, path)
    body = data[newline:end]  # starts with the header's newline, so each event line follows a b"\n"
    events = body.count(b"\n") - 1 if body else 0
    turns = body.count(b"\n" + _TURN_START)
    return LogSummary(header, max(events, 0), turns, _title(body))


def _title(body: bytes) -> str | None:
    at = body.find(b"\n" + _USER_MESSAGE)
    if at < 0:
        return None
    stop = body.find(b"\n", at + 1)
    try:
        event = SessionEvent.from_json(_loads(body[at + 1 : stop]))
    except (ValueError, KeyError, TypeError):
        return None
    return title_of(event)
