"""Many owners of one file: 50 sessions written at once from three processes, SIGKILLs in the middle of
writes, and a stale owner fenced off.

The children are real processes on the same database file; each says on stdout what it did (``FLUSHED
<session> <count>`` once a flush returned) and is SIGKILLed while it writes. After every kill the file
is read with plain ``sqlite3``: contiguous seqs, every flushed event there, the session's row counting
exactly its event rows (a commit is all or nothing), and the session loadable at once.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from dsh_core import SessionFencedError, Text, UserMessage

from .conftest import HarnessFactory

pytestmark = pytest.mark.anyio

#: a child: ``sessions`` sessions of its own (``<prefix>-<n>``), each filled by a task of its own with
#: ``events`` events, flushed every 25; says ``FLUSHED <id> <count>`` after each flush, ``DONE`` at the end
#: (``events`` 0: forever, until killed)
WRITER = textwrap.dedent(
    """
    import sys
    import anyio
    from dsh_core import Harness
    from dsh_persistence_sqlite import PersistencePlugin

    path, prefix, sessions, events, backend = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

    async def fill(ctx, session_id: str) -> None:
        session = await ctx.sessions.create(session_id)
        index = 0
        while events == 0 or index < events:
            session.append("note/added", {"index": index, "text": "x" * (index % 50)})
            index += 1
            if index % 25 == 0:
                await ctx.sessions.flush(session)
                print(f"FLUSHED {session_id} {len(session.events)}", flush=True)
            if index % 5 == 0:
                await anyio.lowlevel.checkpoint()

    async def main() -> None:
        config = {"plugins": {"persistence-sqlite": {"path": path, "batch_delay": 0.01}}}
        async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:
            async with anyio.create_task_group() as tg:
                for number in range(sessions):
                    tg.start_soon(fill, ctx, f"{prefix}-{number}")
        print("DONE", flush=True)

    anyio.run(main, backend=backend)
    """
)


def stored_rows(database: Path) -> dict[str, tuple[int, list[int]]]:
    """Per session: the count its ``dsh_sessions`` row holds, and the seqs of its event rows (plain sqlite3)."""
    with sqlite3.connect(database) as conn:
        counts = dict(conn.execute("SELECT id, events FROM dsh_sessions").fetchall())
        seqs: dict[str, list[int]] = {session_id: [] for session_id in counts}
        for session_id, seq in conn.execute("SELECT session_id, seq FROM dsh_events ORDER BY session_id, seq"):
            seqs.setdefault(session_id, []).append(seq)
    return {session_id: (counts.get(session_id, -1), seqs[session_id]) for session_id in seqs}


async def start_writer(database: Path, prefix: str, sessions: int, events: int, backend: str) -> anyio.abc.Process:
    command = [sys.executable, "-c", WRITER, str(database), prefix, str(sessions), str(events), backend]
    return await anyio.open_process(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=None)


async def test_fifty_sessions_from_three_processes_at_once(
    harness: HarnessFactory, database: Path, anyio_backend: str
) -> None:
    """Two children with 20 sessions each and this process with 10 write one file at once: every session
    stores exactly its own events, contiguous, and the listing counts them."""
    async with harness() as ctx:
        await ctx.sessions.create("warm-up")  # the schema exists before the children race to it
    children = [await start_writer(database, prefix, 20, 300, anyio_backend) for prefix in ("a", "b")]
    try:
        async with harness(batch_delay=0.01) as ctx:
            mine = [await ctx.sessions.create(f"c-{number}") for number in range(10)]

            async def fill(number: int) -> None:
                session = mine[number]
                for index in range(300):
                    session.append("note/added", {"index": index, "text": "x" * (index % 50)})
                    if index % 5 == 0:
                        await anyio.lowlevel.checkpoint()
                await ctx.sessions.flush(session)

            async with anyio.create_task_group() as tg:
                for number in range(10):
                    tg.start_soon(fill, number)
            for child in children:
                assert child.stdout is not None
                lines = BufferedByteReceiveStream(child.stdout)
                with anyio.fail_after(120):
                    while (await lines.receive_until(b"\n", 4096)) != b"DONE":
                        pass
                assert await child.wait() == 0
            listed = {info.id: info.events for info in await ctx.session_persistence.list()}
    finally:
        for child in children:
            if child.returncode is None:
                child.kill()
            await child.aclose()
    expected = {f"{prefix}-{number}" for prefix, count in (("a", 20), ("b", 20), ("c", 10)) for number in range(count)}
    stored = stored_rows(database)
    assert set(stored) == expected | {"warm-up"}
    for session_id in expected:
        assert stored[session_id] == (300, list(range(300))), session_id
        assert listed[session_id] == 300


async def test_sigkill_while_writing_loses_nothing_flushed_and_frees_the_sessions(
    harness: HarnessFactory, database: Path, anyio_backend: str
) -> None:
    """Ten times: a child writing five sessions is SIGKILLed mid-stream. Every flushed event is stored, seqs are
    contiguous, each row counts exactly its event rows (no half commit), and each session loads at once."""
    async with harness() as ctx:
        await ctx.sessions.create("warm-up")
    for trial in range(10):
        prefix = f"k{trial}"
        child = await start_writer(database, prefix, 5, 0, anyio_backend)
        flushed: dict[str, int] = {}
        try:
            assert child.stdout is not None
            lines = BufferedByteReceiveStream(child.stdout)
            with anyio.fail_after(60):
                while len(flushed) < 5 or min(flushed.values()) < 25 * (trial % 4 + 1):
                    kind, session_id, count = (await lines.receive_until(b"\n", 4096)).decode().split()
                    assert kind == "FLUSHED"
                    flushed[session_id] = int(count)
            child.kill()
            assert await child.wait() == -9
            rest = b"".join([chunk async for chunk in lines])  # what it said before it died
            for line in rest.decode().splitlines():
                if line.count(" ") == 2:  # a last line the kill cut short says nothing
                    _, session_id, count = line.split()
                    flushed[session_id] = max(flushed[session_id], int(count))
        finally:
            if child.returncode is None:
                child.kill()
            await child.aclose()
        stored = stored_rows(database)
        async with harness() as ctx:
            for session_id, count in flushed.items():
                row_count, seqs = stored[session_id]
                assert seqs == list(range(len(seqs))), session_id
                assert row_count == len(seqs), session_id  # the row and the events commit together
                assert len(seqs) >= count, (session_id, len(seqs), count)
                loaded = await ctx.session_persistence.load(session_id)  # free at once: the kernel dropped the lock
                assert len(loaded.events) == len(seqs)


async def test_a_stale_owner_is_fenced(harness: HarnessFactory, database: Path) -> None:
    """Once another owner took the session over (a newer epoch), this one writes nothing more: its flushes
    raise SessionFencedError naming the session, again and again, and the stored log is the new owner's."""
    prompt = UserMessage(content=(Text("hi"),))
    async with harness() as ctx:
        session = await ctx.sessions.create("fenced")
        session.append("note/mine", {})
        await ctx.sessions.flush(session)
        with sqlite3.connect(database) as conn:  # what a takeover does: a new epoch, a new holder
            conn.execute("UPDATE dsh_sessions SET epoch = epoch + 1, holder_pid = 1 WHERE id = 'fenced'")
        session.append("inbox/queued", {"id": "q1", "kind": "send", "message": prompt.to_json()})
        for _ in range(2):
            with pytest.raises(SessionFencedError, match=r"session 'fenced'.*lost it") as caught:
                await ctx.sessions.flush(session)
            assert (caught.value.session_id, caught.value.pid) == ("fenced", 1)
    assert [seqs for _, seqs in stored_rows(database).values()] == [[0]]


async def test_listing_and_title_come_from_the_session_row(harness: HarnessFactory, database: Path) -> None:
    """The row other tools query holds the counts and the title; the meta is the session's JSON."""
    prompt = UserMessage(content=(Text("What is  the\nanswer?"),))
    async with harness() as ctx:
        session = await ctx.sessions.create("row", meta={"cwd": "/work"})
        session.append("turn/start", {"turn": 1})
        session.append("user/message", {"message": prompt.to_json()})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await ctx.sessions.flush(session)
    with sqlite3.connect(database) as conn:
        row = conn.execute("SELECT events, turns, title, cwd, meta FROM dsh_sessions WHERE id = 'row'").fetchone()
    assert row[:4] == (3, 1, "What is the answer?", "/work")
    assert json.loads(row[4])["cwd"] == "/work"
