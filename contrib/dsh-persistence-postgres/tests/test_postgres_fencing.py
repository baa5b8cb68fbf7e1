"""Fencing: an owner that lost its session can never write to it again, not even a seq that continues it."""

from __future__ import annotations

import os
import socket

import pytest
from dsh_persistence_postgres import SessionFencedError, SessionInUseError

from .postgres_kit import Database, HarnessFactory

pytestmark = pytest.mark.anyio


async def test_stale_writer_is_fenced_and_no_seq_is_written_twice(harness: HarnessFactory, db: Database) -> None:
    """A loses its lock, B takes over and writes; A's next batch is refused, and every later flush too."""
    async with harness(batch_delay=3600) as first, harness() as second:
        stale = await first.sessions.create("fenced")
        stale.append("note/by-a", {"n": 0})
        await first.sessions.flush(stale)
        db.cut_lock_connection("fenced")  # A's lock is gone, but A does not know: it still writes

        loaded = await second.session_persistence.load("fenced")  # B takes over: a new epoch
        assert loaded.epoch == 2
        taken = second.sessions.prepare("fenced", meta=loaded.meta, seed=loaded.events)
        await second.sessions.enter(taken)
        taken.append("note/by-b", {"n": 1})
        await second.sessions.flush(taken)

        stale.append("note/by-a", {"n": 1})  # the same seq B just wrote
        with pytest.raises(SessionFencedError) as caught:
            await first.sessions.flush(stale)
        error = caught.value
        assert isinstance(error, SessionInUseError)
        assert error.session_id == "fenced"
        assert (error.host, error.pid, error.epoch) == (socket.gethostname(), os.getpid(), 1)
        assert "session 'fenced' was taken over by" in str(error)
        assert f"process {os.getpid()} on host {socket.gethostname()}" in str(error)
        stale.append("note/by-a", {"n": 2})
        with pytest.raises(SessionFencedError):  # and every later flush
            await first.sessions.flush(stale)
    rows = db.query("SELECT seq, type FROM {s}.dsh_events WHERE session_id = 'fenced' ORDER BY seq")
    assert rows == [(0, "note/by-a"), (1, "note/by-b")]
    duplicates = db.query(
        "SELECT seq, count(*) FROM {s}.dsh_events WHERE session_id = 'fenced' GROUP BY seq HAVING count(*) > 1"
    )
    assert duplicates == []
    assert db.query("SELECT epoch, events FROM {s}.dsh_sessions WHERE id = 'fenced'") == [(2, 2)]


async def test_stale_writer_cannot_write_even_a_continuing_seq(harness: HarnessFactory, db: Database) -> None:
    """After a takeover that wrote nothing, the stale batch would continue the log: still refused."""
    async with harness(batch_delay=3600) as first, harness() as second:
        stale = await first.sessions.create("continuing")
        await first.sessions.flush(stale)
        db.cut_lock_connection("continuing")
        await second.session_persistence.load("continuing")  # epoch 2, nothing written
        stale.append("note/late", {})
        with pytest.raises(SessionFencedError, match="'continuing' was taken over"):
            await first.sessions.flush(stale)
    assert db.query("SELECT count(*) FROM {s}.dsh_events WHERE session_id = 'continuing'") == [(0,)]


async def test_every_take_gives_a_new_epoch(harness: HarnessFactory, db: Database) -> None:
    """Create, resume and takeover each store a new owner epoch with the owner's host and pid."""
    async with harness() as ctx:
        await ctx.sessions.create("epochs")
    assert db.query("SELECT epoch, owner_host, owner_pid FROM {s}.dsh_sessions") == [
        (1, socket.gethostname(), os.getpid())
    ]
    for expected in (2, 3):
        async with harness() as ctx:
            loaded = await ctx.session_persistence.load("epochs")
            assert loaded.epoch == expected
    assert db.query("SELECT epoch FROM {s}.dsh_sessions") == [(3,)]


async def test_a_lost_commit_answer_is_not_written_twice(harness: HarnessFactory, db: Database) -> None:
    """A batch committed whose answer was lost is recognised when it is retried: stored once, in order."""
    async with harness(batch_delay=3600) as ctx:
        session = await ctx.sessions.create("retried")
        await ctx.sessions.flush(session)
        session.append("note/a", {})
        session.append("note/b", {})
        store = ctx.session_persistence
        journal = store._followed["retried"]  # simulate: the rows went in, our count did not move
        first = journal.written
        store._db.append("retried", journal.epoch, first, list(journal.pending), want_title=False)
        session.append("note/c", {})
        await ctx.sessions.flush(session)
    rows = db.query("SELECT seq, type FROM {s}.dsh_events WHERE session_id = 'retried' ORDER BY seq")
    assert rows == [(0, "note/a"), (1, "note/b"), (2, "note/c")]
