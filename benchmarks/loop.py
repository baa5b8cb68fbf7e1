"""The harness's own cost per step, per chunk and per agent, against a zero-latency ScriptedModel.

Prints us per text step, per tool step, per streamed chunk, agents created per second and memory
per idle agent. Budgets (issue 5): <= 100 us per text step, <= 150 us per tool step, <= 3 us per
chunk, <= 30 KB per idle agent. Every event is logged in the session (in memory: no persistence
plugin is loaded here; see benchmarks/persistence.py for the durable path).
"""

from __future__ import annotations

import gc
import time
import tracemalloc

import anyio

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


async def main() -> None:
    turns = 500
    text_turn = await per_turn([ScriptedModel.text("answer")], turns)
    long_text = await per_turn([ScriptedModel.text("a" * 100, chunks=100)], turns)
    text_steps = await per_turn([ScriptedModel.text("answer")] * STEPS, turns // 5, plugins=(KeepGoing(),))
    tool_steps = await per_turn(
        [ScriptedModel.tool_call("ping")] * (STEPS - 1) + [ScriptedModel.text("done")], turns // 5
    )
    text_step = (text_steps - text_turn) / (STEPS - 1)
    tool_step = (tool_steps - text_turn) / (STEPS - 1)
    per_chunk = (long_text - text_turn) / 99
    rate, per_agent = await agents_per_second(1000)
    print(f"turn with one text step (2 chunks) {text_turn * 1e6:8.1f} us   (send, turn, step, flush, idle)")
    print(f"each further text step             {text_step * 1e6:8.1f} us   budget <= 100 us")
    print(f"each further tool step             {tool_step * 1e6:8.1f} us   budget <= 150 us")
    print(f"per streamed chunk                 {per_chunk * 1e6:8.2f} us   budget <= 3 us")
    print(f"agents created per second          {rate:8.0f}")
    print(f"memory per idle agent              {per_agent / 1024:8.1f} KB  budget <= 30 KB")


if __name__ == "__main__":
    for backend in ("asyncio", "trio"):
        print(f"--- {backend}")
        anyio.run(main, backend=backend)
