"""The write path, on every backend: batching windows, flush durability, conflicts, many sessions at once."""

from __future__ import annotations

import pytest

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