"""The write path: one ``Journal`` per followed session (``dsh_core.persistence.Journal``, committed by the
core's ``BatchWriter``, one journal after the other: SQLite has one writer at a time, and
``UrgentWriter`` for §9.1's records); what is SQLite's here is the row and the fenced transaction
(``Database.append``), and the title, read from the first prompt.

Durability: a flush, a close and any commit holding an urgent record are durable (``synchronous =
FULL``: the WAL is fsynced before the commit returns). A batch window's commit is not (``NORMAL``:
written to the WAL, in the OS's hands, so it survives the process being killed): nothing was
promised for it, and the next durable commit, or a ``sync_point`` when the window left nothing
pending, fsyncs the WAL and so covers it too. A failed commit (the database busy past its timeout, a
full disk, an I/O error) keeps the rows in memory and is retried at the next batch or flush.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import TYPE_CHECKING, ClassVar, Final

from dsh_core.persistence import Journal as BaseJournal
from dsh_core.persistence import title_of
from dsh_core.session_log import UserMessageEvent

from ._database import Database
from ._rows import Row, encode_row, turns_in

if TYPE_CHECKING:
    from dsh_core import Session, SessionEvent

__all__ = ["Journal"]

_USER_MESSAGE: Final = UserMessageEvent.type


class Journal(BaseJournal[Row]):
    """The stored log of one live session in the database file."""

    __slots__ = ("db", "title")

    log: ClassVar[logging.Logger] = logging.getLogger("dsh.persistence_sqlite")
    retryable: ClassVar[tuple[type[Exception], ...]] = (sqlite3.Error,)

    def __init__(self, session: Session, db: Database) -> None:
        super().__init__(session, where=f"in {db.path}", path=db.path)
        self.db = db
        #: the title published since the stored session got none, to store
        self.title: str | None = None

    def encode(self, event: SessionEvent) -> Row:
        return encode_row(self.session_id, event)

    def seq_of(self, row: Row) -> int:
        return row[1]

    def add(self, event: SessionEvent) -> None:
        """Buffer the row (cheap): a title is read from the first prompt only."""
        self.pending.append(encode_row(self.session_id, event))
        if not self.titled and self.title is None and event.type == _USER_MESSAGE:
            self.title = title_of(event)

    def append(self, epoch: int, first: int, rows: list[Row], *, durable: bool) -> bool:
        title = None if self.titled else self.title
        self.db.append(self.session_id, epoch, first, rows, turns=turns_in(rows), title=title, durable=durable)
        return title is not None

    def sync(self, epoch: int) -> None:
        self.db.sync_point(self.session_id, epoch)
