"""The parts that need no worker process: config, worker settings, message checks, the dev server
binary, and (with an in-process worker) the Update validator and continue-as-new."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import dsh_temporal
import pytest
from dsh_harness_temporal_testkit import KitPlugin
from dsh_persistence_jsonl import PersistencePlugin
from dsh_temporal import TemporalConfig, TemporalPlugin, serve, worker_settings
from dsh_temporal import _reading as reading
from dsh_temporal import _workflow as workflow_module
from dsh_temporal._types import PendingMessage, ReadRequest
from dsh_temporal._workflow import check_message
from dsh_temporal.testing import dev_server_path
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from dsh_core import Harness, SessionEvent

from .temporal_kit import HEARTBEAT, MODEL, Cluster

pytestmark = pytest.mark.anyio


def test_front_is_exact() -> None:
    """Every name of ``__all__`` resolves (they are imported on first use) and no other is public."""
    for name in dsh_temporal.__all__:
        getattr(dsh_temporal, name)
    assert set(dsh_temporal.__all__) == {n for n in vars(dsh_temporal) if not n.startswith("_")} - {"testing"}


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "10", True])
def test_heartbeat_timeout_must_be_positive_seconds(bad: object) -> None:
    with pytest.raises(ValueError, match="heartbeat_timeout"):
        TemporalConfig(heartbeat_timeout=bad)  # type: ignore[arg-type]


def test_config_table_is_checked_at_start() -> None:
    """A bad [plugins.temporal] value is a config error naming the path."""

    async def start() -> None:
        config = {"plugins": {"temporal": {"task_queue": ""}}}
        async with Harness(config=config, plugins=[TemporalPlugin()], autoload=False):
            pass

    with pytest.raises(ValueError, match="task_queue"):
        anyio.run(start)


@pytest.mark.parametrize("heartbeat", [10.0, 1.5, 0.3])
def test_worker_settings_keep_the_spec_bounds(heartbeat: float) -> None:
    settings = worker_settings(TemporalConfig(heartbeat_timeout=heartbeat))
    assert settings.sticky_queue_schedule_to_start_timeout.total_seconds() <= min(2.0, heartbeat)
    assert settings.max_heartbeat_throttle_interval.total_seconds() <= 1.0
    assert settings.graceful_shutdown_timeout.total_seconds() == heartbeat
    assert workflow_module.turn_retry_policy().initial_interval.total_seconds() <= 0.5


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (PendingMessage("a", "shout", [{"type": "text", "text": "hi"}]), "kind"),  # type: ignore[arg-type]
        (PendingMessage("a", "send", [{"type": "tool-call", "id": "c", "name": "x", "arguments": "{}"}]), "content"),
        (PendingMessage("a", "send", [{"type": "text"}]), "text"),
        (PendingMessage("a", "send", [{"type": "text", "text": "hi"}], {"kind": "nobody"}), "source"),
    ],
)
def test_malformed_messages_are_refused(message: PendingMessage, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_message(message)


def test_the_dev_server_comes_from_the_wheel() -> None:
    path = Path(dev_server_path())
    assert path.name == "temporal"
    assert path.is_file()


@asynccontextmanager
async def in_process_worker(cluster: Cluster) -> AsyncIterator[None]:
    """A worker serving ``cluster``'s task queue inside this process (asyncio)."""
    plugin = TemporalPlugin(serving=True)
    config = {
        "plugins": {
            "persistence-jsonl": {"root": str(cluster.root), "batch_delay": 0.01},
            "temporal-testkit": {"enabled": True},
            "temporal": {"address": cluster.address, "task_queue": cluster.task_queue, "heartbeat_timeout": HEARTBEAT},
        }
    }
    async with Harness(config=config, plugins=[PersistencePlugin(), KitPlugin(), plugin], autoload=False) as ctx:
        stop = anyio.Event()
        ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: serve(ctx, plugin.config, stop, on_ready=ready.set))
            await ready.wait()
            try:
                yield
            finally:
                stop.set()


