"""The ``persistence-jsonl`` plugin: its config, its hooks, and how it starts and stops.

Starting provides the ``session_persistence`` service, follows the sessions already live, hooks
``session/created``, ``session/event``, ``session/flush`` and ``session/disposed``, and runs the
background writer. Stopping cancels the writer, then writes, fsyncs and closes every log.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from dsh_core import SessionEvent, hookimpl

from ._layout import default_root
from ._store import JsonlSessionStore

if TYPE_CHECKING:
    from dsh_core import Context
    from dsh_core.services.sessions import Session

__all__ = ["PersistenceConfig", "PersistencePlugin"]


def _optional_path(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        msg = f"root must be a folder path (a non-empty string), got {value!r}"
        raise ValueError(msg)


def _delay(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        msg = f"batch_delay must be a number of seconds >= 0, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class PersistenceConfig:
    """The ``[plugins.persistence-jsonl]`` table."""

    #: the folder holding one folder per session (``~`` is expanded; relative to the working
    #: directory at start); default: the platform's user data directory + ``dsh/sessions``
    root: str | None = attrs.field(default=None, validator=_optional_path)
    #: seconds the first unwritten event waits for others to join its write
    batch_delay: float = attrs.field(default=0.1, validator=_delay)

    def root_path(self) -> Path:
        """``root`` as an absolute path (the default when unset)."""
        if self.root is None:
            return default_root()
        return Path(self.root).expanduser().absolute()


class _Hooks:
    """The session hooks, bound to one running store."""

    def __init__(self, store: JsonlSessionStore) -> None:
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


class PersistencePlugin:
    """Entry point ``persistence-jsonl``: every session as an append-only JSONL file.

    Provides ``ctx.session_persistence`` (a ``JsonlSessionStore``): ``load``, ``exists``,
    ``list``, ``delete``; ``ctx.agents.resume(id)`` loads through it.
    """

    name = "persistence-jsonl"
    provides: tuple[str, ...] = ("session_persistence",)
    uses: tuple[str, ...] = ("sessions",)
    Config = PersistenceConfig

    def __init__(self) -> None:
        self.store: JsonlSessionStore | None = None

    async def start(self, ctx: Context) -> None:
        config = ctx.config if isinstance(ctx.config, PersistenceConfig) else PersistenceConfig()
        store = self.store = JsonlSessionStore(config.root_path(), config.batch_delay)
        ctx.provide("session_persistence", store)
        ctx.register_plugin(_Hooks(store), name=f"{self.name}/hooks")
        # Effects undo last-first: the writer is cancelled, then every log is drained and closed.
        ctx.effect(store.close)
        ctx.start_task(store.run_writer, name=f"{self.name}/writer")
        sessions = ctx.get_service("sessions")
        if sessions is not None:
            for session in sessions.list():  # live before we started: follow them too
                await store.follow(session)
