"""What durable sessions cost: the persistence-jsonl plugin against the in-memory harness.

Prints: us per appended event without and with the plugin (the ``session/event`` listener only
buffers), us per event for the batched write, the cost of a turn-end flush (write + fsync), the
loop's cost per text step without and with persistence (ratio in the same run), the cost of an
accepted send's record (written at once since issue 15) and of a send + flush, resume time for
sessions of 10k and 100k events, and bytes on disk per streamed chunk. Budgets (issues 6, 15):
persistence adds <= 20% to the per-step overhead; resume of 100k events <= 1 s.

Then every store in one run (issue 34, ``stores_figures``; ``--stores`` prints only these): per text
step (turns of 100 steps) and resume of a 100k-event session with persistence-jsonl,
persistence-sqlite and, when a PostgreSQL server can be started here (``find_bindir`` finds
``initdb``), persistence-postgres, as ratios to in memory and to JSONL. Budgets: SQLite <= x1.2 of
JSONL per step and <= x1.5 on resume; PostgreSQL <= x1.5 of in memory per step (issue 21) and <= 2x
JSONL on resume. ``--no-postgres`` leaves PostgreSQL out; ``persistence_postgres.py`` prints its
further figures (a yielding model, the driver's round trip).

``--baseline DIR`` runs the same measurements, in fresh processes taking turns, against the code of
another checkout (``git worktree add /tmp/base main~N``; its core's entry points are put ahead of
this venv's) and prints both with their ratio.

The store lives in a temp folder (``$TMPDIR``): put it on the disk you care about, since fsync is
what a flush costs and tmpfs makes it free. Figures only, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import anyio
from dsh_persistence_jsonl import PersistencePlugin, _writer

from dsh_core import AgentOptions, ContinuationDecision, Harness, Text, UserMessage, hookimpl
from dsh_core.llm import Finish, TextDelta
from dsh_core.testing import ScriptedModel

try:
    from dsh_core.vocabulary import AssistantMessage
except ImportError:  # a --baseline checkout from before the core layout move (issue 15's: 1d609ea)
    from dsh_core._content import AssistantMessage  # type: ignore[no-redef, import-not-found, unused-ignore]

OPTIONS = AgentOptions(model="scripted/bench")


class KeepGoing:
    """Continue every turn until step ``steps``: a turn of many text steps measures the step alone."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    @hookimpl
    def dsh_agent_turn_continuation(self, step: int) -> ContinuationDecision | None:
        return ContinuationDecision(action="continue") if step < self.steps else None


def harness(root: Path | None, *plugins: object, batch_delay: float = 0.1) -> Harness:
    if root is None:
        return Harness(autoload=False, plugins=plugins)
    config = {"plugins": {"persistence-jsonl": {"root": str(root), "batch_delay": batch_delay}}}
    return Harness(config=config, plugins=[PersistencePlugin(), *plugins], autoload=False)


async def append_cost(root: Path | None, count: int = 100_000) -> tuple[float, float]:
    """Seconds per ``append`` of a small event, and per event for the flush that writes them all."""
    async with harness(root, batch_delay=3600) as ctx:
        session = await ctx.sessions.create("appends")
        data = {"turn": 1, "step": 1, "chunk": TextDelta(0, "word ").to_json()}
        gc.disable()
        start = time.perf_counter()
        for _ in range(count):
            session.append("assistant/chunk", data)
        appended = time.perf_counter() - start
        gc.enable()
        start = time.perf_counter()
        await ctx.sessions.flush(session)
        flushed = time.perf_counter() - start
    return appended / count, flushed / count


async def flush_cost(root: Path, turns: int = 200, events: int = 30) -> tuple[float, float]:
    """Median and 90th-percentile seconds of a turn-end flush after ``events`` events."""
    async with harness(root, batch_delay=3600) as ctx:
        session = await ctx.sessions.create("flushes")
        samples = []
        for _ in range(turns):
            for index in range(events):
                session.append("note/added", {"index": index, "text": "x" * 40})
            start = time.perf_counter()
            await ctx.sessions.flush(session)
            samples.append(time.perf_counter() - start)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9)]


