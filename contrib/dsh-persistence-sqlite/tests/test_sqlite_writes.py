"""The write path's own rules: how many rows a statement takes, and where the urgent writer's commit stops."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dsh_persistence_sqlite._database import Claim, Database
from dsh_persistence_sqlite._rows import Row
from dsh_persistence_sqlite._writer import Journal


def rows(session_id: str, seqs: range) -> list[Row]:
    return [(session_id, seq, "note/added", float(seq), f'{{"index":{seq}}}') for seq in seqs]


def stored_seqs(path: Path, session_id: str) -> list[int]:
    with sqlite3.connect(path) as conn:
        found = conn.execute("SELECT seq FROM dsh_events WHERE session_id = ? ORDER BY seq", (session_id,))
        return [seq for (seq,) in found]


def new_database(tmp_path: Path) -> Database:
    db = Database(tmp_path / "sessions.db", busy_timeout=5.0)
    db.open()
    return db


def create(db: Database, session_id: str, first: list[Row]) -> Claim:
    claim = db.create(
        session_id, created=0.0, meta="{}", cwd=None, parent_id=None, seed_length=0, rows=first, turns=0, title=None
    )
    assert isinstance(claim, Claim)
    return claim


def test_rows_of_every_count_are_stored_in_order(tmp_path: Path) -> None:
    """Rows go 100, then 10, then 1 to a statement: 123 rows and 9 rows each arrive whole, in order."""
    db = new_database(tmp_path)
    try:
        claim = create(db, "many", rows("many", range(123)))
        db.append("many", claim.epoch, 123, rows("many", range(123, 132)), turns=0, title=None, durable=True)
    finally:
        db.close()
    assert stored_seqs(db.path, "many") == list(range(132))


def test_the_urgent_commit_stops_at_the_urgent_record(tmp_path: Path) -> None:
    """The urgent writer's commit (``dequeue``) stores through the last urgent event and leaves the rest for
    the window; a later commit stores the rest; an urgent commit with its record already stored writes nothing."""
    db = new_database(tmp_path)
    session: Any = SimpleNamespace(id="urgent")
    try:
        journal = Journal(session, db)
        journal.opened(create(db, "urgent", []), [])
        journal.pending.extend(rows("urgent", range(6)))
        journal.urgent_seq, journal.urgent = 2, True
        journal.commit(durable=True, dequeue=True)
        assert (journal.written, len(journal.pending), journal.unsynced) == (3, 3, False)
        assert stored_seqs(db.path, "urgent") == [0, 1, 2]
        journal.commit(durable=False, dequeue=True)  # its record is stored: nothing to do
        assert stored_seqs(db.path, "urgent") == [0, 1, 2]
        journal.commit(durable=True)
        assert (journal.written, journal.pending) == (6, [])
        assert stored_seqs(db.path, "urgent") == list(range(6))
    finally:
        db.close()
