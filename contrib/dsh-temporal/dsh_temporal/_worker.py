"""The worker: serve the session workflow and the turn activity on a task queue until told to stop.

Its settings follow SPEC §9.7, so a dead worker's session moves on at once and a cancel reaches
a running activity quickly: the sticky queue's schedule-to-start timeout is at most
min(2 s, heartbeat_timeout) (Temporal's default would add 10 s after a worker dies), the heartbeat
throttle at most 1 s (the default, 0.8 x heartbeat_timeout, would delay a cancel), and on stop a
running turn gets ``heartbeat_timeout`` to finish before it is handed back. Temporal's SDK runs on
asyncio, so a worker (and the harness inside it) runs on asyncio.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import anyio
import attrs
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ._activity import TurnRunner
from ._config import TemporalConfig
from ._reading import EventReader
from ._workflow import SessionWorkflow

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["WorkerSettings", "serve", "worker_settings"]

logger = logging.getLogger("dsh.temporal")

#: modules the workflow sandbox takes as they are: dsh's value classes are deterministic and
#: re-importing them per workflow run would only cost time
PASSTHROUGH = ("dsh_core", "dsh_agent_loop", "dsh_temporal", "attrs", "cattrs", "anyio", "sniffio")


@attrs.frozen
class WorkerSettings:
    """The Temporal worker options a dsh worker uses (see ``worker_settings``)."""

    sticky_queue_schedule_to_start_timeout: timedelta
    max_heartbeat_throttle_interval: timedelta
    default_heartbeat_throttle_interval: timedelta
    graceful_shutdown_timeout: timedelta


def worker_settings(config: TemporalConfig) -> WorkerSettings:
    """The worker options for ``config``, within SPEC §9.7's bounds."""
    heartbeat = config.heartbeat_timeout
    throttle = timedelta(seconds=min(1.0, heartbeat / 3))
    return WorkerSettings(
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=min(2.0, heartbeat)),
        max_heartbeat_throttle_interval=throttle,
        default_heartbeat_throttle_interval=throttle,
        graceful_shutdown_timeout=timedelta(seconds=heartbeat),
    )


def _sandbox() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH))


async def serve(
    ctx: Context,
    config: TemporalConfig,
    stop: anyio.Event,
    *,
    client: Client | None = None,
    identity: str | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve ``config.task_queue`` with the harness ``ctx`` until ``stop`` is set.

    On stop the worker takes no more work, lets a running turn finish within
    ``heartbeat_timeout`` (or hands it back to another worker), and returns.
    """
    if client is None:
        client = await Client.connect(config.address, namespace=config.namespace)
    settings = worker_settings(config)
    warm_queue = f"{config.task_queue}/warm/{uuid.uuid4().hex}"
    runner = TurnRunner(ctx, client, warm_queue=warm_queue)
    reader = EventReader(ctx, runner.live_session)
    unlisten = ctx.register_plugin(reader.listener)
    options: dict[str, Any] = {
        "identity": identity,
        "max_heartbeat_throttle_interval": settings.max_heartbeat_throttle_interval,
        "default_heartbeat_throttle_interval": settings.default_heartbeat_throttle_interval,
        "graceful_shutdown_timeout": settings.graceful_shutdown_timeout,
    }
    shared = Worker(
        client,
        task_queue=config.task_queue,
        workflows=[SessionWorkflow],
        activities=[runner.run_turn, reader.read_events],
        workflow_runner=_sandbox(),
        sticky_queue_schedule_to_start_timeout=settings.sticky_queue_schedule_to_start_timeout,
        **options,
    )
    # This worker's own queue: the next turn of a session whose agent it keeps warm comes here.
    own = Worker(client, task_queue=warm_queue, activities=[runner.run_turn, reader.read_events], **options)
    try:
        async with shared, own, anyio.create_task_group() as tg:
            tg.start_soon(runner.evict_idle)
            logger.info("dsh worker serving task queue %r at %s", config.task_queue, config.address)
            if on_ready is not None:
                on_ready()
            await stop.wait()
            logger.info("dsh worker stopping: no new work; a running turn gets %ss", config.heartbeat_timeout)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await runner.close()
            undone = unlisten()
            if undone is not None:
                await undone
