"""What a shared database costs: persistence-postgres against persistence-jsonl and the in-memory harness.

Prints, from one run on one machine: the loop's cost per text step (turns of 100 steps) in memory,
with JSONL and with PostgreSQL, as ratios to in-memory (budget: PostgreSQL <= x1.5, on the wall
clock, since a turn waits for its flush; this process's CPU time beside it), once with a model
that never yields (the worst case: no other task or thread runs during the turn) and once with one
that yields before each chunk, as every real adapter does; the resume
of a 100k-event session with each backend (budget: PostgreSQL <= 2x JSONL); and, for the choice
of driver, one fenced 10-event append through psycopg's sync API from a worker thread
(``anyio.to_thread``, what the plugin does: it works on asyncio and trio) against psycopg's
asyncio-only ``AsyncConnection``.

The server is a throwaway cluster (``dsh_persistence_postgres.testing``) on a Unix socket, with
PostgreSQL's default durability (``fsync``, ``synchronous_commit`` on); the JSONL store lives in
``$TMPDIR``. ``benchmarks/persistence.py`` prints these figures too, after its own. ``--against DIR``
compares the per-step cost with another checkout's (``git worktree add /tmp/base main``), through
``_compare``: alternating child processes, each on a server of its own, best of ``--rounds``. Figures only, never asserted.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import sniffio
from _compare import parse_args, run_against
from dsh_persistence_jsonl import PersistencePlugin as JsonlPlugin
from dsh_persistence_postgres import PersistencePlugin as PostgresPlugin
from dsh_persistence_postgres._schema import Statements, ensure_schema
from dsh_persistence_postgres.testing import temporary_postgres

from dsh_core import AgentOptions, ContinuationDecision, Harness, Text, UserMessage, hookimpl
from dsh_core.llm import Finish, TextDelta
from dsh_core.testing import ScriptedModel
from dsh_core.vocabulary import AssistantMessage

OPTIONS = AgentOptions(model="scripted/bench")

#: a backend: () -> (plugins, config), or None for in memory
Backend = Callable[[], tuple[list[object], dict[str, Any]]] | None


class KeepGoing:
    """Continue every turn until step ``steps``: a turn of many text steps measures the step alone."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    @hookimpl
    def dsh_agent_turn_continuation(self, step: int) -> ContinuationDecision | None:
        return ContinuationDecision(action="continue") if step < self.steps else None


def harness(backend: Backend, *plugins: object) -> Harness:
    if backend is None:
        return Harness(autoload=False, plugins=plugins)
    mine, config = backend()
    return Harness(config=config, plugins=[*mine, *plugins], autoload=False)


async def one_agent_steps(
    backend: Backend, session_id: str, steps: int, turns: int, *, yields: bool = False
) -> tuple[float, float]:
    """Seconds per text step of one agent, wall clock and this process's CPU time: ``turns`` turns of
    ``steps`` steps after a warm-up turn (the turn-end flush is shared by the turn's steps, as in real
    use); GC paused while timing. The budget is on the wall clock: a turn waits for its flush.

    ``yields``: the model's stream gives the event loop a turn before each chunk, as every real
    adapter does (it waits on its socket); otherwise the turn never lets another task or thread run.
    """
    model = ScriptedModel(checkpoints=yields)
    async with harness(backend, KeepGoing(steps)) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create(session_id, agent_options=OPTIONS) as handle:
            model.add(*([ScriptedModel.text("answer")] * steps * (turns + 1)))
            await handle.agent.run("warm up")  # the first turn pays for creating the log
            gc.disable()
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(turns):
                await handle.agent.run("go")
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            gc.enable()
    return elapsed / (steps * turns), cpu / (steps * turns)


async def step_costs(
    backends: dict[str, Backend], steps: int = 100, turns: int = 10, *, yields: bool = False
) -> dict[str, tuple[float, float]]:
    """Per backend, the best of 5 agents' (wall, CPU) cost per text step, the backends measured in turn."""
    best = dict.fromkeys(backends, (float("inf"), float("inf")))
    for repeat in range(5):
        for name, backend in backends.items():
            session_id = f"steps-{'yields-' if yields else ''}{repeat}"
            wall, cpu = await one_agent_steps(backend, session_id, steps, turns, yields=yields)
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


