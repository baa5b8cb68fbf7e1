"""The write path: batches, flush durability, atomic creation, failures that surface and never damage the log."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import anyio
import pytest
from dsh_persistence_jsonl import SessionWriteError

from dsh_core import SessionEvent

from .persistence_kit import FileProbe, HarnessFactory, log_lines, stored_events

pytestmark = pytest.mark.anyio

#: long enough that the background window never closes during a test: only flush() writes
NEVER = 3600.0


async def test_many_appends_are_written_in_one_write(
    harness: HarnessFactory, root: Path, probe: FileProbe
) -> None:
    """A thousand events published within one window reach the file in a single write, fsynced at flush."""
    async with harness(batch_delay=NEVER) as ctx:
        session = await ctx.sessions.create("batch")
        probe.path = root / "batch" / "session.jsonl"
        for index in range(1000):
            session.append("note/added", {"index": index})
        assert probe.writes == 0  # buffered: the listener does no I/O
        await ctx.sessions.flush(session)
        assert (probe.writes, probe.fsyncs) == (1, 1)
        assert stored_events(probe.path) == list(session.events)
        await ctx.sessions.flush(session)  # nothing new: no write, no fsync
        assert (probe.writes, probe.fsyncs) == (1, 1)


async def test_background_writer_batches_a_window(
    harness: HarnessFactory, root: Path, probe: FileProbe
) -> None:
    """Without any flush, the writer wakes after the window and writes everything pending at once."""
    written = anyio.Event()
    probe.on_write = written.set
    async with harness(batch_delay=0.05) as ctx:
        session = await ctx.sessions.create("window")
        probe.path = root / "window" / "session.jsonl"
        for index in range(500):
            session.append("note/added", {"index": index})
        with anyio.fail_after(5):
            await written.wait()
        assert probe.writes == 1
        assert probe.fsyncs == 0  # the batch writer only writes; flush makes durable
        assert len(stored_events(probe.path)) == 500
        written = anyio.Event()
        probe.on_write = written.set
        session.append("note/added", {"index": 500})  # the next event opens a new window
        with anyio.fail_after(5):
            await written.wait()
        assert probe.writes == 2
        assert stored_events(probe.path) == list(session.events)


async def test_stop_writes_and_syncs_what_is_pending(
    harness: HarnessFactory, root: Path, probe: FileProbe
) -> None:
    """Stopping the harness drains and fsyncs every followed log, with no flush asked for."""
    async with harness(batch_delay=NEVER) as ctx:
        session = await ctx.sessions.create("stop")
        probe.path = root / "stop" / "session.jsonl"
        for index in range(10):
            session.append("note/added", {"index": index})
        events = list(session.events)
    assert stored_events(root / "stop" / "session.jsonl") == events
    assert probe.fsyncs == 1


async def test_new_log_is_created_atomically_with_its_seed(harness: HarnessFactory, root: Path) -> None:
    """A new session's log appears whole (header + seed) by rename; a stale temp file is swept up."""
    folder = root / "seeded"
    folder.mkdir(parents=True)
    (folder / "session.jsonl.tmp-1-dead").write_bytes(b'{"format":1,"id":"seeded"')  # a crashed creation
    seed = [("note/a", {}), ("note/b", {"x": 1})]
    async with harness(batch_delay=NEVER) as ctx:
        assert not await ctx.session_persistence.exists("seeded")
        assert await ctx.session_persistence.list() == ()
        session = await ctx.sessions.create("seeded", seed=seed)
        assert sorted(os.listdir(folder)) == ["lock", "session.jsonl"]
        assert [event.type for event in stored_events(folder / "session.jsonl")] == ["note/a", "note/b"]
        assert session.meta.seed_length == 2


async def test_write_failure_surfaces_on_the_next_flush(
    harness: HarnessFactory, root: Path, probe: FileProbe
) -> None:
    """ENOSPC: the flush raises naming session and file, stored lines stay intact, and a later flush recovers."""
    async with harness(batch_delay=NEVER) as ctx:
        session = await ctx.sessions.create("full")
        path = probe.path = root / "full" / "session.jsonl"
        session.append("note/added", {"index": 0})
        await ctx.sessions.flush(session)
        stored = path.read_bytes()
        probe.write_error = OSError(errno.ENOSPC, "No space left on device")
        for index in range(1, 4):
            session.append("note/added", {"index": index})
        with pytest.raises(SessionWriteError) as caught:
            await ctx.sessions.flush(session)
        message = str(caught.value)
        assert "session 'full'" in message
        assert str(path) in message
        assert "No space left on device" in message
        assert "3 events are not stored yet" in message
        assert isinstance(caught.value, OSError)
        assert caught.value.session_id == "full"
        assert caught.value.path == path
        assert isinstance(caught.value.__cause__, OSError)
        assert path.read_bytes() == stored
        with pytest.raises(SessionWriteError):  # still failing: still reported
            await ctx.sessions.flush(session)
        probe.write_error = None  # space is back
        await ctx.sessions.flush(session)
        assert path.read_bytes().startswith(stored)
        assert stored_events(path) == list(session.events)


async def test_short_write_is_cut_back_to_a_line_boundary(
    harness: HarnessFactory, root: Path, probe: FileProbe
) -> None:
    """A write cut short by the disk filling up leaves no partial line behind once it is retried."""
    async with harness(batch_delay=NEVER) as ctx:
        session = await ctx.sessions.create("short")
        path = probe.path = root / "short" / "session.jsonl"
        await ctx.sessions.flush(session)
        header = path.read_bytes()
        probe.short_write = 30
        probe.write_error = OSError(errno.ENOSPC, "No space left on device")
        session.append("note/added", {"text": "x" * 100})
        session.append("note/added", {"text": "y" * 100})
        with pytest.raises(SessionWriteError, match="2 events are not stored yet"):
            await ctx.sessions.flush(session)
        assert path.read_bytes() == header  # the 30 bytes that got through were cut off
        probe.write_error = None
        await ctx.sessions.flush(session)
        assert stored_events(path) == list(session.events)


async def test_fsync_failure_breaks_the_journal_for_good(
    harness: HarnessFactory, root: Path, probe: FileProbe
) -> None:
    """After a failed fsync nothing is trusted: every later flush raises, even when fsync works again."""
    async with harness(batch_delay=NEVER) as ctx:
        session = await ctx.sessions.create("eio")
        path = probe.path = root / "eio" / "session.jsonl"
        session.append("note/added", {})
        probe.fsync_error = OSError(errno.EIO, "Input/output error")
        with pytest.raises(SessionWriteError, match="fsync failed: Input/output error") as first:
            await ctx.sessions.flush(session)
        assert str(path) in str(first.value)
        probe.fsync_error = None
        session.append("note/added", {})
        with pytest.raises(SessionWriteError, match="no longer persisted"):
            await ctx.sessions.flush(session)


async def test_events_match_line_for_line(harness: HarnessFactory, root: Path) -> None:
    """Every line after the header is exactly SessionEvent.to_json() of the event with that seq."""
    async with harness() as ctx:
        session = await ctx.sessions.create("lines")
        session.append("note/added", {"unicode": "é✓\u2028", "float": 0.1, "neg": -0.0})
        await ctx.sessions.flush(session)
        event = session.events[0]
    line = log_lines(root / "lines" / "session.jsonl")[1]
    assert SessionEvent.from_json(__import__("json").loads(line)) == event


