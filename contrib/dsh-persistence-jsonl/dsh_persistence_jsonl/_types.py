"""The values the ``session_persistence`` service hands out: a loaded session, a listing entry."""

from __future__ import annotations

from pathlib import Path

import attrs

from dsh_core import SessionEvent
from dsh_core.services.sessions import SessionMeta
from dsh_core.session_log import CheckedLog

__all__ = ["LoadedSession", "RepairReport", "SessionInfo"]


@attrs.frozen(kw_only=True)
class LoadedSession:
    """A stored session, repaired and ready to seed ``ctx.sessions.prepare(id, meta=..., seed=...)``.

    ``events`` is the whole log, the repair events included; ``repaired`` repeats those (empty
    when the log ended cleanly) and ``truncated`` counts the bytes of torn tail that were dropped.
    ``checked`` is what ``check_log`` returned for the stored events: the resume hands it to
    ``prepare``, so that they are not checked twice.
    """

    id: str
    meta: SessionMeta
    events: tuple[SessionEvent, ...]
    created: float
    path: Path
    repaired: tuple[SessionEvent, ...] = ()
    truncated: int = 0
    checked: CheckedLog | None = attrs.field(default=None, eq=False, repr=False)


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

    @property
    def seq(self) -> int | None:
        """The first event cut (``line - 2``), or ``None`` when nothing was cut."""
        return None if self.line is None else self.line - 2

    @property
    def dropped_events(self) -> int:
        """The event lines cut (a torn last line counts as one)."""
        return self.dropped_lines

    def describe(self) -> list[str]:
        """What happened, as lines for a person (``dsh sessions repair`` prints them)."""
        if self.backup is None:
            return [f"session {self.id}: nothing to repair ({self.events} events, every line sound)"]
        return [
            f"session {self.id}: cut at line {self.line}: dropped {self.dropped_lines} lines "
            f"({self.dropped_bytes} bytes), kept {self.events} events",
            f"the original file is kept as {self.backup}",
        ]
