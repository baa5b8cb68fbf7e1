"""``SessionPersistence``: the one Protocol every persistence backend implements, read and write sides.

The read side is what callers use (``ctx.agents.resume`` loads through it, ``dsh sessions`` lists,
shows, repairs and deletes through it). The write side is what the core's hook wiring calls
(``dsh_core.persistence.SessionStoreHooks``): a backend follows each live session, buffers what it
publishes, writes it (at once for §9.1's urgent records, ``dsh_core.persistence.is_urgent``) and
makes it durable at a flush. Every method raises the errors of ``dsh_core.persistence``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dsh_core.persistence._errors import PersistenceError
    from dsh_core.persistence._types import RepairReport, SessionInfo, StoredSession
    from dsh_core.services.sessions import Session, SessionMeta
    from dsh_core.session_log._event import SessionEvent
    from dsh_core.session_log._session import CheckedLog

__all__ = ["LoadedSessionLike", "SessionPersistence", "SessionStoreReader", "SessionStoreWriter"]


class LoadedSessionLike(Protocol):
    """What a resume needs of a loaded session (``StoredSession`` has it): its meta, its (repaired)
    events, and what ``check_log`` returned for the stored events (``None`` if it checked none)."""

    @property
    def meta(self) -> SessionMeta: ...
    @property
    def events(self) -> Sequence[SessionEvent]: ...
    @property
    def checked(self) -> CheckedLog | None: ...


class SessionStoreReader(Protocol):
    """The read side: where ``ctx.agents.resume(id)`` finds stored sessions.

    ``load`` takes the session over (its lock, an owner epoch), repairs a log a crash left open
    (appending the repair events) and keeps the session reserved for the resume that follows;
    ``release`` gives that reservation up when the resume fails before the session goes live.
    ``read`` is ``load`` for viewing: no lock, nothing written, safe while another process owns it.
    """

    async def exists(self, session_id: str) -> bool: ...
    async def load(self, session_id: str) -> StoredSession: ...
    async def read(self, session_id: str) -> StoredSession: ...
    async def list(self) -> Sequence[SessionInfo]: ...
    async def delete(self, session_id: str) -> None: ...
    async def repair(self, session_id: str) -> RepairReport: ...
    def release(self, session_id: str) -> None: ...


class SessionStoreWriter(Protocol):
    """The write side, called by the core's hook wiring (``SessionStoreHooks``); see the module docstring.

    ``publish`` runs inside ``session.append`` and must stay cheap (buffer, wake a writer);
    ``follow`` never raises: a session that cannot be persisted is reported by ``problem_of`` (the
    ``agent/created`` veto) and by each of its flushes.
    """

    async def follow(self, session: Session) -> None: ...
    def publish(self, session: Session, event: SessionEvent) -> None: ...
    async def flush(self, session: Session) -> None: ...
    async def unfollow(self, session: Session) -> None: ...
    def problem_of(self, session: Session) -> PersistenceError | None: ...
    async def close(self) -> None: ...


class SessionPersistence(SessionStoreReader, SessionStoreWriter, Protocol):
    """``ctx.session_persistence``: a persistence backend, both sides (see the module docstring)."""
