"""The hook wiring every persistence backend shares: the session hooks bound to a store, and its start.

A backend's plugin builds its store, then calls ``serve_session_store``: the store becomes the
``session_persistence`` service, ``SessionStoreHooks`` follow ``session/created``,
``session/event``, ``session/flush`` and ``session/disposed`` (and veto, at ``agent/created``, an
agent whose session cannot be persisted), the backend's background tasks start, and the sessions
already live are followed too. Stopping undoes it last-first: the tasks are cancelled, then
``store.close()`` writes what is pending and lets every session go.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from dsh_core.host._markers import hookimpl

if TYPE_CHECKING:
    from dsh_core.host._context import Context
    from dsh_core.services._persistence import SessionPersistence
    from dsh_core.services.sessions import Session
    from dsh_core.session_log._event import SessionEvent

__all__ = ["SessionStoreHooks", "serve_session_store"]


class SessionStoreHooks:
    """The session hooks, bound to one running store (its write side)."""

    def __init__(self, store: SessionPersistence) -> None:
        self._store = store

    @hookimpl
    async def dsh_session_created(self, session: Session) -> None:
        await self._store.follow(session)

    @hookimpl
    def dsh_agent_created(self, agent: Any) -> None:
        """Veto an agent whose session cannot be persisted (in use elsewhere, clashing with a stored one).

        ``agent/created`` is the vetoing event: the create or resume rolls back and the caller gets
        the reason, instead of an agent that runs and silently stores nothing.
        """
        problem = self._store.problem_of(agent.session)
        if problem is not None:
            raise problem

    @hookimpl
    def dsh_session_event(self, session: Session, event: SessionEvent) -> None:
        self._store.publish(session, event)

    @hookimpl
    async def dsh_session_flush(self, session: Session) -> None:
        await self._store.flush(session)

    @hookimpl
    async def dsh_session_disposed(self, session: Session) -> None:
        await self._store.unfollow(session)


async def serve_session_store(
    ctx: Context,
    store: SessionPersistence,
    *,
    name: str,
    tasks: Sequence[tuple[str, Callable[[], Awaitable[object]]]] = (),
) -> None:
    """Make ``store`` the ``session_persistence`` service of plugin ``name`` (see the module docstring).

    ``tasks`` are the store's background tasks, ``(name, fn)``, run until the plugin stops.
    """
    ctx.provide("session_persistence", store)
    ctx.register_plugin(SessionStoreHooks(store), name=f"{name}/hooks")
    # Effects undo last-first: the tasks are cancelled, then the store drains and closes.
    ctx.effect(store.close)
    for task_name, task in tasks:
        ctx.start_task(task, name=f"{name}/{task_name}")
    sessions = ctx.get_service("sessions")
    if sessions is not None:
        for session in sessions.list():  # live before we started: follow them too
            await store.follow(session)

