"""The write path, on every backend: batching windows, flush durability, conflicts, many sessions at once."""

from __future__ import annotations

import anyio
import pytest

from dsh_core import AgentOptions, Session
from dsh_core.testing import ScriptedModel

from .backends import Backend

pytestmark = pytest.mark.anyio

#: long enough that the background window never closes during a test: only flush() writes
NEVER = 3600.0


async def test_flush_makes_everything_published_durable(backend: Backend) -> None:
    """With the window never closing, nothing is stored before flush() and everything after it."""
    async with backend.harness(batch_delay=NEVER) as ctx:
        session = await ctx.sessions.create("batch")
        await ctx.sessions.flush(session)
        for index in range(1000):
            session.append("note/added", {"index": index})
        assert backend.stored("batch") == []  # buffered: the listener does no I/O
        await ctx.sessions.flush(session)
        assert backend.stored("batch") == list(session.events)


async def test_stop_writes_what_is_pending(backend: Backend) -> None:
    """Stopping the harness commits every followed session, with no flush asked for."""
    async with backend.harness(batch_delay=NEVER) as ctx:
        session = await ctx.sessions.create("stop")
        for index in range(10):
            session.append("note/added", {"index": index})
        events = list(session.events)
    assert backend.stored("stop") == events


async def test_new_session_is_stored_with_its_seed(backend: Backend) -> None:
    """A new session's seed is stored when it goes live, before any flush."""
    seed = [("note/a", {}), ("note/b", {"x": 1})]
    async with backend.harness(batch_delay=NEVER) as ctx:
        assert not await ctx.session_persistence.exists("seeded")
        assert await ctx.session_persistence.list() == ()
        session = await ctx.sessions.create("seeded", seed=seed)
        assert [event.type for event in backend.stored("seeded")] == ["note/a", "note/b"]
        assert session.meta.seed_length == 2


async def test_flush_of_a_session_that_cannot_be_persisted_says_why(backend: Backend) -> None:
    """A fresh session created under the id of a stored one is refused: its flushes name the conflict."""
    async with backend.harness() as ctx:
        session = await ctx.sessions.create("taken")
        session.append("note/added", {})
    async with backend.harness() as ctx:
        session = await ctx.sessions.create("taken")  # not a resume: it does not continue the stored log
        session.append("note/other", {})
        with pytest.raises(
            backend.errors.SessionConflictError, match=r"Resume the stored session with ctx\.agents\.resume"
        ):
            await ctx.sessions.flush(session)
    assert [event.type for event in backend.stored("taken")] == ["note/added"]


async def test_many_sessions_written_concurrently(backend: Backend) -> None:
    """Twenty sessions appended to from twenty tasks each store exactly their own events."""
    async with backend.harness(batch_delay=0.01) as ctx:
        sessions = [await ctx.sessions.create(f"s{index}") for index in range(20)]

        async def fill(session: Session) -> None:
            for index in range(200):
                session.append("note/added", {"index": index, "id": session.id})
                if index % 7 == 0:
                    await anyio.lowlevel.checkpoint()
            await ctx.sessions.flush(session)

        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(fill, session)
        expected = {session.id: list(session.events) for session in sessions}
    for session_id, events in expected.items():
        assert backend.stored(session_id) == events


async def test_disposed_session_releases_it(backend: Backend) -> None:
    """When a session leaves the store it is complete, and another harness can take it over at once."""
    async with backend.harness(batch_delay=NEVER) as first, backend.harness() as second:
        session = first.sessions.prepare("handover")
        detach = await first.sessions.enter(session)
        session.append("note/added", {})
        await detach()
        loaded = await second.session_persistence.load("handover")
        assert [event.type for event in loaded.events] == ["note/added"]


async def test_an_agent_whose_session_cannot_be_persisted_is_refused(backend: Backend) -> None:
    """Creating an agent over a stored session's id fails at create (agent/created veto), not silently."""
    async with backend.harness(ScriptedModel(["stored answer"])) as ctx:
        options = AgentOptions(model="scripted/x")
        async with await ctx.agents.create("taken", agent_options=options) as handle:
            await handle.agent.run("remember this")
    async with backend.harness() as ctx:
        with pytest.raises(backend.errors.SessionConflictError, match=r"ctx\.agents\.resume"):
            await ctx.agents.create("taken", agent_options=AgentOptions(model="x/y"))
        assert ctx.agents.get("taken") is None
