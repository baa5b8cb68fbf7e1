"""Replaying a recorded session against running it: the cost of ``replay_session`` on a 10k-event log.

Run: ``.venv/bin/python benchmarks/replay.py``. Prints figures, asserts nothing. The same session is
first run in-process with a zero-latency ``ScriptedModel`` (tool steps and text steps, every chunk
logged), then replayed from its log with the recorded tool results; both figures include starting
and stopping the harness, the replay also reading the recording and comparing the logs. Each figure
is the best of a few rounds. Budget (issue 23): the replay at most 1.5x the run, both measured in this run.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from dsh_core import AgentOptions, Harness, SessionEvent, tool
from dsh_core.testing import ScriptedModel, replay_session

ROUNDS = 3
TURNS = 100  # each: a tool step and a text step, about 100 events


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class Tools:
    name = "bench-tools"

    def start(self, ctx: Any) -> None:
        ctx.tools.register(lookup)


def script() -> ScriptedModel:
    replies = []
    for turn in range(TURNS):
        thought = f"I will look key k{turn} up in the table before I answer the question. " * 2
        replies.append(ScriptedModel.tool_call("lookup", {"key": f"k{turn}"}, text=thought, chunks=40))
        replies.append(ScriptedModel.text(f"The answer for turn {turn} is the value found. " * 3, chunks=55))
    return ScriptedModel(replies)


async def run_session() -> tuple[float, tuple[SessionEvent, ...]]:
    model = script()
    start = time.perf_counter()
    async with Harness(plugins=[Tools()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("bench", agent_options=AgentOptions(model="scripted/x")) as handle:
            for turn in range(TURNS):
                await handle.agent.run(f"question {turn}")
            events = tuple(handle.agent.session.events)
    return time.perf_counter() - start, events


async def replay(events: tuple[SessionEvent, ...]) -> float:
    start = time.perf_counter()
    report = await replay_session(events, plugins=[Tools()])
    elapsed = time.perf_counter() - start
    if report.diverged:
        raise SystemExit(f"the benchmark's replay diverged: {report.first_divergence}")
    return elapsed


async def main(backend: str) -> None:
    runs, replays = [], []
    events: tuple[SessionEvent, ...] = ()
    for _ in range(ROUNDS):
        elapsed, events = await run_session()
        runs.append(elapsed)
        replays.append(await replay(events))
    run, again = min(runs), min(replays)
    print(
        f"{backend:>7}: {len(events)} events: run {run * 1e3:7.1f} ms, replay {again * 1e3:7.1f} ms "
        f"-> {again / run:.2f}x (budget <= 1.5x)"
    )


if __name__ == "__main__":
    for name in ("asyncio", "trio"):
        anyio.run(main, name, backend=name)