async def step_cost(root: Path | None, steps: int = 100, turns: int = 10) -> float:
    """Seconds per text step, in turns of ``steps`` steps (the turn-end flush and its fsync are
    shared by the turn's steps, as in real use); best of 3 agents, GC paused while timing."""
    model = ScriptedModel()
    best = float("inf")
    async with harness(root, KeepGoing(steps)) as ctx:
        ctx.llm.register_adapter("scripted", model)
        for repeat in range(3):
            async with await ctx.agents.create(f"steps-{repeat}", agent_options=OPTIONS) as handle:
                model.add(*([ScriptedModel.text("answer")] * steps * turns))
                await handle.agent.run("warm up")  # the first turn pays for creating the log
                model.add(*([ScriptedModel.text("answer")] * steps))
                gc.disable()
                start = time.perf_counter()
                for _ in range(turns):
                    await handle.agent.run("go")
                elapsed = time.perf_counter() - start
                gc.enable()
            best = min(best, elapsed / (steps * turns))
    return best


async def build_session(root: Path, session_id: str, events: int) -> None:
    """A stored session of about ``events`` events: turns of a prompt, a streamed answer of 40 chunks."""
    async with harness(root, batch_delay=3600) as ctx:
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


async def resume_cost(root: Path, events: int) -> tuple[int, float, float, float]:
    """(events, seconds for load(), for ctx.agents.resume(), for a bare ``json.loads`` of every
    line as a yardstick of this machine) of a stored session; best of 3."""
    session_id = f"resume-{events}"
    await build_session(root, session_id, events)
    gc.collect()
    lines = (root / session_id / "session.jsonl").read_bytes().split(b"\n")[:-1]
    start = time.perf_counter()
    for line in lines:
        json.loads(line)
    baseline = time.perf_counter() - start
    del lines
    loads, resumes = [], []
    count = 0
    for _ in range(3):
        async with harness(root) as ctx:
            ctx.llm.register_adapter("scripted", ScriptedModel())
            start = time.perf_counter()
            loaded = await ctx.session_persistence.load(session_id)
            loads.append(time.perf_counter() - start)
            count = len(loaded.events)
        async with harness(root) as ctx:
            ctx.llm.register_adapter("scripted", ScriptedModel())
            start = time.perf_counter()
            handle = await ctx.agents.resume(session_id, agent_options=OPTIONS)
            resumes.append(time.perf_counter() - start)
            await handle.dispose()
    return count, min(loads), min(resumes), baseline


async def bytes_per_chunk(root: Path) -> float:
    """Bytes on disk per ``assistant/chunk`` line of an answer streamed as 200 small deltas."""
    model = ScriptedModel([ScriptedModel.text("lorem ipsum dolor sit amet " * 40, chunks=200)])
    async with harness(root) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("chunks", agent_options=OPTIONS) as handle:
            await handle.agent.run("stream please")
    lines = (root / "chunks" / "session.jsonl").read_bytes().split(b"\n")
    chunk_lines = [line for line in lines if line.startswith(b'{"type":"assistant/chunk"')]
    return sum(len(line) + 1 for line in chunk_lines) / len(chunk_lines)


async def send_cost(root: Path | None, count: int = 2_000) -> tuple[float, float]:
    """Seconds per ``inbox/queued`` append (an accepted send's record), and per send + flush."""
    prompt = UserMessage(content=(Text("a prompt"),)).to_json()
    async with harness(root, batch_delay=3600) as ctx:
        session = await ctx.sessions.create("sends")
        start = time.perf_counter()
        for index in range(count):
            session.append("inbox/queued", {"id": f"q{index}", "kind": "send", "message": prompt})
        appended = (time.perf_counter() - start) / count
        flushes = 200
        start = time.perf_counter()
        for index in range(flushes):
            session.append("inbox/queued", {"id": f"f{index}", "kind": "send", "message": prompt})
            await ctx.sessions.flush(session)
        flushed = (time.perf_counter() - start) / flushes
    return appended, flushed


