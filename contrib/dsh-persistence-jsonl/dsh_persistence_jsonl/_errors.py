"""The errors of the JSONL store: the core's (``dsh_core.persistence``), under the names this package
always exported. Each is the core class itself, so ``except dsh_core.SessionNotFoundError`` catches
what this backend raises.

What this backend fills in: ``path`` (the file or folder concerned) everywhere it applies,
``line`` (1-based, the header is line 1) and ``seq`` (``line - 2``) on ``SessionCorruptError``,
``pid`` on ``SessionInUseError`` (``host`` is ``None``: the lock holds on one host).
"""

from __future__ import annotations

from dsh_core.persistence import PersistenceError as PersistenceError
from dsh_core.persistence import SessionAccessError as SessionAccessError
from dsh_core.persistence import SessionConflictError as SessionConflictError
from dsh_core.persistence import SessionCorruptError as SessionCorruptError
from dsh_core.persistence import SessionFormatError as SessionFormatError
from dsh_core.persistence import SessionInUseError as SessionInUseError
from dsh_core.persistence import SessionNotFoundError as SessionNotFoundError
from dsh_core.persistence import SessionWriteError as SessionWriteError

__all__ = [
    "PersistenceError",
    "SessionAccessError",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionFormatError",
    "SessionInUseError",
    "SessionNotFoundError",
    "SessionWriteError",
]
