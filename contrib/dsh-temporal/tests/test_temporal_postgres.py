"""The same remote sessions with PostgreSQL as the shared store (SPEC §9.6): the store the
workers of a real deployment share across hosts."""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from dsh_temporal.testing import DevServer

from .temporal_kit import HEARTBEAT, MODEL, Cluster, log_until, of

pytestmark = pytest.mark.anyio


@pytest.fixture
def pg_cluster(dev_server: DevServer, tmp_path: Path, postgres_server: Any, postgres_schema: str) -> Cluster:
    store = {"persistence-postgres": {"dsn": postgres_server.dsn, "schema": postgres_schema, "batch_delay": 0.02}}
    return Cluster(dev_server.address, tmp_path, task_queue=f"dsh-pg-{uuid.uuid4().hex[:8]}", store=store)


async def test_a_remote_turn_with_a_postgres_store(pg_cluster: Cluster) -> None:
    async with pg_cluster.worker(), pg_cluster.agents() as agents:
        session = await agents.create("pg-e2e", agent_options=MODEL)
        queued_id = await session.send("say:stored in postgres")
        outcome = await session.run('tool:echo {"text": "hi"}')
        events = await log_until(agents, "pg-e2e", lambda e: e.type == "turn/end" and e.data["turn"] == 2)
    assert of(events, "user/message")[0].data["queued_id"] == queued_id
    assert outcome.text == "done: hi"
    assert [e.seq for e in events] == list(range(len(events)))


@pytest.mark.timeout(120)  # three kill rounds, each waiting out a heartbeat timeout on purpose
async def test_a_killed_worker_hands_over_through_postgres(pg_cluster: Cluster) -> None:
    """The dead worker's session lock goes with its connection; the next worker resumes at once."""
    async with pg_cluster.agents() as agents, AsyncExitStack() as workers:
        session = await agents.create("pg-doomed", agent_options=MODEL)
        holder = await workers.enter_async_context(pg_cluster.worker())
        for round_ in range(3):
            await session.send(f'tool:hold {{"label": "pg-{round_}"}}')
            await holder.wait_for(f"HOLDING pg-doomed pg-{round_}")
            successor = await workers.enter_async_context(pg_cluster.worker())
            holder.kill()
            with anyio.fail_after(HEARTBEAT + 5):
                await session.when_idle()
            holder = successor
        events = await log_until(agents, "pg-doomed", lambda e: e.type == "turn/end" and e.data["turn"] == 6)
    assert [e.data["error_code"] for e in of(events, "tool/result")] == ["TOOL_OUTCOME_UNKNOWN"] * 3
    assert [e.data["reason"]["kind"] for e in of(events, "turn/end")] == ["interrupted", "completed"] * 3
    assert [e.seq for e in events] == list(range(len(events)))
