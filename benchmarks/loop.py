"""The loop's cost per text step, tool step and streamed chunk, and the memory of an idle agent.

Three contenders, measured in one run, each in its own child process, alternately, best of
``--rounds`` (the machine is shared; the best run is the least disturbed one):

* **this** tree (``PYTHONPATH`` = this checkout);
* the **baseline**, main at ``1d609ea`` (issue 17's "today's main"): a ``git worktree`` of that
  commit, made in a temporary directory and removed at the end (or ``--baseline PATH``). The
  child imports that checkout's ``dsh_core``/``dsh_agent_loop`` (it prints their ``__file__``,
  checked here) and reads the root plugins' entry points from a shim ``dist-info`` built from the
  baseline's ``pyproject.toml``, since the installed metadata names this tree's module paths;
* a **minimal** hand-written async loop doing the same work: stream the same ``ScriptedModel``,
  append an event per chunk to a list, call the tool, build the next request.

Times are the process's CPU time (``time.process_time``): the loop never waits for I/O here, and
CPU time is what a loaded, shared machine disturbs least. Every contender plays the same scripts with a zero-latency ``ScriptedModel`` (no network, no
persistence plugin: every event is logged in memory). A figure is a difference of turns, so the
fixed cost of a turn cancels out: a text step is (a turn of ``STEPS`` text steps - a turn of one)
/ (``STEPS`` - 1), a tool step likewise with tool calls, a chunk is (one step of 101 chunks - one
of 1) / 100. An idle agent is the traced memory (``tracemalloc``) of 500 created agents / 500, on
asyncio. Budgets (issue 17): tool, text step and chunk at most 0.5x the baseline, an idle agent at
most 10 KiB on asyncio. Run ``python benchmarks/loop.py`` (``make bench``); ``--json`` prints the
figures as one object.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
BASELINE_COMMIT = "1d609ea"
STEPS = 10
TURNS = 200  # per figure and repeat; a fresh agent every PER_AGENT turns keeps the history short
PER_AGENT = 20
REPEATS = 3
IDLE_AGENTS = 500
BACKENDS = ("asyncio", "trio")
#: figure -> (unit, budget as a ratio to the baseline, or an absolute limit)
FIGURES: dict[str, tuple[str, str]] = {
    "text step": ("us", "<= 0.5x baseline"),
    "tool step": ("us", "<= 0.5x baseline"),
    "streamed chunk": ("us", "<= 0.5x baseline"),
    "idle agent": ("KiB", "<= 10 KiB (asyncio)"),
}


# ---------------------------------------------------------------------- the harness (any tree)


def harness_figures(backend: str) -> dict[str, float]:
    """Measure the harness whose ``dsh_core`` this process imports; public API only (both trees)."""
    import anyio

    from dsh_core import AgentOptions, ContinuationDecision, Harness, hookimpl, tool
    from dsh_core.testing import ScriptedModel

    options = AgentOptions(model="scripted/bench")

    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    class KeepGoing:
        """Continue until step ``STEPS`` (only while ``on``): a turn of many text steps."""

        on = False

        @hookimpl
        def dsh_agent_turn_continuation(self, step: int) -> ContinuationDecision | None:
            return ContinuationDecision(action="continue") if self.on and step < STEPS else None

    keep_going = KeepGoing()

    async def per_turn(ctx: Any, model: Any, replies: list[Any], *, keep: bool = False) -> float:
        keep_going.on = keep
        best = float("inf")
        for repeat in range(REPEATS):
            elapsed = 0.0
            for batch in range(TURNS // PER_AGENT):
                async with await ctx.agents.create(f"b-{time.monotonic_ns()}-{repeat}-{batch}", agent_options=options) as handle:
                    agent = handle.agent
                    model.add(*(replies * PER_AGENT))
                    gc.collect()
                    gc.disable()
                    start = time.process_time()
                    for _ in range(PER_AGENT):
                        await agent.run("go")
                    elapsed += time.process_time() - start
                    gc.enable()
            model.requests.clear()
            best = min(best, elapsed / TURNS)
        return best

    async def timings() -> dict[str, float]:
        model = ScriptedModel()
        async with Harness(autoload=False, plugins=(keep_going,)) as ctx:
            ctx.llm.register_adapter("scripted", model)
            ctx.tools.register(ping)
            one = await per_turn(ctx, model, [ScriptedModel.text("answer")])
            texts = await per_turn(ctx, model, [ScriptedModel.text("answer")] * STEPS, keep=True)
            tools = await per_turn(
                ctx, model, [ScriptedModel.tool_call("ping")] * (STEPS - 1) + [ScriptedModel.text("done")]
            )
            one_chunk = await per_turn(ctx, model, [ScriptedModel.text("a" * 101, chunks=1)])
            many = await per_turn(ctx, model, [ScriptedModel.text("a" * 101, chunks=101)])
        return {
            "text step": (texts - one) / (STEPS - 1) * 1e6,
            "tool step": (tools - one) / (STEPS - 1) * 1e6,
            "streamed chunk": (many - one_chunk) / 100 * 1e6,
        }

    async def idle_agent() -> float:
        async with Harness(autoload=False) as ctx:
            ctx.llm.register_adapter("scripted", ScriptedModel())
            warm = await ctx.agents.create("warm-up", agent_options=options)  # first-use caches
            await warm.dispose()
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            handles = [await ctx.agents.create(f"idle-{i}", agent_options=options) for i in range(IDLE_AGENTS)]
            for handle in handles:
                await handle.agent.when_idle()
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            for handle in handles:
                await handle.dispose()
            return (after - before) / IDLE_AGENTS / 1024

    figures = anyio.run(timings, backend=backend)
    if backend == "asyncio":
        figures["idle agent"] = anyio.run(idle_agent, backend=backend)
    return figures


# ---------------------------------------------------------------------- the minimal loop


def minimal_figures(backend: str) -> dict[str, float]:
    """The same work by hand: stream, an event per chunk, run the tool, build the next request."""
    import anyio
    import anyio.lowlevel

    from dsh_core.llm import Finish, LlmRequest, TextDelta, ToolCallDelta
    from dsh_core.testing import ScriptedModel
    from dsh_core.vocabulary import AssistantMessage, Text, ToolCall, ToolResultMessage, UserMessage

    def ping() -> str:
        return "pong"

    tools: dict[str, Callable[..., str]] = {"ping": ping}

    async def turn(model: Any, events: list[dict[str, Any]], messages: list[Any], steps_wanted: int) -> None:
        messages.append(UserMessage(content=(Text("go"),)))
        events.append({"type": "user/message", "message": messages[-1]})
        step = 0
        while True:
            step += 1
            request = LlmRequest(provider="scripted", model="bench", messages=tuple(messages))
            texts: list[str] = []
            calls: dict[int, list[str]] = {}
            async for chunk in model.stream(request):
                events.append({"type": "assistant/chunk", "step": step, "chunk": chunk})
                if type(chunk) is TextDelta:
                    texts.append(chunk.text)
                elif type(chunk) is ToolCallDelta:
                    entry = calls.setdefault(chunk.index, [chunk.id or "", chunk.name or "", ""])
                    entry[2] += chunk.arguments
                elif type(chunk) is Finish:
                    break
            blocks: list[Any] = [Text("".join(texts))] if texts else []
            blocks += [ToolCall(id, name, arguments) for id, name, arguments in calls.values()]
            message = AssistantMessage(content=tuple(blocks), provider="scripted", model="bench")
            messages.append(message)
            events.append({"type": "assistant/message", "message": message})
            for id, name, arguments in calls.values():
                result = tools[name](**json.loads(arguments or "{}"))
                messages.append(ToolResultMessage(call_id=id, content=(Text(result),)))
                events.append({"type": "tool/result", "message": messages[-1]})
            if not calls and step >= steps_wanted:
                return

    async def per_turn(model: Any, replies: list[Any], steps_wanted: int = 1) -> float:
        best = float("inf")
        for _ in range(REPEATS):
            elapsed = 0.0
            for _batch in range(TURNS // PER_AGENT):
                events: list[dict[str, Any]] = []
                messages: list[Any] = []
                model.add(*(replies * PER_AGENT))
                gc.collect()
                gc.disable()
                start = time.process_time()
                for _turn in range(PER_AGENT):
                    await turn(model, events, messages, steps_wanted)
                elapsed += time.process_time() - start
                gc.enable()
            model.requests.clear()
            best = min(best, elapsed / TURNS)
        return best

    async def timings() -> dict[str, float]:
        model = ScriptedModel()
        one = await per_turn(model, [ScriptedModel.text("answer")])
        texts = await per_turn(model, [ScriptedModel.text("answer")] * STEPS, steps_wanted=STEPS)
        tool_steps = await per_turn(model, [ScriptedModel.tool_call("ping")] * (STEPS - 1) + [ScriptedModel.text("done")])
        one_chunk = await per_turn(model, [ScriptedModel.text("a" * 101, chunks=1)])
        many = await per_turn(model, [ScriptedModel.text("a" * 101, chunks=101)])
        return {
            "text step": (texts - one) / (STEPS - 1) * 1e6,
            "tool step": (tool_steps - one) / (STEPS - 1) * 1e6,
            "streamed chunk": (many - one_chunk) / 100 * 1e6,
        }

    class MinimalAgent:
        """An idle agent by hand: an inbox, a log, a wake event and a task waiting on it."""

        __slots__ = ("events", "inbox", "wake")

        def __init__(self) -> None:
            self.inbox: list[Any] = []
            self.events: list[dict[str, Any]] = []
            self.wake = anyio.Event()

        async def drive(self) -> None:
            await self.wake.wait()

    async def idle_agent() -> float:
        async with anyio.create_task_group() as tg:
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            agents = [MinimalAgent() for _ in range(IDLE_AGENTS)]
            for agent in agents:
                tg.start_soon(agent.drive)
            await anyio.lowlevel.checkpoint()
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            for agent in agents:
                agent.wake.set()
        return (after - before) / IDLE_AGENTS / 1024

    figures = anyio.run(timings, backend=backend)
    if backend == "asyncio":
        figures["idle agent"] = anyio.run(idle_agent, backend=backend)
    return figures


# ---------------------------------------------------------------------- running the contenders


@contextlib.contextmanager
def baseline_checkout(given: Path | None) -> Iterator[Path]:
    """The baseline tree: ``given``, or a temporary ``git worktree`` of ``BASELINE_COMMIT`` (removed after)."""
    if given is not None:
        yield given.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="dsh-bench-base-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(HERE), "worktree", "add", "--detach", "--quiet", str(tree), BASELINE_COMMIT],
            check=True,
        )
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(tree)], check=False)


def entry_point_shim(tree: Path, into: Path) -> Path:
    """A ``dist-info`` for ``dsh-harness`` with ``tree``'s own entry points, ahead on ``sys.path``."""
    project = tomllib.loads((tree / "pyproject.toml").read_text())["project"]
    info = into / "dsh_harness-0+bench.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: 0+bench\n")
    lines = []
    for group, entries in project.get("entry-points", {}).items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {value}" for name, value in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return into


