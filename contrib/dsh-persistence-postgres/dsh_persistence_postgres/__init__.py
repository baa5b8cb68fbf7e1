"""dsh plugin that keeps every session in PostgreSQL: one owner per session, fenced writes, any host.

Load the ``persistence-postgres`` plugin (entry point) and set ``[plugins.persistence-postgres]``
``dsn`` (or ``$DSH_POSTGRES_DSN``), ``schema`` and ``batch_delay``; ``ctx.agents.resume(id)`` then
continues a stored session on any host that reaches the database.

Importing the package does not import the driver (psycopg): ``dsh`` loads every plugin's entry
point at start-up, so the driver's import waits until the plugin starts or the store is named
(``PostgresSessionStore``, resolved on first access).
"""

from typing import TYPE_CHECKING, Any

from ._errors import DatabaseError as DatabaseError
from ._errors import PersistenceError as PersistenceError
from ._errors import SessionConflictError as SessionConflictError
from ._errors import SessionCorruptError as SessionCorruptError
from ._errors import SessionFencedError as SessionFencedError
from ._errors import SessionFormatError as SessionFormatError
from ._errors import SessionInUseError as SessionInUseError
from ._errors import SessionNotFoundError as SessionNotFoundError
from ._errors import SessionWriteError as SessionWriteError
from ._plugin import PersistenceConfig as PersistenceConfig
from ._plugin import PersistencePlugin as PersistencePlugin
from ._types import LoadedSession as LoadedSession
from ._types import RepairReport as RepairReport
from ._types import SessionInfo as SessionInfo
from ._version import SCHEMA_VERSION as SCHEMA_VERSION

if TYPE_CHECKING:
    from ._store import PostgresSessionStore as PostgresSessionStore

__all__ = [
    "SCHEMA_VERSION",
    "DatabaseError",
    "LoadedSession",
    "PersistenceConfig",
    "PersistenceError",
    "PersistencePlugin",
    "PostgresSessionStore",
    "RepairReport",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionFencedError",
    "SessionFormatError",
    "SessionInUseError",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionWriteError",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresSessionStore":  # the store imports the driver: only when asked for
        from ._store import PostgresSessionStore

        return PostgresSessionStore
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
