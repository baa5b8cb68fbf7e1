"""The ``persistence-postgres`` plugin: its config, its hooks, and how it starts and stops.

Nothing here imports the driver at module level; ``start`` does (see the package docstring).

Starting resolves the DSN, connects, creates or checks the schema, and hands the store to the core's
wiring (``dsh_core.persistence.serve_session_store``): it becomes the ``session_persistence``
service, the core's session hooks follow every live session, and the background writer runs.
Stopping cancels the writer, commits what every session has pending, and closes the connections
(which frees every session this process owned).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import attrs

from dsh_core.persistence import serve_session_store

from ._errors import DatabaseError

if TYPE_CHECKING:
    from dsh_core import Context

    from ._store import PostgresSessionStore

__all__ = ["PersistenceConfig", "PersistencePlugin"]


def _optional_dsn(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        msg = "dsn must be a libpq connection string or a postgresql:// URL (a non-empty string)"
        raise ValueError(msg)


def _schema(instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value or len(value.encode("utf-8")) > 63 or "\x00" in value:
        msg = f"schema must be a PostgreSQL schema name (1 to 63 bytes), got {value!r}"
        raise ValueError(msg)


def _delay(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        msg = f"batch_delay must be a number of seconds >= 0, got {value!r}"
        raise ValueError(msg)


def _connections(instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if isinstance(value, bool) or not 1 <= value <= 100:
        msg = f"connections must be a whole number from 1 to 100, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class PersistenceConfig:
    """The ``[plugins.persistence-postgres]`` table."""

    #: a libpq connection string or ``postgresql://`` URL; default ``$DSH_POSTGRES_DSN``
    dsn: str | None = attrs.field(default=None, validator=_optional_dsn, repr=False)
    #: the PostgreSQL schema holding the tables (created on first use)
    schema: str = attrs.field(default="public", validator=_schema)
    #: seconds the first uncommitted event waits for others to join its write
    batch_delay: float = attrs.field(default=0.05, validator=_delay)
    #: connections in the pool for queries (the lock connection comes on top)
    connections: int = attrs.field(default=4, validator=_connections)


class PersistencePlugin:
    """Entry point ``persistence-postgres``: every session in a PostgreSQL database.

    Provides ``ctx.session_persistence`` (a ``PostgresSessionStore``): ``load``, ``read``,
    ``exists``, ``list``, ``delete``, ``release``; ``ctx.agents.resume(id)`` loads through it.
    """

    name = "persistence-postgres"
    #: opt-in: started only when ``[plugins.persistence-postgres]`` is configured (then the default
    #: ``persistence-jsonl`` stands aside), so installing it changes nothing by itself
    autoload = False
    provides: tuple[str, ...] = ("session_persistence",)
    uses: tuple[str, ...] = ("sessions",)
    Config = PersistenceConfig

    def __init__(self) -> None:
        self.store: PostgresSessionStore | None = None

    async def start(self, ctx: Context) -> None:
        # The driver is imported here, not with the module: ``dsh`` imports every installed plugin
        # at start-up, and psycopg alone costs it tens of milliseconds (see the plugin docs).
        import psycopg

        from ._database import Database
        from ._dsn import resolve_target
        from ._store import PostgresSessionStore

        config = ctx.config if isinstance(ctx.config, PersistenceConfig) else PersistenceConfig()
        target = resolve_target(config.dsn)
        db = Database(target, config.schema, pool_size=config.connections)
        try:
            await anyio.to_thread.run_sync(db.open)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(db.close)
            if isinstance(exc, psycopg.Error):
                problem = target.redact(str(exc)).strip() or type(exc).__name__
                msg = f"persistence-postgres cannot use the session database {target.name}: {problem}"
                raise DatabaseError(msg, target=target.name) from None
            raise
        store = self.store = PostgresSessionStore(db, config.batch_delay, connections=config.connections)
        await serve_session_store(
            ctx,
            store,
            name=self.name,
            tasks=[("writer", store.run_writer), ("releases", store.run_releases)],
        )
