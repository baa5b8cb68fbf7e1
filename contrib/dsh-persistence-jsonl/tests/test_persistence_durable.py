"""SPEC §9.1: inbox records skip the batch window. They are written inside ``send()`` and fsynced at once,
whatever ``batch_delay`` is; ``flush`` after a send returns with the record on disk."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from dsh_core.testing import ScriptedModel

from .persistence_kit import MODEL, FileProbe, HarnessFactory, stored_events

pytestmark = pytest.mark.anyio

#: a batch window that never closes during a test: only the urgent path can write or fsync
NEVER = 3600.0


class Fsyncs:
    """An ``anyio.Event`` per fsync of the probed file, set from the worker thread that ran it."""

    def __init__(self, probe: FileProbe) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self._waiting: list[tuple[int, anyio.Event]] = []
        probe.on_fsync = self._seen

    def _seen(self) -> None:
        """Runs in the anyio worker thread that ran the fsync, so it can reach the event loop."""
        with self._lock:
            self.count += 1
            ready = [event for target, event in self._waiting if self.count >= target]
        for event in ready:
            anyio.from_thread.run_sync(event.set)

    async def reach(self, count: int) -> None:
        """Wait until the file has been fsynced ``count`` times in all."""
        event = anyio.Event()
        with self._lock:
            if self.count >= count:
                return
            self._waiting.append((count, event))
        with anyio.fail_after(10):
            await event.wait()


def inbox_records(path: Path) -> list[tuple[str, object]]:
    return [
        (event.type, event.data.get("id") or event.data.get("ids"))
        for event in stored_events(path)
        if event.type.startswith("inbox/")
    ]


async def test_send_is_written_inside_send_and_fsynced_without_a_flush(
    harness: HarnessFactory, root: Path, probe: FileProbe
) -> None:
    """send() returns with inbox/queued in the file; the writer fsyncs it at once, though the window never closes."""
    model = ScriptedModel([ScriptedModel.hang()])
    async with harness(model, batch_delay=NEVER) as ctx:
        handle = await ctx.agents.create("s", agent_options=MODEL)
        probe.path = root / "s" / "session.jsonl"
        fsyncs = Fsyncs(probe)
        before = probe.writes
        queued_id = handle.agent.send("hello")
        assert probe.writes == before + 1  # written by the listener, before send() returned
        assert inbox_records(probe.path) == [("inbox/queued", queued_id)]
        await fsyncs.reach(1)  # with a window of an hour, only the urgent path fsyncs
        await handle.dispose()


async def test_flush_after_send_returns_with_the_record_on_disk(
    harness: HarnessFactory, root: Path, probe: FileProbe
) -> None:
    """flush() right after send() returns only once the record is fsynced (the urgent fsync or its own)."""
    model = ScriptedModel([ScriptedModel.hang()])
    async with harness(model, batch_delay=NEVER) as ctx:
        handle = await ctx.agents.create("s", agent_options=MODEL)
        agent = handle.agent
        probe.path = root / "s" / "session.jsonl"
        fsyncs = Fsyncs(probe)
        queued_id = agent.send("hello")
        await ctx.sessions.flush(agent.session)
        assert fsyncs.count >= 1
        assert inbox_records(probe.path) == [("inbox/queued", queued_id)]
        await handle.dispose()


async def test_steer_cancel_and_idle_inject_skip_the_window(
    harness: HarnessFactory, root: Path, probe: FileProbe
) -> None:
    """A steer while running, a cancel's inbox/cleared and an idle inject are each written at once and fsynced."""
    model = ScriptedModel([ScriptedModel.hang()])
    async with harness(model, batch_delay=NEVER) as ctx:
        handle = await ctx.agents.create("s", agent_options=MODEL)
        agent = handle.agent
        probe.path = root / "s" / "session.jsonl"
        fsyncs = Fsyncs(probe)
        first = agent.send("work")
        await fsyncs.reach(1)
        while agent.status != "running":
            await anyio.wait_all_tasks_blocked()
        steered = agent.steer("and hurry")
        assert inbox_records(probe.path)[-1] == ("inbox/queued", steered)
        synced = fsyncs.count
        await fsyncs.reach(synced + 1)
        queued = agent.send("later")
        agent.cancel()
        records = inbox_records(probe.path)
        assert records[-2] == ("inbox/queued", queued)
        assert records[-1][0] == "inbox/cleared"
        assert set(records[-1][1]) >= {steered, queued}  # type: ignore[arg-type]
        await fsyncs.reach(fsyncs.count + 1)
        await agent.when_idle()
        writes = probe.writes
        agent.inject("the build is green")
        assert probe.writes == writes + 1
        assert stored_events(probe.path)[-1].type == "context/message"
        await fsyncs.reach(fsyncs.count + 1)
        assert first in {record[1] for record in inbox_records(probe.path)}
        await handle.dispose()


async def test_other_events_still_wait_for_the_window(
    harness: HarnessFactory, root: Path, probe: FileProbe
) -> None:
    """Ordinary events are buffered; an inbox record carries them to the file with it, in log order."""
    async with harness(batch_delay=NEVER) as ctx:
        session = await ctx.sessions.create("s")
        probe.path = root / "s" / "session.jsonl"
        for index in range(5):
            session.append("note/added", {"index": index})
        assert probe.writes == 0
        session.append("turn/start", {"turn": 1})
        session.append(
            "context/message",
            {"message": {"role": "user", "id": "m", "content": [], "source": {"kind": "context"}}},
        )
        assert probe.writes == 0  # context inside a turn rides with the step's batch
        session.append("inbox/cleared", {"ids": ["q1"]})
        assert probe.writes == 1
        assert stored_events(probe.path) == list(session.events)
