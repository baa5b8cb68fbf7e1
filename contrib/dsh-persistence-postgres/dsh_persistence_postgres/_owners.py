"""Which sessions this store owns at the server: advisory locks taken, and given back in order.

Taking and dropping a lock is a round trip on the lock connection, so it runs in a worker thread;
``release_soon`` (for the synchronous ``release()`` of the service) queues the unlock for the
background task. A lock queued for release and wanted again before it went is simply kept.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ._database import Database, holder_text
from ._errors import SessionInUseError

__all__ = ["Owners"]

T = TypeVar("T")


class Owners:
    """The session locks of one store."""

    def __init__(self, db: Database, run: Callable[[Callable[[], object]], Awaitable[object]]) -> None:
        self._db = db
        #: runs a blocking call in a worker thread, turning driver errors into ``DatabaseError``
        self._run_blocking = run
        self._held: set[str] = set()
        self._releasing: set[str] = set()
        self._mutex = anyio.Lock()
        self._wake = anyio.Event()

    async def _run(self, fn: Callable[[], T]) -> T:
        return await self._run_blocking(fn)  # type: ignore[return-value]  # T in, T out

    def holds(self, session_id: str) -> bool:
        return session_id in self._held and session_id not in self._releasing

    async def acquire(self, session_id: str) -> None:
        """Own ``session_id`` (its lock), or say who does.

        :raises SessionInUseError: another connection holds the lock: naming its host and pid.
        """
        async with self._mutex:
            if session_id in self._releasing:
                self._releasing.discard(session_id)
                return
            if session_id in self._held:
                raise in_use(session_id, self._db.host, self._db.pid)
            with anyio.CancelScope(shield=True):  # a lock taken must be recorded, or it leaks
                taken = await self._run(functools.partial(self._db.try_lock, session_id))
                if taken:
                    self._held.add(session_id)
                    return
                holder: tuple[str | None, int | None] = await self._run(functools.partial(self._db.holder, session_id))
        raise in_use(session_id, *holder)

    async def release(self, session_id: str) -> None:
        """Give the lock back now (idempotent)."""
        async with self._mutex:
            self._releasing.discard(session_id)
            if session_id not in self._held:
                return
            with anyio.CancelScope(shield=True):
                await self._run(functools.partial(self._db.unlock, [session_id]))
                self._held.discard(session_id)

    def release_soon(self, session_id: str) -> None:
        """Queue the lock's release for the background task (idempotent, never blocks)."""
        if session_id in self._held:
            self._releasing.add(session_id)
            self._wake.set()

    async def run(self) -> None:
        """The background task: drop the locks ``release_soon`` queued (until cancelled)."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            async with self._mutex:
                batch, self._releasing = self._releasing, set()
                if batch:
                    with anyio.CancelScope(shield=True):
                        await self._run(functools.partial(self._db.unlock, batch))
                        self._held -= batch

    def forget(self) -> None:
        """The lock connection is closing, and with it every lock."""
        self._held.clear()
        self._releasing.clear()


def in_use(session_id: str, host: str | None, pid: int | None) -> SessionInUseError:
    msg = (
        f"session {session_id!r} is in use by {holder_text(host, pid)}; stop that process or dispose "
        f"the session there, then try again (if that process or its host died, the server frees the "
        f"session within about 15 seconds)"
    )
    return SessionInUseError(msg, session_id=session_id, host=host, pid=pid)
