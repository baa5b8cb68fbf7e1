"""What the agent loop expects of a ``session_persistence`` service (a plugin provides it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dsh_core.services.sessions import SessionMeta
    from dsh_core.session_log._event import SessionEvent
    from dsh_core.session_log._session import CheckedLog

__all__ = ["LoadedSessionLike", "SessionPersistence"]


class LoadedSessionLike(Protocol):
    """A stored session as ``load`` returns it: its meta, its (repaired) events, and what
    ``check_log`` returned for the stored events it checked (``None`` if it checked none).

    The resume seeds the session with ``events`` and hands ``checked`` to
    ``ctx.sessions.prepare``, so each stored event is checked once (a loaded session without
    ``checked``, from a store written before it, is checked in full).
    """

    @property
    def meta(self) -> SessionMeta: ...
    @property
    def events(self) -> Sequence[SessionEvent]: ...
    @property
    def checked(self) -> CheckedLog | None: ...


class SessionPersistence(Protocol):
    """``ctx.session_persistence``: where ``ctx.agents.resume(id)`` finds stored sessions.

    ``load`` may reserve the session for the resume that follows (a lock); ``release`` gives that
    reservation up when the resume fails before the session goes live.
    """

    async def load(self, session_id: str) -> LoadedSessionLike: ...
    async def exists(self, session_id: str) -> bool: ...
    async def list(self) -> Sequence[Any]: ...
    async def delete(self, session_id: str) -> None: ...
    def release(self, session_id: str) -> None: ...
