"""The values the ``session_persistence`` service hands out: a loaded session, a listing entry."""

from __future__ import annotations

import attrs

from dsh_core import SessionEvent, SessionMeta

__all__ = ["LoadedSession", "SessionInfo"]


@attrs.frozen(kw_only=True)
class LoadedSession:
    """A stored session, repaired and ready to seed ``ctx.sessions.prepare(id, meta=..., seed=...)``.

    ``events`` is the whole log, the repair events included; ``repaired`` repeats those (empty
    when the log ended cleanly). ``epoch`` is the owner epoch ``load`` took (0 for ``read``).
    """

    id: str
    meta: SessionMeta
    events: tuple[SessionEvent, ...]
    created: float
    repaired: tuple[SessionEvent, ...] = ()
    epoch: int = 0


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
