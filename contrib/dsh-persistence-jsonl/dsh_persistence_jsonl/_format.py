"""The lines of ``session.jsonl``: the header (line 1) and one ``SessionEvent`` per further line.

Header: ``{"format": 1, "id", "created", "cwd", "parent_id", "seed_length", "meta"}``, where
``meta`` is ``SessionMeta.to_json()`` (the source of truth on load) and ``cwd``, ``parent_id`` and
``seed_length`` repeat it so that a listing needs no more than the first line. ``created`` is
seconds since the epoch. Every further line is exactly ``SessionEvent.to_json()`` as compact JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from dsh_core import SessionEvent, VocabularyError
from dsh_core.services.sessions import SessionMeta
from dsh_core.vocabulary import dumps_json

from ._errors import SessionCorruptError, SessionFormatError

__all__ = ["FORMAT_VERSION", "Header", "encode_event", "encode_header", "read_header"]

#: the version this plugin writes and reads
FORMAT_VERSION: Final = 1


@attrs.frozen(kw_only=True)
class Header:
    """Line 1 of a stored log."""

    id: str
    created: float
    meta: SessionMeta

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "id": self.id,
            "created": self.created,
            "cwd": self.meta.cwd,
            "parent_id": self.meta.parent_id,
            "seed_length": self.meta.seed_length,
            "meta": self.meta.to_json(),
        }


def encode_header(header: Header) -> bytes:
    """The header as one complete line."""
    return (dumps_json(header.to_json()) + "\n").encode("utf-8")


def encode_event(event: SessionEvent) -> bytes:
    """``event`` as one complete line: the JSON of ``event.to_json()``, without thawing ``data``.

    orjson, because this is the hot path of every write (about ten times faster than the standard
    encoder on event data), on ``plain_data`` (an event appended as a payload is written straight
    from it, without the frozen copy of its data). The data was checked as lossless JSON at
    append, so orjson's few departures (NaN as null) cannot arise; floats round-trip exactly as
    with ``repr``. What orjson refuses, an int beyond 64 bits or a lone surrogate, the standard
    encoder writes (the surrogate as an escape, which the loader reads back).
    """
    envelope = {"type": event.type, "seq": event.seq, "time": event.time, "data": event.plain_data()}
    try:
        return orjson.dumps(envelope, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return (json.dumps(envelope, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")


def read_header(parsed: object, path: Path) -> Header:
    """Check a parsed line 1 and read it.

    Unknown keys are ignored (a later writer of the same format may add some).

    :raises SessionFormatError: for a format version other than ``FORMAT_VERSION``.
    :raises SessionCorruptError: for a header that is not one (naming line 1).
    """

    def corrupt(problem: str) -> SessionCorruptError:
        msg = f"{path}:1: the header is damaged: {problem}; the file was not modified"
        return SessionCorruptError(msg, path=path, line=1)

    if not isinstance(parsed, Mapping):
        raise corrupt("expected a JSON object")
    version = parsed.get("format")
    if version != FORMAT_VERSION or type(version) is not int:
        msg = (
            f"{path}: the log is in format {version!r}, and this dsh-persistence-jsonl reads format "
            f"{FORMAT_VERSION} only; open it with the dsh version that wrote it, or upgrade "
            f"dsh-harness-persistence-jsonl"
        )
        raise SessionFormatError(msg, path=path, version=version)
    session_id = parsed.get("id")
    if not isinstance(session_id, str) or not session_id:
        raise corrupt(f"id: expected a non-empty string, got {session_id!r}")
    created = parsed.get("created")
    if isinstance(created, bool) or not isinstance(created, int | float):
        raise corrupt(f"created: expected seconds since the epoch, got {created!r}")
    try:
        meta = SessionMeta.from_json(parsed.get("meta", {}), field="meta")
    except (VocabularyError, TypeError, ValueError) as exc:
        raise corrupt(str(exc)) from exc
    return Header(id=session_id, created=float(created), meta=meta)
