"""The ``persistence-sqlite`` plugin: its config, and how it starts and stops.

Starting opens (or creates) the database file, checks its schema version, opens the owners file,
and hands the store to the core's wiring (``dsh_core.persistence.serve_session_store``): it becomes
the ``session_persistence`` service, the core's session hooks follow every live session, and the
background writer runs. Stopping cancels the writer, commits what every session has pending, and
gives every session back.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import attrs
import platformdirs

from dsh_core.persistence import StoreUnavailableError, serve_session_store

from ._database import Database
from ._owners import Owners
from ._store import SqliteSessionStore

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["PersistenceConfig", "PersistencePlugin", "default_path"]


def default_path() -> Path:
    """The platform's user data directory, plus ``dsh/sessions.db``."""
    return Path(platformdirs.user_data_dir("dsh", appauthor=False)) / "sessions.db"


def _optional_path(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        msg = f"path must be the database file's path (a non-empty string), got {value!r}"
        raise ValueError(msg)


def _seconds(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not (math.isfinite(value) and value >= 0):
        msg = f"{attribute.name} must be a number of seconds >= 0, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class PersistenceConfig:
    """The ``[plugins.persistence-sqlite]`` table."""

    #: the database file (``~`` is expanded; relative to the working directory at start); default
    #: the platform's user data directory + ``dsh/sessions.db``
    path: str | None = attrs.field(default=None, validator=_optional_path)
    #: seconds the first unwritten event waits for others to join its commit
    batch_delay: float = attrs.field(default=0.05, validator=_seconds)
    #: seconds a write waits for another process's write to finish before it fails (and is retried)
    busy_timeout: float = attrs.field(default=10.0, validator=_seconds)

    def database_path(self) -> Path:
        """``path`` as an absolute path (the default when unset)."""
        if self.path is None:
            return default_path()
        return Path(self.path).expanduser().absolute()


class PersistencePlugin:
    """Entry point ``persistence-sqlite``: every session in one SQLite database file.

    Provides ``ctx.session_persistence`` (a ``SqliteSessionStore``): ``load``, ``read``, ``exists``,
    ``list``, ``delete``, ``repair``, ``release``; ``ctx.agents.resume(id)`` loads through it.
    """

    name = "persistence-sqlite"
    #: opt-in: started only when ``[plugins.persistence-sqlite]`` is configured (then the default
    #: ``persistence-jsonl`` stands aside), so installing it changes nothing by itself
    autoload = False
    provides: tuple[str, ...] = ("session_persistence",)
    uses: tuple[str, ...] = ("sessions",)
    Config = PersistenceConfig

    def __init__(self) -> None:
        self.store: SqliteSessionStore | None = None

    async def start(self, ctx: Context) -> None:
        config = ctx.config if isinstance(ctx.config, PersistenceConfig) else PersistenceConfig()
        path = config.database_path()
        db = Database(path, busy_timeout=config.busy_timeout)
        try:
            await anyio.to_thread.run_sync(db.open)
            owners = Owners(path)
        except (sqlite3.Error, OSError) as exc:
            await anyio.to_thread.run_sync(db.close)
            msg = f"persistence-sqlite cannot use the session database {path}: {exc}"
            raise StoreUnavailableError(msg, target=str(path)) from exc
        store = self.store = SqliteSessionStore(db, owners, config.batch_delay)
        await serve_session_store(ctx, store, name=self.name, tasks=[("writer", store.run_writer)])
