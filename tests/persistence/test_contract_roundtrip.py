"""Round trips, on every backend: what a live session publishes is what is stored, read without the plugin
(the resume's round trips are cases of ``check_session_store``, ``test_store_kit.py``)."""

from __future__ import annotations

import pytest

from dsh_core.testing._store_cases import every_event_type

from .backends import Backend

pytestmark = pytest.mark.anyio


async def test_every_event_type_round_trips(backend: Backend) -> None:
    """Events of every type, unknown plugin types included, come back from load() exactly."""
    async with backend.harness() as ctx:
        session = await ctx.sessions.create("all", meta={"cwd": "/work", "extra": {"title": "t"}})
        for event_type, data in every_event_type():
            session.append(event_type, data)
        await ctx.sessions.flush(session)
        live = list(session.events)
        meta = session.meta
        messages = list(session.derive_messages())
    stored = backend.stored("all")
    assert [event.to_json() for event in stored] == [event.to_json() for event in live]
    assert [repr(event.data) for event in stored] == [repr(event.data) for event in live]  # 1.0 stays a float, -0.0 too
    async with backend.harness() as ctx:
        loaded = await ctx.session_persistence.load("all")
        assert loaded.events == tuple(live)
        assert [repr(event.data) for event in loaded.events] == [repr(event.data) for event in live]
        assert loaded.meta == meta
        assert loaded.repaired == ()
        session = ctx.sessions.prepare("all", meta=loaded.meta, seed=loaded.events)
        assert list(session.derive_messages()) == messages