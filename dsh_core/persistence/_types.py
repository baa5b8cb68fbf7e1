"""The values every session store hands out: a stored session, a listing entry, a repair report.

A backend may return a subclass that adds what only it knows (a file path, an owner epoch); a
caller that wants to work with any backend reads the fields below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from dsh_core.session_log._event import SessionEvent
from dsh_core.session_log._session import SessionMeta

if TYPE_CHECKING:
    from dsh_core.session_log._session import CheckedLog

__all__ = ["RepairReport", "SessionInfo", "StoredSession"]


@attrs.frozen(kw_only=True)
class StoredSession:
    """A stored session, repaired and ready to seed ``ctx.sessions.prepare(id, meta=..., seed=...)``.

    ``events`` is the whole log, the repair events included; ``repaired`` repeats those (empty when
    the log ended cleanly). ``created`` is seconds since the epoch. ``checked`` is what
    ``check_log`` returned for the stored events: the resume hands it to ``prepare``, so that they
    are not checked twice (``None``: the resume checks them).
    """

    id: str
    meta: SessionMeta
    events: tuple[SessionEvent, ...]
    created: float
    repaired: tuple[SessionEvent, ...] = ()
    checked: CheckedLog | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(kw_only=True)
class SessionInfo:
    """One stored session as ``list()`` shows it, read without loading its whole log.

    ``created`` and ``modified`` are seconds since the epoch; ``events`` counts the stored events;
    ``turns`` the turns begun; ``title`` is the start of the first prompt (``None`` before any). A
    child session (a fork, a subagent) names its parent in ``parent_id``.
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


@attrs.frozen(kw_only=True)
class RepairReport:
    """What ``repair`` did to one stored log.

    ``seq`` is the first event it cut (``None`` when the log was sound and nothing changed);
    ``dropped_events`` counts the events it cut, ``events`` those kept; ``backup`` says where the
    cut part is kept (a file, a table; ``None`` when nothing was cut); ``problem`` why the first cut
    event was refused (the ``SessionCorruptError`` message). ``unit`` is what the backend checks one
    by one (``event``, a file backend's ``line``), for ``describe``.
    """

    id: str
    seq: int | None
    dropped_events: int
    events: int
    backup: object = None
    problem: str | None = None
    unit: str = "event"

    def describe(self) -> list[str]:
        """What happened, as lines for a person (``dsh sessions repair`` prints them)."""
        if self.seq is None:
            return [f"session {self.id}: nothing to repair ({self.events} events, every {self.unit} sound)"]
        lines = [
            f"session {self.id}: cut at event {self.seq}: dropped {self.dropped_events} events, kept "
            f"{self.events} events"
        ]
        if self.problem:
            lines.append(f"because: {self.problem}")
        if self.backup is not None:
            lines.append(f"what was cut is kept in {self.backup}")
        return lines