async def build_session(backend: Backend, session_id: str, events: int) -> None:
    """A stored session of about ``events`` events: turns of a prompt, a streamed answer of 40 chunks."""
    async with harness(backend) as ctx:
        session = await ctx.sessions.create(session_id)
        turn = 0
        while len(session.events) < events:
            turn += 1
            prompt = UserMessage(content=(Text(f"question {turn}"),))
            session.append("inbox/queued", {"id": f"q{turn}", "kind": "send", "message": prompt.to_json()})
            session.append("turn/start", {"turn": turn})
            session.append("user/message", {"message": prompt.to_json(), "queued_id": f"q{turn}"})
            session.append("step/start", {"turn": turn, "step": 1})
            for _ in range(40):
                session.append(
                    "assistant/chunk", {"turn": turn, "step": 1, "chunk": TextDelta(0, "word ").to_json()}
                )
            session.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": Finish("stop").to_json()})
            answer = AssistantMessage(content=(Text("word " * 40),), provider="scripted", model="bench")
            session.append("assistant/message", {"turn": turn, "step": 1, "message": answer.to_json()})
            session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            if turn % 100 == 0:
                await ctx.sessions.flush(session)


async def resume_costs(backends: dict[str, Backend], events: int) -> dict[str, tuple[int, float, float, float, float]]:
    """Per backend: (events, seconds for load(), for ctx.agents.resume(), and the CPU time of each, this
    process's threads included) of the same stored session; best of 3, the backends measured in turn
    so that the machine's drift hits both alike (the CPU time is what a loaded machine blurs least)."""
    session_id = f"resume-{events}"
    for backend in backends.values():
        await build_session(backend, session_id, events)
    runs: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in backends}
    counts: dict[str, int] = {}
    for _ in range(3):
        for name, backend in backends.items():
            gc.collect()
            async with harness(backend) as ctx:
                start, cpu = time.perf_counter(), time.process_time()
                loaded = await ctx.session_persistence.load(session_id)
                load, load_cpu = time.perf_counter() - start, time.process_time() - cpu
                counts[name] = len(loaded.events)
            del loaded
            gc.collect()
            async with harness(backend) as ctx:
                ctx.llm.register_adapter("scripted", ScriptedModel())
                start, cpu = time.perf_counter(), time.process_time()
                handle = await ctx.agents.resume(session_id, agent_options=OPTIONS)
                resume, resume_cpu = time.perf_counter() - start, time.process_time() - cpu
                await handle.dispose()
            runs[name].append((load, resume, load_cpu, resume_cpu))
    return {name: (counts[name], *(min(column) for column in zip(*runs[name], strict=True))) for name in backends}


def _driver_setup(dsn: str, schema: str) -> Statements:
    with psycopg.connect(dsn, autocommit=True) as conn:
        ensure_schema(conn, schema, "bench")
    return Statements(schema)


async def driver_cost(dsn: str, schema: str, count: int = 500) -> tuple[float, float | None]:
    """Seconds per round trip of the write statement when its fence matches no row (so no commit
    waits for the disk): sync psycopg from a worker thread, and psycopg's AsyncConnection (asyncio only)."""
    statements = await anyio.to_thread.run_sync(_driver_setup, dsn, schema)
    query = statements.append()
    params = {"id": "none", "epoch": 1, "first": 0, "end": 1, "turns": 0, "title": None, "batch": '"x"\t1.0\t{}'}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(20):  # warm up (and let psycopg prepare the statement)
            await anyio.to_thread.run_sync(conn.execute, query, params)
        start = time.perf_counter()
        for _ in range(count):
            await anyio.to_thread.run_sync(conn.execute, query, params)
        threaded = (time.perf_counter() - start) / count
    if sniffio.current_async_library() != "asyncio":
        return threaded, None
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
        for _ in range(20):
            await aconn.execute(query, params)
        start = time.perf_counter()
        for _ in range(count):
            await aconn.execute(query, params)
        native = (time.perf_counter() - start) / count
    return threaded, native


