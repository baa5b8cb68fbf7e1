"""The errors of the PostgreSQL store: the same tree as ``dsh-persistence-jsonl``'s, plus fencing.

PersistenceError(DshError)
  + SessionNotFoundError(PersistenceError, LookupError)    .session_id
  + SessionInUseError(PersistenceError, RuntimeError)      .session_id, .host, .pid
    - SessionFencedError(SessionInUseError)                .epoch (ours, now stale)
  + SessionConflictError(PersistenceError, RuntimeError)   .session_id
  + SessionCorruptError(PersistenceError, ValueError)      .session_id, .seq, .event_type, .field
  + SessionFormatError(PersistenceError, ValueError)       .version, .expected
  + SessionWriteError(PersistenceError, OSError)           .session_id
  + DatabaseError(PersistenceError, ConnectionError)       .target (the server, never the password)

Messages never contain the DSN's password: a server is named by ``user@host:port/dbname``.
"""

from __future__ import annotations

from dsh_core import DshError

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


class PersistenceError(DshError):
    """Base of every error the PostgreSQL session store raises on purpose."""


class SessionNotFoundError(PersistenceError, LookupError):
    """No stored session has the id."""

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id

    def __str__(self) -> str:  # LookupError would print the repr of the message
        return str(self.args[0])


class SessionInUseError(PersistenceError, RuntimeError):
    """Another owner holds the session: another process, host, or another harness in this one.

    ``host`` and ``pid`` name the holder as it recorded itself (``None`` when not recorded yet).
    """

    def __init__(self, message: str, *, session_id: str, host: str | None, pid: int | None) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.host = host
        self.pid = pid


class SessionFencedError(SessionInUseError):
    """This process lost the session: another owner took it over (a newer epoch), so nothing more
    is written; every later flush raises this again. ``epoch`` is the one this process held."""

    def __init__(
        self, message: str, *, session_id: str, host: str | None, pid: int | None, epoch: int
    ) -> None:
        super().__init__(message, session_id=session_id, host=host, pid=pid)
        self.epoch = epoch


class SessionConflictError(PersistenceError, RuntimeError):
    """A live session does not continue the log stored under its id (a fresh session created with
    the id of a stored one, instead of resuming it)."""

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class SessionCorruptError(PersistenceError, ValueError):
    """A stored log cannot be read as a log: a gap in the seqs, an event that is not one, an event
    that breaks the rules of its type (the checks ``session.append`` makes).

    ``seq`` is the damaged event's; for an event that breaks its type's data rules, ``event_type``
    and ``field`` (``data.turn``, ``data.message.id``...) say which rule; otherwise they are ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        seq: int,
        event_type: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.seq = seq
        self.event_type = event_type
        self.field = field


class SessionFormatError(PersistenceError, ValueError):
    """The database holds a schema version this plugin does not use."""

    def __init__(self, message: str, *, version: object, expected: int) -> None:
        super().__init__(message)
        self.version = version
        self.expected = expected


class SessionWriteError(PersistenceError, OSError):
    """Writing a session's events failed (the server is unreachable, a query failed); the driver's
    error is chained as ``__cause__``. The events are kept in memory and retried."""

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id

    def __str__(self) -> str:  # OSError would print its args tuple
        return str(self.args[0])


class DatabaseError(PersistenceError, ConnectionError):
    """The server cannot be reached or refused us (start-up, load, list, delete)."""

    def __init__(self, message: str, *, target: str) -> None:
        super().__init__(message)
        self.target = target

    def __str__(self) -> str:  # OSError would print its args tuple
        return str(self.args[0])
