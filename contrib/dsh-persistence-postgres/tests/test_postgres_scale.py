"""Many sessions at once, a server connection that drops, a server that stops, and the §9.1 inbox write that
skips the window (committed by the store's own threads)."""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import threading
from typing import Any

import anyio
import anyio.to_thread
import pytest
from dsh_persistence_postgres import PersistencePlugin, SessionWriteError
from dsh_persistence_postgres._database import Database as StoreDatabase
from dsh_persistence_postgres.testing import PostgresServer, find_bindir, temporary_postgres

from dsh_core import AgentOptions, Harness, Text, UserMessage
from dsh_core.testing import ScriptedModel

from .postgres_kit import Database, HarnessFactory

#: the name of every thread of the urgent writer starts with this
URGENT_THREADS = "dsh-persistence-postgres-urgent"

pytestmark = pytest.mark.anyio


async def test_a_hundred_agents_append_concurrently(harness: HarnessFactory, db: Database) -> None:
    """100 agents running turns at once all store their whole logs, with no error and no gap."""
    model = ScriptedModel([ScriptedModel.text(f"answer {index}") for index in range(300)])
    logs: dict[str, int] = {}
    async with harness(model, batch_delay=0.01) as ctx:

        async def converse(index: int) -> None:
            async with await ctx.agents.create(f"many-{index}", agent_options=AgentOptions(model="scripted/x")) as handle:
                for turn in range(3):
                    outcome = await handle.agent.run(f"prompt {turn}")
                    assert outcome.kind == "completed"
                logs[handle.agent.id] = len(handle.agent.session.events)

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for index in range(100):
                    tg.start_soon(converse, index)
    stored = dict(db.query("SELECT session_id, count(*) FROM {s}.dsh_events GROUP BY session_id"))
    assert stored == logs
    assert len(stored) == 100
    gaps = db.query(
        "SELECT session_id FROM {s}.dsh_events GROUP BY session_id HAVING max(seq) + 1 <> count(*)"
    )
    assert gaps == []
    assert db.query("SELECT count(*) FROM {s}.dsh_sessions WHERE turns = 3 AND events > 0") == [(100,)]


async def test_a_dropped_connection_fails_the_flush_and_the_next_one_recovers(
    harness: HarnessFactory, db: Database
) -> None:
    """The server ends every pool connection: the flush says so, keeps the events, and a later flush stores them."""
    async with harness(batch_delay=3600, table={"connections": 1}) as ctx:
        session = await ctx.sessions.create("dropped")
        await ctx.sessions.flush(session)
        store = ctx.session_persistence
        holders = set(db.lock_holders("dropped"))
        db.query(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE usename = current_user AND pid <> pg_backend_pid() AND NOT pid = ANY(%s)",
            list(holders),
        )
        session.append("note/a", {})
        with pytest.raises(SessionWriteError, match=r"1 events are not stored yet") as caught:
            await ctx.sessions.flush(session)
        assert store.server in str(caught.value)
        session.append("note/b", {})
        await ctx.sessions.flush(session)  # the pool reconnected
    rows = db.query("SELECT seq, type FROM {s}.dsh_events WHERE session_id = 'dropped' ORDER BY seq")
    assert rows == [(0, "note/a"), (1, "note/b")]


