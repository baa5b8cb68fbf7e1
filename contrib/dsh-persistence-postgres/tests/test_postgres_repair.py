"""The explicit repair on PostgreSQL: what only rows can get wrong (gaps, counts), and the fence it raises.

The cut itself (a refused event, the rows kept aside, the resume) is in the contract suite.
"""

from __future__ import annotations

import pytest
from dsh_persistence_postgres import SessionCorruptError, SessionFencedError

from .postgres_kit import Database, HarnessFactory

pytestmark = pytest.mark.anyio


async def store(harness: HarnessFactory, count: int) -> None:
    async with harness() as ctx:
        session = await ctx.sessions.create("rows")
        for index in range(count):
            session.append("note/n", {"n": index})


async def test_a_gap_in_the_seqs_is_cut_at_the_gap(harness: HarnessFactory, db: Database) -> None:
    """A missing middle row: load names the seq; repair keeps the rows before it and moves the rest aside."""
    await store(harness, 6)
    db.query("DELETE FROM {s}.dsh_events WHERE session_id = 'rows' AND seq = 3")
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError, match="the stored seqs jump from 2 to 4") as caught:
            await ctx.session_persistence.load("rows")
        assert caught.value.seq == 3
        report = await ctx.session_persistence.repair("rows")
        assert (report.seq, report.dropped_events, report.events) == (3, 2, 3)
        loaded = await ctx.session_persistence.load("rows")
    assert [event.data["n"] for event in loaded.events] == [0, 1, 2]
    assert db.query("SELECT seq FROM {s}.dsh_damaged WHERE session_id = 'rows' ORDER BY seq") == [(4,), (5,)]
    assert db.query("SELECT events FROM {s}.dsh_sessions WHERE id = 'rows'") == [(3,)]


async def test_missing_rows_at_the_end_only_correct_the_count(harness: HarnessFactory, db: Database) -> None:
    """The count says more than the rows hold: repair sets the count, with nothing to keep aside."""
    await store(harness, 4)
    db.query("DELETE FROM {s}.dsh_events WHERE session_id = 'rows' AND seq >= 2")
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError, match="dsh_sessions counts 4 events but dsh_events holds 2"):
            await ctx.session_persistence.load("rows")
        report = await ctx.session_persistence.repair("rows")
        assert (report.seq, report.dropped_events, report.events, report.backup) == (2, 0, 2, None)
        assert "counts 4 events" in (report.problem or "")
        loaded = await ctx.session_persistence.load("rows")
    assert len(loaded.events) == 2
    assert db.query("SELECT to_regclass(format('%%I.dsh_damaged', %s::text))", db.schema) == [(None,)]


async def test_repair_fences_a_writer_that_lost_its_lock(harness: HarnessFactory, db: Database) -> None:
    """Repair takes a new owner epoch: a writer whose lock was lost cannot write after it, even a continuing seq."""
    async with harness(batch_delay=3600) as first, harness() as second:
        stale = await first.sessions.create("rows")
        stale.append("note/n", {"n": 0})
        await first.sessions.flush(stale)
        db.cut_lock_connection("rows")
        report = await second.session_persistence.repair("rows")  # sound: nothing cut, but a new epoch
        assert (report.seq, report.epoch) == (None, 2)
        stale.append("note/n", {"n": 1})
        with pytest.raises(SessionFencedError):
            await first.sessions.flush(stale)
    assert db.query("SELECT seq FROM {s}.dsh_events WHERE session_id = 'rows'") == [(0,)]