async def measure() -> dict[str, Any]:
    """Every figure of this script, in seconds (bytes for the chunk size)."""
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as temp:
        base = Path(temp)
        figures: dict[str, Any] = {}
        figures["append_plain"], _ = await append_cost(None)
        figures["append_durable"], figures["write"] = await append_cost(base / "appends")
        figures["flush_median"], figures["flush_p90"] = await flush_cost(base / "flushes")
        figures["step_plain"] = await step_cost(None)
        figures["step_durable"] = await step_cost(base / "steps")
        real_sync = _writer.sync_file
        _writer.sync_file = lambda fd: None  # isolate the write path from the disk's fsync latency
        try:
            figures["step_unsynced"] = await step_cost(base / "steps-unsynced")
        finally:
            _writer.sync_file = real_sync
        figures["send_plain"], _ = await send_cost(None)
        figures["send_durable"], figures["send_flush"] = await send_cost(base / "sends")
        figures["resumes"] = [await resume_cost(base / "resume", size) for size in (10_000, 100_000)]
        figures["chunk"] = await bytes_per_chunk(base / "chunks")
    return figures


def report(f: dict[str, Any]) -> None:
    print(f"append, in memory                   {f['append_plain'] * 1e6:8.2f} us/event")
    print(
        f"append, persistence loaded          {f['append_durable'] * 1e6:8.2f} us/event   (buffered by the listener)"
    )
    print(f"batched write at flush              {f['write'] * 1e6:8.2f} us/event   (encode + one write)")
    print(
        f"turn-end flush (30 events + fsync)  {f['flush_median'] * 1e3:8.3f} ms median, "
        f"{f['flush_p90'] * 1e3:.3f} ms p90"
    )
    ratio = f["step_durable"] / f["step_plain"]
    print(f"text step, in memory                {f['step_plain'] * 1e6:8.1f} us")
    print(
        f"text step, persistence loaded       {f['step_durable'] * 1e6:8.1f} us   x{ratio:.2f}  budget <= x1.20"
        f"  (turns of 100 steps, fsync at turn end)"
    )
    print(
        f"text step, persistence without fsync {f['step_unsynced'] * 1e6:7.1f} us   "
        f"x{f['step_unsynced'] / f['step_plain']:.2f}  (the batched write path alone)"
    )
    print(
        f"inbox/queued append                 {f['send_plain'] * 1e6:8.2f} us in memory, "
        f"{f['send_durable'] * 1e6:.2f} us persisted; with a flush {f['send_flush'] * 1e3:.3f} ms"
    )
    for count, load, resume, baseline in f["resumes"]:
        print(
            f"resume of {count:>7} events           {resume * 1e3:8.1f} ms   budget <= 1000 ms; load() alone "
            f"{load * 1e3:.1f} ms, bare json.loads of its lines {baseline * 1e3:.1f} ms"
        )
    print(f"bytes on disk per streamed chunk    {f['chunk']:8.1f} B")
    print(f"(store in {tempfile.gettempdir()}, {os.uname().sysname}, Python {sys.version.split()[0]})")


