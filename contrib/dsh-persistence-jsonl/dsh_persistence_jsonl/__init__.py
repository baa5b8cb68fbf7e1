"""dsh plugin that keeps every session as an append-only JSONL file: batched, fsynced, crash-repaired.

Load the ``persistence-jsonl`` plugin (entry point) and set ``[plugins.persistence-jsonl]``
``root`` and ``batch_delay``; ``ctx.agents.resume(id)`` then continues a stored session.
"""

from ._errors import PersistenceError as PersistenceError
from ._errors import SessionAccessError as SessionAccessError
from ._errors import SessionConflictError as SessionConflictError
from ._errors import SessionCorruptError as SessionCorruptError
from ._errors import SessionFormatError as SessionFormatError
from ._errors import SessionInUseError as SessionInUseError
from ._errors import SessionNotFoundError as SessionNotFoundError
from ._errors import SessionWriteError as SessionWriteError
from ._format import FORMAT_VERSION as FORMAT_VERSION
from ._layout import escape_id as escape_id
from ._plugin import PersistenceConfig as PersistenceConfig
from ._plugin import PersistencePlugin as PersistencePlugin
from ._store import JsonlSessionStore as JsonlSessionStore
from ._types import LoadedSession as LoadedSession
from ._types import RepairReport as RepairReport
from ._types import SessionInfo as SessionInfo

__all__ = [
    "FORMAT_VERSION",
    "JsonlSessionStore",
    "LoadedSession",
    "PersistenceConfig",
    "PersistenceError",
    "PersistencePlugin",
    "RepairReport",
    "SessionAccessError",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionFormatError",
    "SessionInUseError",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionWriteError",
    "escape_id",
]
