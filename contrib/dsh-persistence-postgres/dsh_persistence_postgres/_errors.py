"""The errors of the PostgreSQL store: the core's (``dsh_core.persistence``), under the names this
package always exported. Each is the core class itself, so ``except dsh_core.SessionInUseError``
catches what this backend raises; ``DatabaseError`` is ``dsh_core.StoreUnavailableError``.

What this backend fills in: ``host`` and ``pid`` of the holder on ``SessionInUseError`` (and the
stale ``epoch`` on ``SessionFencedError``), ``seq`` on ``SessionCorruptError``, ``version`` and
``expected`` on ``SessionFormatError``, ``target`` (``user@host:port/dbname``) on ``DatabaseError``.
Messages never contain the DSN's password.
"""

from __future__ import annotations

from dsh_core.persistence import PersistenceError as PersistenceError
from dsh_core.persistence import SessionConflictError as SessionConflictError
from dsh_core.persistence import SessionCorruptError as SessionCorruptError
from dsh_core.persistence import SessionFencedError as SessionFencedError
from dsh_core.persistence import SessionFormatError as SessionFormatError
from dsh_core.persistence import SessionInUseError as SessionInUseError
from dsh_core.persistence import SessionNotFoundError as SessionNotFoundError
from dsh_core.persistence import SessionWriteError as SessionWriteError
from dsh_core.persistence import StoreUnavailableError as DatabaseError

__all__ = [
    "DatabaseError",
    "PersistenceError",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionFencedError",
    "SessionFormatError",
    "SessionInUseError",
    "SessionNotFoundError",
    "SessionWriteError",
]