def stores_figures(*, with_postgres: bool) -> None:
    """Every store in one run (issue 34): per text step and resume of 100k events, against in memory and JSONL.

    The measurements are ``persistence_postgres.py``'s (``step_costs``: best of 5 agents of 10 turns of
    100 text steps, the stores measured in turn; ``resume_costs``: best of 3 loads and resumes of the
    same 100k-event session), so the stores see the same machine drift. PostgreSQL is a throwaway
    cluster on a Unix socket when ``initdb`` is found (``--no-postgres`` leaves it out).
    """
    print("=== every store, same run: persistence-jsonl, persistence-sqlite, persistence-postgres")
    import persistence_postgres as shared  # this folder's, beside this script
    from dsh_persistence_sqlite import PersistencePlugin as SqlitePlugin

    server: Any = contextlib.nullcontext(None)
    if with_postgres:
        try:
            from dsh_persistence_postgres.testing import (
                PostgresUnavailableError,
                find_bindir,
                temporary_postgres,
            )

            find_bindir()
            server = temporary_postgres()
        except (ImportError, PostgresUnavailableError) as exc:
            print(f"(persistence-postgres left out: {exc})")

    async def main(dsn: str | None, backend_name: str) -> None:
        with tempfile.TemporaryDirectory(prefix="dsh-bench-") as temp:
            root = Path(temp)

            def jsonl() -> tuple[list[object], dict[str, Any]]:
                return [PersistencePlugin()], {"plugins": {"persistence-jsonl": {"root": str(root / "jsonl")}}}

            def sqlite() -> tuple[list[object], dict[str, Any]]:
                return [SqlitePlugin()], {"plugins": {"persistence-sqlite": {"path": str(root / "sessions.db")}}}

            stores: dict[str, Any] = {"jsonl": jsonl, "sqlite": sqlite}
            if dsn is not None:
                from dsh_persistence_postgres import PersistencePlugin as PostgresPlugin

                def postgres() -> tuple[list[object], dict[str, Any]]:
                    table = {"dsn": dsn, "schema": f"stores_{backend_name}"}
                    return [PostgresPlugin()], {"plugins": {"persistence-postgres": table}}

                stores["postgres"] = postgres
            steps = await shared.step_costs({"memory": None, **stores})
            resumed = await shared.resume_costs(stores, 100_000)
        (memory, memory_cpu), (jsonl_step, jsonl_cpu) = steps["memory"], steps["jsonl"]
        _, jsonl_load, jsonl_resume, _, jsonl_resume_cpu = resumed["jsonl"]
        budgets = {"sqlite": ("budget <= x1.20", "budget <= x1.50"), "postgres": ("", "budget <= x2.00")}
        print(f"text step, in memory        {memory * 1e6:8.1f} us   (CPU {memory_cpu * 1e6:.1f} us)")
        for name in stores:
            wall, cpu = steps[name]
            step_budget, resume_budget = budgets.get(name, ("", ""))
            count, load, resume, _, resume_cpu = resumed[name]
            print(
                f"text step, {name:<16} {wall * 1e6:8.1f} us   x{wall / memory:.2f} of in memory, "
                f"x{wall / jsonl_step:.2f} of jsonl {step_budget}  (CPU x{cpu / jsonl_cpu:.2f} of jsonl)"
            )
            print(
                f"resume of {count} events, {name:<8} {resume * 1e3:8.1f} ms   x{resume / jsonl_resume:.2f} of jsonl "
                f"{resume_budget}  (CPU x{resume_cpu / jsonl_resume_cpu:.2f}; load() alone {load * 1e3:.1f} ms, "
                f"x{load / jsonl_load:.2f})"
            )
        print(f"(load average {os.getloadavg()[0]:.1f}; files in {tempfile.gettempdir()})")

    with server as running:
        for backend in ("asyncio", "trio"):
            print(f"--- {backend}")
            anyio.run(main, None if running is None else running.dsn, backend, backend=backend)


def _baseline_metadata(code: Path, into: Path) -> Path:
    """A ``dsh-harness`` dist-info with the entry points of ``code``'s pyproject, in ``into``.

    The core's default plugins come in through entry points, and this venv's metadata names this
    checkout's modules; ahead of it on the path, the baseline's own entry points win.
    """
    project = tomllib.loads((code / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    info = into / f"dsh_harness-{project['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: dsh-harness\nVersion: {project['version']}\n")
    groups = project.get("entry-points", {})
    text = "".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
        for group, points in groups.items()
    )
    (info / "entry_points.txt").write_text(text, encoding="utf-8")
    return into


