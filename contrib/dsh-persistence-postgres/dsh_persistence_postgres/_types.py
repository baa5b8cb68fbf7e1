"""The values the ``session_persistence`` service hands out: a loaded session, a listing entry, a repair."""

from __future__ import annotations

import attrs

from dsh_core import SessionEvent, SessionMeta
from dsh_core.session_log import CheckedLog

__all__ = ["LoadedSession", "RepairReport", "SessionInfo"]


@attrs.frozen(kw_only=True)
class LoadedSession:
    """A stored session, repaired and ready to seed ``ctx.sessions.prepare(id, meta=..., seed=...)``.

    ``events`` is the whole log, the repair events included; ``repaired`` repeats those (empty
    when the log ended cleanly). ``epoch`` is the owner epoch ``load`` took (0 for ``read``).
    ``checked`` is what ``check_log`` returned for the stored events: the resume hands it to
    ``prepare``, so that they are not checked twice.
    """

    id: str
    meta: SessionMeta
    events: tuple[SessionEvent, ...]
    created: float
    repaired: tuple[SessionEvent, ...] = ()
    epoch: int = 0
    checked: CheckedLog | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(kw_only=True)
class SessionInfo:
    """One stored session as ``list()`` shows it, read from its ``dsh_sessions`` row alone.

    ``created`` and ``modified`` are seconds since the epoch; ``events`` counts the stored
    events; ``title`` is the start of the first prompt (``None`` before any). A child session (a
    fork, a subagent) names its parent in ``parent_id``.
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
    ``dropped_events`` counts the rows it moved from ``dsh_events`` to ``backup``; ``events``
    counts the events kept. ``backup`` names where the cut rows are kept (``None`` when none were
    cut): the rows of ``<schema>.dsh_damaged`` with this ``session_id`` and ``epoch``.
    """

    id: str
    seq: int | None
    dropped_events: int
    events: int
    backup: str | None
    #: the owner epoch the repair took; the kept rows of ``dsh_damaged`` carry it
    epoch: int
    #: why the first cut event was refused (the ``SessionCorruptError`` message), or ``None``
    problem: str | None = None

    def describe(self) -> list[str]:
        """What happened, as lines for a person (``dsh sessions repair`` prints them)."""
        if self.seq is None:
            return [f"session {self.id}: nothing to repair ({self.events} events, every event sound)"]
        lines = [
            f"session {self.id}: cut at event {self.seq}: dropped {self.dropped_events} events, kept "
            f"{self.events} events"
        ]
        if self.problem:
            lines.append(f"because: {self.problem}")
        if self.backup is not None:
            lines.append(f"the dropped rows are kept in {self.backup}")
        return lines
