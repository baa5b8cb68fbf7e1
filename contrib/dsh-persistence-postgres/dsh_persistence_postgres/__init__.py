"""dsh plugin that keeps every session in PostgreSQL: one owner per session, fenced writes, any host.

Load the ``persistence-postgres`` plugin (entry point) and set ``[plugins.persistence-postgres]``
``dsn`` (or ``$DSH_POSTGRES_DSN``), ``schema`` and ``batch_delay``; ``ctx.agents.resume(id)`` then
continues a stored session on any host that reaches the database.
"""

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
from ._schema import SCHEMA_VERSION as SCHEMA_VERSION
from ._store import PostgresSessionStore as PostgresSessionStore
from ._types import LoadedSession as LoadedSession
from ._types import RepairReport as RepairReport
from ._types import SessionInfo as SessionInfo

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