async def test_the_update_validator_refuses_malformed_content(cluster: Cluster) -> None:
    """Content that skips the client's check is refused by the engine-side validator, unqueued."""
    async with cluster.agents() as agents, in_process_worker(cluster):
        session = await agents.create("checked", agent_options=MODEL)
        handle = agents.client.get_workflow_handle("dsh-session/checked")
        bad = PendingMessage("", "send", [{"type": "text", "text": 3}])
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update("send", bad, id="bad-1")
        with pytest.raises(TypeError):
            await session.send([object()])  # type: ignore[list-item]  # refused by the client already
        status = await session.status()
    assert status.pending == 0
    assert status.turns_run == 0


async def test_continue_as_new_keeps_the_session_going(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the history limit the workflow starts a new run with its state; turns go on."""
    monkeypatch.setattr(workflow_module, "HISTORY_LIMIT", 15)
    async with cluster.agents() as agents, in_process_worker(cluster):
        session = await agents.create("long", agent_options=MODEL)
        first_run = (await agents.client.get_workflow_handle("dsh-session/long").describe()).run_id
        texts = [(await session.run(f"say:turn {n}")).text for n in range(4)]
        with anyio.fail_after(30):
            while (await agents.client.get_workflow_handle("dsh-session/long").describe()).run_id == first_run:
                await session.when_idle()  # continue-as-new happens once idle; describe sees the new run
        status = await session.status()
        last = await session.run("say:after the rollover")
    assert texts == [f"turn {n}" for n in range(4)]
    assert status.turns_run == 4
    assert last.text == "after the rollover"


async def test_a_turn_that_fails_for_good_is_reported_not_retried_forever(cluster: Cluster) -> None:
    """A worker without a session store fails the turn non-retryably: run() says so, nothing stays pending."""
    plugin = TemporalPlugin(serving=True)
    config = {
        "plugins": {
            "temporal-testkit": {"enabled": True, "announce": False},
            "temporal": {"address": cluster.address, "task_queue": cluster.task_queue, "heartbeat_timeout": HEARTBEAT},
        }
    }
    async with cluster.agents() as agents, Harness(config=config, plugins=[KitPlugin(), plugin], autoload=False) as ctx:
        stop, ready = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: serve(ctx, plugin.config, stop, on_ready=ready.set))
            await ready.wait()
            session = await agents.create("no-store", agent_options=MODEL)
            with anyio.fail_after(30):
                outcome = await session.run("say:never")
                await session.when_idle()
            status = await session.status()
            stop.set()
    assert outcome.kind == "error"
    assert "session store" in outcome.reason["failure"]["message"]
    assert (status.pending, status.running) == (0, False)


def _events(count: int, text: str = "x") -> list[SessionEvent]:
    return [SessionEvent("test/big", seq, 1.0, {"text": text}) for seq in range(count)]


def test_a_read_answers_at_most_its_limit_and_about_the_byte_budget() -> None:
    """A batch stops at ``limit`` events, and once ``MAX_BATCH_BYTES`` of JSON are in it."""
    request = ReadRequest("s", -1, 0.0, limit=5)
    assert [e["seq"] for e in reading._batch(_events(9), request)] == [0, 1, 2, 3, 4]
    big = _events(20, "y" * (reading.MAX_BATCH_BYTES // 8))
    batch = reading._batch(big, ReadRequest("s", -1, 0.0))
    assert 1 < len(batch) < 20
    assert sum(len(json.dumps(e, separators=(",", ":"))) for e in batch) <= reading.MAX_BATCH_BYTES


def test_an_event_too_large_for_the_engine_is_refused_naming_it() -> None:
    """An event past the engine's payload limit fails the read for good, saying how to read it instead."""
    huge = _events(1, "z" * (reading.MAX_EVENT_BYTES + 1))
    with pytest.raises(ApplicationError, match=r"event 0 \(test/big\).*persistence=") as caught:
        reading._batch(huge, ReadRequest("s", -1, 0.0))
    assert caught.value.non_retryable
    before = [*_events(1), SessionEvent("test/big", 1, 1.0, {"text": "z" * (reading.MAX_EVENT_BYTES + 1)})]
    assert [e["seq"] for e in reading._batch(before, ReadRequest("s", -1, 0.0))] == [0]  # the rest first


def test_stored_events_leave_out_the_repair_of_an_open_turn() -> None:
    class Loaded:
        events = tuple(_events(5))
        repaired = tuple(_events(5)[3:])

    assert [e.seq for e in reading.stored_events(Loaded())] == [0, 1, 2]
