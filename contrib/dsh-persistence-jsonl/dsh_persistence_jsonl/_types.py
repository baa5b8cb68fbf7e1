"""The values the ``session_persistence`` service hands out: a loaded session, a listing entry."""

from __future__ import annotations

from pathlib import Path

import attrs

from dsh_core import SessionEvent
from dsh_core.services.sessions import SessionMeta

__all__ = ["LoadedSession", "RepairReport", "SessionInfo"]


@attrs.frozen(kw_only=True)
class LoadedSession:
    """A stored session, repaired and ready to seed ``ctx.sessions.prepare(id, meta=..., seed=...)``.

    ``events`` is the whole log, the repair events included; ``repaired`` repeats those (empty
    when the log ended cleanly) and ``truncated`` counts the bytes of torn tail that were dropped.
    """

    id: str
    meta: SessionMeta
    events: tuple[SessionEvent, ...]
    created: float
    path: Path
    repaired: tuple[SessionEvent, ...] = ()
    truncated: int = 0


@attrs.frozen(kw_only=True)
class SessionInfo:
    """One stored session as ``list()`` shows it, read without parsing its whole log.

    ``created`` and ``modified`` are seconds since the epoch; ``events`` counts the complete
    event lines; ``title`` is the start of the first prompt (``None`` before any). A child
    session (a fork, a subagent) names its parent in ``parent_id``.
    """

    id: str
    created: float
    modified: float
    cwd: str | None
    parent_id: str | None
    seed_length: int
    events: int
    turns: int
    title: str | None
    path: Path


@attrs.frozen(kw_only=True)
class RepairReport:
    """What ``repair`` did to one stored log.

    ``line`` is the first line it cut (1-based; ``None`` when the log was sound and nothing was
    cut); ``dropped_lines`` and ``dropped_bytes`` count what went, from that line to the end;
    ``events`` counts the events kept; ``backup`` is the untouched copy of the original file.
    """

    id: str
    path: Path
    backup: Path | None
    line: int | None
    dropped_lines: int
    dropped_bytes: int
    events: int
    #: why the first cut line was refused (the ``SessionCorruptError`` message), or ``None``
    problem: str | None = None