def run_child(kind: str, backend: str, path: list[Path]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(entry) for entry in path)}
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--backend", backend],
        env=env, cwd="/", capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        sys.exit(f"benchmarks/loop.py: the {kind} child under {path} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def child(kind: str, backend: str) -> None:
    import dsh_agent_loop
    import dsh_core

    measure = harness_figures if kind == "harness" else minimal_figures
    figures = measure(backend)
    files = {"dsh_core": dsh_core.__file__, "dsh_agent_loop": dsh_agent_loop.__file__}
    print(json.dumps({"files": files, "figures": figures}))


def compare(baseline: Path | None, rounds: int, as_json: bool, backends: tuple[str, ...] = BACKENDS) -> None:
    best: dict[str, dict[str, float]] = {}
    shown = False
    with baseline_checkout(baseline) as base, tempfile.TemporaryDirectory(prefix="dsh-bench-shim-") as shim:
        contenders = {
            "this": ("harness", [HERE]),
            "baseline": ("harness", [entry_point_shim(base, Path(shim)), base]),
            "minimal": ("minimal", [HERE]),
        }
        for backend in backends:
            for _ in range(rounds):
                for label, (kind, path) in contenders.items():
                    result = run_child(kind, backend, path)
                    tree = path[-1]
                    for module, file in result["files"].items():
                        if not Path(file).resolve().is_relative_to(tree.resolve()):
                            sys.exit(f"benchmarks/loop.py: the {label} child imported {module} from {file}, not {tree}")
                    if label == "baseline" and not shown and not as_json:
                        which = BASELINE_COMMIT if baseline is None else str(baseline)
                        print(f"baseline {which}: the child imported dsh_core from {result['files']['dsh_core']}")
                        shown = True
                    for key, value in result["figures"].items():
                        slot = best.setdefault(f"{label} {backend}", {})
                        slot[key] = min(value, slot.get(key, float("inf")))
    figures = {f"{label} {key}": value for label, values in best.items() for key, value in values.items()}
    if as_json:
        print(json.dumps(figures))
        return
    for backend in backends:
        print(f"--- {backend}   (best of {rounds} alternating runs each)")
        print(f"  {'':16}{'this':>10}{'baseline':>10}{'minimal':>10}{'this/base':>11}{'this/min':>10}   budget")
        for name, (unit, budget) in FIGURES.items():
            this = best[f"this {backend}"].get(name)
            if this is None:
                continue
            base_value = best[f"baseline {backend}"][name]
            minimal = best[f"minimal {backend}"][name]
            print(
                f"  {name + ' ' + unit:16}{this:10.2f}{base_value:10.2f}{minimal:10.2f}"
                f"{this / base_value:10.2f}x{this / minimal:9.1f}x   {budget}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help=f"a checkout of the baseline (default: a worktree of {BASELINE_COMMIT})")
    parser.add_argument("--rounds", type=int, default=3, help="child runs per contender and backend (best one counts)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--backend-only", choices=BACKENDS, help="measure on this backend only")
    parser.add_argument("--child", choices=("harness", "minimal"), help=argparse.SUPPRESS)
    parser.add_argument("--backend", choices=BACKENDS, default="asyncio", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.backend)
    else:
        backends = (args.backend_only,) if args.backend_only else BACKENDS
        compare(args.baseline, args.rounds, args.json, backends)


if __name__ == "__main__":
    main()
