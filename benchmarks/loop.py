"""The harness's own cost per step, per chunk and per agent, against a zero-latency ScriptedModel.

Prints us per text step, per tool step, per streamed chunk, agents created per second and memory
per idle agent. Budgets (issue 5): <= 100 us per text step, <= 150 us per tool step, <= 3 us per
chunk, <= 30 KB per idle agent. Every event is logged in the session (in memory: no persistence
plugin is loaded here; see benchmarks/persistence.py for the durable path).

``--against TREE`` measures this tree and another checkout alternately in one run and prints the
ratios (see ``_compare.py``).
"""

from __future__ import annotations

import gc
import time
import tracemalloc

import anyio
from _compare import main as compare_main

from dsh_core import AgentOptions, ContinuationDecision, Harness, hookimpl, tool
from dsh_core.testing import Reply, ScriptedModel

OPTIONS = AgentOptions(model="scripted/bench")


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


class KeepGoing:
    """Continue every turn until step ``STEPS``: a turn of many text steps measures the step alone."""

    @hookimpl
    def dsh_agent_turn_continuation(self, step: int) -> ContinuationDecision | None:
        return ContinuationDecision(action="continue") if step < STEPS else None


STEPS = 10


async def per_turn(
    replies: list[Reply | str], turns: int, *, per_agent: int = 50, repeats: int = 5, plugins: tuple[object, ...] = ()
) -> float:
    """Seconds per turn, each playing ``replies``; best of ``repeats`` runs (GC paused while timing).

    A fresh agent every ``per_agent`` turns keeps the conversation at a realistic length, so the
    figure is the harness's cost per turn, not the cost of a thousand-message history.
    """
    model = ScriptedModel()
    best = float("inf")
    async with Harness(autoload=False, plugins=plugins) as ctx:
        ctx.llm.register_adapter("scripted", model)
        ctx.tools.register(ping)
        for repeat in range(repeats):
            elapsed = 0.0
            for batch in range(turns // per_agent):
                name = f"bench-{repeat}-{batch}"
                async with await ctx.agents.create(name, agent_options=OPTIONS) as handle:
                    agent = handle.agent
                    model.add(*(replies * per_agent))
                    gc.disable()
                    start = time.perf_counter()
                    for _ in range(per_agent):
                        await agent.run("go")
                    elapsed += time.perf_counter() - start
                    gc.enable()
            best = min(best, elapsed / (turns // per_agent * per_agent))
    return best


async def agents_per_second(count: int) -> tuple[float, float]:
    """Agents created per second, and bytes per idle agent."""
    async with Harness(autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", ScriptedModel())
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        start = time.perf_counter()
        handles = [await ctx.agents.create(f"idle-{i}", agent_options=OPTIONS) for i in range(count)]
        elapsed = time.perf_counter() - start
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        for handle in handles:
            await handle.dispose()
        return count / elapsed, (after - before) / count


async def measure(backend: str) -> dict[str, float]:
    turns = 500
    text_turn = await per_turn([ScriptedModel.text("answer")], turns)
    long_text = await per_turn([ScriptedModel.text("a" * 100, chunks=100)], turns)
    text_steps = await per_turn([ScriptedModel.text("answer")] * STEPS, turns // 5, plugins=(KeepGoing(),))
    tool_steps = await per_turn(
        [ScriptedModel.tool_call("ping")] * (STEPS - 1) + [ScriptedModel.text("done")], turns // 5
    )
    rate, per_agent = await agents_per_second(1000)
    return {
        f"{backend} turn with one text step": text_turn * 1e6,
        f"{backend} text step": (text_steps - text_turn) / (STEPS - 1) * 1e6,
        f"{backend} tool step": (tool_steps - text_turn) / (STEPS - 1) * 1e6,
        f"{backend} streamed chunk": (long_text - text_turn) / 99 * 1e6,
        f"{backend} agent created": 1e6 / rate,
        f"{backend} idle agent KB": per_agent / 1024,
    }


def measure_all() -> dict[str, float]:
    figures: dict[str, float] = {}
    for backend in ("asyncio", "trio"):
        figures.update(anyio.run(measure, backend, backend=backend))
    return figures


def show(figures: dict[str, float]) -> None:
    for backend in ("asyncio", "trio"):
        print(f"--- {backend}")
        text_turn = figures[f"{backend} turn with one text step"]
        print(f"turn with one text step (2 chunks) {text_turn:8.1f} us   (send, turn, step, flush, idle)")
        print(f"each further text step             {figures[f'{backend} text step']:8.1f} us   budget <= 100 us")
        print(f"each further tool step             {figures[f'{backend} tool step']:8.1f} us   budget <= 150 us")
        print(f"per streamed chunk                 {figures[f'{backend} streamed chunk']:8.2f} us   budget <= 3 us")
        print(f"agents created per second          {1e6 / figures[f'{backend} agent created']:8.0f}")
        print(f"memory per idle agent              {figures[f'{backend} idle agent KB']:8.1f} KB  budget <= 30 KB")


if __name__ == "__main__":
    compare_main(__file__, measure_all, show)