def _run_figures(backend: str, code: Path | None, metadata: Path | None = None) -> dict[str, Any]:
    """The figures measured in a fresh process, on the code of ``code`` (a checkout, its entry points
    in ``metadata``) or of this one."""
    env = dict(os.environ)
    if code is not None:  # ahead of the editable installs of this checkout
        assert metadata is not None
        paths = [str(metadata), str(code), str(code / "contrib" / "dsh-persistence-jsonl")]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, __file__, "--figures", backend], env=env, capture_output=True, text=True, check=True
    )
    figures: dict[str, Any] = json.loads(done.stdout)
    return figures


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's best (lowest) value over ``runs``; the resume list element by element."""
    best = dict(runs[0])
    for run in runs[1:]:
        for key, value in run.items():
            if key == "resumes":
                best[key] = [
                    [min(a, b) for a, b in zip(old, new, strict=True)]
                    for old, new in zip(best[key], value, strict=True)
                ]
            else:
                best[key] = min(best[key], value)
    return best


def compare(baseline: Path, rounds: int, backends: list[str]) -> None:
    """This checkout against ``baseline``, measured in turns, per backend."""
    for backend in backends:
        mine: list[dict[str, Any]] = []
        theirs: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory(prefix="dsh-baseline-") as temp:
            metadata = _baseline_metadata(baseline, Path(temp))
            for _ in range(rounds):
                theirs.append(_run_figures(backend, baseline, metadata))
                mine.append(_run_figures(backend, None))
        new, old = _best(mine), _best(theirs)
        print(
            f"--- {backend}: this checkout, then the baseline {baseline} (best of {rounds} each, taking turns)"
        )
        rows = [
            ("append, in memory (us/event)", "append_plain", 1e6),
            ("append, persistence (us/event)", "append_durable", 1e6),
            ("text step, in memory (us)", "step_plain", 1e6),
            ("text step, persistence (us)", "step_durable", 1e6),
            ("text step, persistence, no fsync (us)", "step_unsynced", 1e6),
            ("inbox/queued append, persistence (us)", "send_durable", 1e6),
            ("send + flush (ms)", "send_flush", 1e3),
            ("turn-end flush, median (ms)", "flush_median", 1e3),
        ]
        for label, key, scale in rows:
            print(f"{label:40} {new[key] * scale:9.2f} {old[key] * scale:9.2f}   x{new[key] / old[key]:.2f}")
        new_ratio = new["step_durable"] / new["step_plain"]
        old_ratio = old["step_durable"] / old["step_plain"]
        print(
            f"{'persistence per step vs in memory':40} {new_ratio:8.2f}x {old_ratio:8.2f}x   budget <= x1.20"
        )
        for (count, _, resume, _), (_, _, old_resume, _) in zip(new["resumes"], old["resumes"], strict=True):
            print(
                f"{f'resume of {count} events (ms)':40} {resume * 1e3:9.1f} {old_resume * 1e3:9.1f}   x{resume / old_resume:.2f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", type=Path, help="a checkout to compare with (e.g. a git worktree of main)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="runs of each checkout with --baseline")
    parser.add_argument("--backend", action="append", help="asyncio, trio (default: both)")
    parser.add_argument("--no-postgres", action="store_true", help="leave out persistence-postgres's figures")
    parser.add_argument("--stores", action="store_true", help="only the figures of every store, same run")
    parser.add_argument("--figures", metavar="BACKEND", help=argparse.SUPPRESS)  # one run, as JSON
    args = parser.parse_args()
    if args.figures:
        print(json.dumps(anyio.run(measure, backend=args.figures)))
    elif args.stores:
        stores_figures(with_postgres=not args.no_postgres)
    elif args.baseline:
        compare(args.baseline.resolve(), args.rounds, args.backend or ["asyncio", "trio"])
    else:
        for backend in ("asyncio", "trio"):
            print(f"--- {backend}")
            report(anyio.run(measure, backend=backend))
        stores_figures(with_postgres=not args.no_postgres)