async def main(dsn: str, backend_name: str) -> None:
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as temp:
        root = Path(temp)
        schema = f"bench_{backend_name}"

        def jsonl() -> tuple[list[object], dict[str, Any]]:
            return [JsonlPlugin()], {"plugins": {"persistence-jsonl": {"root": str(root / "jsonl")}}}

        def postgres() -> tuple[list[object], dict[str, Any]]:
            return [PostgresPlugin()], {"plugins": {"persistence-postgres": {"dsn": dsn, "schema": schema}}}

        backends: dict[str, Backend] = {"memory": None, "jsonl": jsonl, "postgres": postgres}
        costs = await step_costs(backends)
        (plain, plain_cpu), (on_jsonl, jsonl_cpu), (on_postgres, postgres_cpu) = (
            costs["memory"],
            costs["jsonl"],
            costs["postgres"],
        )
        yielding = await step_costs(backends, yields=True)
        resumed = await resume_costs({"jsonl": jsonl, "postgres": postgres}, 100_000)
        jsonl_resume, postgres_resume = resumed["jsonl"], resumed["postgres"]
        threaded, native = await driver_cost(dsn, schema)
    print(f"text step, in memory                 {plain * 1e6:8.1f} us          (this process's CPU {plain_cpu * 1e6:.1f} us)")
    print(
        f"text step, persistence-jsonl         {on_jsonl * 1e6:8.1f} us   x{on_jsonl / plain:.2f}  (turns of 100 steps;"
        f" CPU x{jsonl_cpu / plain_cpu:.2f})"
    )
    print(
        f"text step, persistence-postgres      {on_postgres * 1e6:8.1f} us   x{on_postgres / plain:.2f}  budget <= x1.50"
        f"  (x{on_postgres / on_jsonl:.2f} of jsonl; CPU x{postgres_cpu / plain_cpu:.2f})"
    )
    memory, jsonl_, postgres_ = (yielding[name][0] for name in ("memory", "jsonl", "postgres"))
    print(
        f"the same, the model yielding to the event loop before each chunk (as a real adapter does): in memory"
        f" {memory * 1e6:.1f} us, jsonl x{jsonl_ / memory:.2f}, postgres x{postgres_ / memory:.2f}"
    )
    count, load, resume, *_ = jsonl_resume
    print(f"resume of {count} events, jsonl     {resume * 1e3:8.1f} ms   (load() alone {load * 1e3:.1f} ms)")
    count, pg_load, pg_resume, *_ = postgres_resume
    print(
        f"resume of {count} events, postgres  {pg_resume * 1e3:8.1f} ms   {pg_resume / resume:.2f}x jsonl, budget <= 2x"
        f"  (load() alone {pg_load * 1e3:.1f} ms, {pg_load / load:.2f}x)"
    )
    line = f"fence round trip, sync psycopg in a worker thread {threaded * 1e6:7.1f} us"
    if native is not None:
        line += f"; psycopg AsyncConnection (asyncio only) {native * 1e6:.1f} us"
    print(line)
    print(
        f"(server on a Unix socket, fsync on; jsonl in {tempfile.gettempdir()}; {os.uname().sysname}, Python "
        f"{sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f})"
    )


def run() -> None:
    """Every figure, on asyncio and trio, against one throwaway server."""
    with temporary_postgres() as server:
        for backend in ("asyncio", "trio"):
            print(f"--- {backend}")
            anyio.run(main, server.dsn, backend, backend=backend)


def step_figures() -> dict[str, float]:
    """One child of ``--against``: the per-text-step costs in memory and with PostgreSQL, on a server
    of its own."""

    async def measure(dsn: str) -> dict[str, float]:
        def postgres() -> tuple[list[object], dict[str, Any]]:
            return [PostgresPlugin()], {"plugins": {"persistence-postgres": {"dsn": dsn, "schema": "against"}}}

        costs = await step_costs({"memory": None, "postgres": postgres}, turns=10)
        memory, on_postgres = costs["memory"][0], costs["postgres"][0]
        return {
            "text step, in memory (us)": memory * 1e6,
            "text step, postgres (us)": on_postgres * 1e6,
            "postgres / in memory": on_postgres / memory,
        }

    with temporary_postgres() as server:
        return anyio.run(measure, server.dsn)


if __name__ == "__main__":
    args = parse_args()  # --against DIR [--rounds N]: _compare's children, each with --json
    if args.against is not None:
        run_against(__file__, args.against, args.rounds)
    elif args.json:
        print(json.dumps(step_figures()))
    else:
        run()