async def test_inbox_records_are_committed_without_waiting_for_the_window(
    harness: HarnessFactory, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """inbox/queued is committed at once even with a window that never closes (§9.1)."""
    committed = threading.Event()
    real_append = StoreDatabase.append

    def append(self: StoreDatabase, *args: object, **kwargs: object) -> bool:
        result = real_append(self, *args, **kwargs)  # type: ignore[arg-type]
        committed.set()
        return result

    monkeypatch.setattr(StoreDatabase, "append", append)
    prompt = UserMessage(content=(Text("keep me"),))
    async with harness(batch_delay=3600) as ctx:
        session = await ctx.sessions.create("urgent")
        session.append("note/before", {})
        session.append("inbox/queued", {"id": "q1", "kind": "send", "message": prompt.to_json()})
        assert await anyio.to_thread.run_sync(committed.wait, 10)
        rows = db.query("SELECT type FROM {s}.dsh_events WHERE session_id = 'urgent' ORDER BY seq")
        assert rows == [("note/before",), ("inbox/queued",)]


async def test_context_injected_while_idle_is_committed_at_once(
    harness: HarnessFactory, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """inject() on an idle agent rides with no turn: committed without waiting for the window (§9.1)."""
    committed = threading.Event()
    real_append = StoreDatabase.append

    def append(self: StoreDatabase, *args: object, **kwargs: object) -> bool:
        result = real_append(self, *args, **kwargs)  # type: ignore[arg-type]
        committed.set()
        return result

    async with harness(batch_delay=3600) as ctx:
        async with await ctx.agents.create("idle", agent_options=AgentOptions(model="scripted/x")) as handle:
            monkeypatch.setattr(StoreDatabase, "append", append)
            handle.agent.inject("the build is green")
            assert await anyio.to_thread.run_sync(committed.wait, 10)
            rows = db.query("SELECT type FROM {s}.dsh_events WHERE session_id = 'idle' ORDER BY seq")
            assert rows[-1] == ("context/message",)


async def test_window_commits_skip_the_disk_wait_and_flush_waits_for_them(
    harness: HarnessFactory, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch window's commit does not wait for the WAL fsync; a flush does (with a sync point when the
    window left nothing pending), and so does the commit of an urgent record, whoever makes it (§9.1)."""
    calls: list[str] = []
    committed = threading.Event()
    real_append, real_sync_point = StoreDatabase.append, StoreDatabase.sync_point

    def append(self: StoreDatabase, *args: object, **kwargs: object) -> bool:
        result = real_append(self, *args, **kwargs)  # type: ignore[arg-type]
        calls.append("durable" if kwargs.get("durable", True) else "relaxed")
        committed.set()
        return result

    def sync_point(self: StoreDatabase) -> None:
        real_sync_point(self)
        calls.append("sync point")

    monkeypatch.setattr(StoreDatabase, "append", append)
    monkeypatch.setattr(StoreDatabase, "sync_point", sync_point)
    prompt = UserMessage(content=(Text("keep me"),))
    async with harness(batch_delay=0.01) as ctx:
        session = await ctx.sessions.create("relaxed")
        await ctx.sessions.flush(session)
        calls.clear()
        session.append("note/window", {})
        assert await anyio.to_thread.run_sync(committed.wait, 10)
        assert calls == ["relaxed"]
        await ctx.sessions.flush(session)
        assert calls == ["relaxed", "sync point"]
        await ctx.sessions.flush(session)  # durable already: nothing to do
        session.append("note/flushed", {})
        await ctx.sessions.flush(session)
        assert calls == ["relaxed", "sync point", "durable"]
        committed.clear()
        session.append("inbox/queued", {"id": "q1", "kind": "send", "message": prompt.to_json()})
        assert await anyio.to_thread.run_sync(committed.wait, 10)
        assert calls[-1] == "durable"
    rows = db.query("SELECT type FROM {s}.dsh_events WHERE session_id = 'relaxed' ORDER BY seq")
    assert rows == [("note/window",), ("note/flushed",), ("inbox/queued",)]


async def test_urgent_records_are_committed_by_the_stores_threads_which_end_with_it(
    harness: HarnessFactory, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An inbox record is committed by a thread the store owns, not by a task of the event loop (so a busy
    loop cannot hold it back, §9.1); stopping the plugin joins those threads."""
    committers: list[str] = []
    committed = threading.Event()
    real_append = StoreDatabase.append

    def append(self: StoreDatabase, *args: object, **kwargs: object) -> bool:
        result = real_append(self, *args, **kwargs)  # type: ignore[arg-type]
        committers.append(threading.current_thread().name)
        committed.set()
        return result

    monkeypatch.setattr(StoreDatabase, "append", append)
    prompt = UserMessage(content=(Text("keep me"),))
    async with harness(batch_delay=3600) as ctx:
        session = await ctx.sessions.create("threads")
        session.append("inbox/queued", {"id": "q1", "kind": "send", "message": prompt.to_json()})
        assert await anyio.to_thread.run_sync(committed.wait, 10)
        assert committers == [committers[0]]
        assert committers[0].startswith(URGENT_THREADS)
        urgent = [thread for thread in threading.enumerate() if thread.name == committers[0]]
        assert len(urgent) == 1
    assert not urgent[0].is_alive()
    assert db.query("SELECT type FROM {s}.dsh_events WHERE session_id = 'threads' ORDER BY seq") == [("inbox/queued",)]


async def test_an_urgent_commit_never_overtakes_a_window_commit_under_way(
    harness: HarnessFactory, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a batch window's commit is under way, an urgent record published meanwhile waits for it, then
    is committed on its own (durably), after it: a session's commits never overlap or reorder."""
    calls: list[tuple[str, int, int]] = []
    entered, release, second = threading.Event(), threading.Event(), threading.Event()
    real_append = StoreDatabase.append

    def append(self: StoreDatabase, session_id: str, epoch: int, first: int, events: list[object], **kwargs: object) -> bool:
        if not entered.is_set():
            entered.set()
            assert release.wait(10)
        result = real_append(self, session_id, epoch, first, events, **kwargs)  # type: ignore[arg-type]
        calls.append(("durable" if kwargs.get("durable", True) else "relaxed", first, len(events)))
        if len(calls) == 2:
            second.set()
        return result

    prompt = UserMessage(content=(Text("keep me"),))
    async with harness(batch_delay=0.01) as ctx:
        session = await ctx.sessions.create("ordered")
        await ctx.sessions.flush(session)
        monkeypatch.setattr(StoreDatabase, "append", append)
        session.append("note/window", {})
        assert await anyio.to_thread.run_sync(entered.wait, 10)  # the window's commit is under way
        session.append("inbox/queued", {"id": "q1", "kind": "send", "message": prompt.to_json()})
        release.set()
        assert await anyio.to_thread.run_sync(second.wait, 10)
        assert calls == [("relaxed", 0, 1), ("durable", 1, 1)]
    rows = db.query("SELECT seq, type FROM {s}.dsh_events WHERE session_id = 'ordered' ORDER BY seq")
    assert rows == [(0, "note/window"), (1, "inbox/queued")]


def stop_server(server: PostgresServer) -> None:
    """Stop ``server`` at once (``pg_ctl stop -m immediate``, as the cluster's owner), waiting for it to end."""
    owner = pwd.getpwuid(server.data_dir.stat().st_uid)
    as_owner: dict[str, Any] = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []} if os.geteuid() == 0 else {}
    command = [str(find_bindir() / "pg_ctl"), "stop", "-D", str(server.data_dir), "-m", "immediate", "-w", "-t", "60"]
    subprocess.run(command, capture_output=True, check=True, **as_owner)


async def test_with_the_server_gone_stopping_returns_and_leaves_no_thread(caplog: pytest.LogCaptureFixture) -> None:
    """The server stops for good while the urgent commit of a send is under way: stopping the plugin still
    returns (each statement gives up after the connect timeout), says what was not stored, and joins the
    urgent writer's threads."""
    with temporary_postgres() as server:
        config = {"plugins": {"persistence-postgres": {"dsn": server.dsn, "batch_delay": 3600}}}
        with anyio.fail_after(60):
            async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:
                ctx.llm.register_adapter("scripted", ScriptedModel())
                handle = await ctx.agents.create("gone", agent_options=AgentOptions(model="scripted/x"))
                agent = handle.agent
                agent.send("first")
                await ctx.sessions.flush(agent.session)  # committed by the urgent writer's thread
                urgent = [thread for thread in threading.enumerate() if thread.name.startswith(URGENT_THREADS)]
                assert urgent
                await anyio.to_thread.run_sync(stop_server, server)
                agent.send("second")  # its commit waits for a connection that never comes
    assert [thread for thread in urgent if thread.is_alive()] == []
    assert any(re.match(r"session 'gone': closing with \d+ events not stored", r.getMessage()) for r in caplog.records)
