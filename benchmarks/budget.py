"""Benchmark: what the ``budget`` plugin adds per tool step, against the same run without it.

Run: ``.venv/bin/python benchmarks/budget.py [--rounds N] [--backend asyncio|trio] [--session]``. Prints the
CPU time per tool step of each set-up and its ratio to the run without the plugin, measured in the
same process; asserts nothing. The garbage collector is off while a turn is timed (it runs
between turns), so a collection does not land on whichever set-up allocates next. Every set-up's harness is open for the whole run and they take turns
in short slices (rotated), so the load of a shared machine hits them alike; the ratio is taken
within a round, and the median and range over rounds are printed. A tool step is one model request
(a ``Usage`` and a text chunk streamed) and one tool call, against a zero-latency ScriptedModel and a
trivial tool, so the figure is the harness's own cost. Each turn has a fresh agent (the plugin's
per-agent set-up is paid every turn, the worst case), or with ``--session`` one agent runs a
slice's five turns in a row, as a session does. Budget (issue 33): at most 1.1x per step with
every limit set.

Set-ups: ``every limit`` sets all six limits of ``[plugins.budget]`` high enough never to stop a
turn, so each step pays for every check (the gate, ``max_tokens`` lowering on ``agent/request``, the
tool-call guard, ``agent/turn-stop``, ``budget/usage`` at the turn end) and prices are known;
``all but tools`` leaves out ``max_tool_calls_per_turn``, whose guard (a call beyond the limit is
denied) takes every tool call through the tool pipeline's gated path, with a cancel scope armed;
``no limit`` loads the plugin with none set (it still logs ``budget/usage``).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
from dsh_budget import BudgetPlugin

from dsh_core import AgentOptions, Context, Harness, tool
from dsh_core.llm import Prices, Usage
from dsh_core.testing import ScriptedModel

OPTIONS = AgentOptions(model="scripted/bench")
#: one agent for a slice's turns (a session of several turns) instead of a fresh one per turn
SESSION = False
STEPS = 10
PER_SLICE = 5
SLICES = 8
PRICES = Prices(input=1.0, output=10.0, cached_input=0.1)
EVERY_LIMIT = {
    "max_turn_tokens": 10**12,
    "max_session_tokens": 10**15,
    "max_turn_cost": 10.0**9,
    "max_session_cost": 10.0**12,
    "max_steps_per_turn": 10**6,
    "max_tool_calls_per_turn": 10**6,
}


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


def _script() -> list[Any]:
    steps = [ScriptedModel.tool_call("ping", text="checking", usage=Usage(100, 10)) for _ in range(STEPS)]
    return [*steps, ScriptedModel.text("done", usage=Usage(100, 5))]


class SetUp:
    """One configuration, with its harness open for the whole run."""

    def __init__(self, name: str, limits: dict[str, Any] | None) -> None:
        self.name = name
        self.limits = limits
        self.ctx: Context | None = None
        self.model = ScriptedModel(prices=PRICES)
        self.turns = 0

    async def open(self, stack: AsyncExitStack) -> None:
        plugins: list[object] = [] if self.limits is None else [BudgetPlugin()]
        config = {"plugins": {"budget": self.limits}} if self.limits is not None else None
        self.ctx = await stack.enter_async_context(Harness(config=config, plugins=plugins, autoload=False))
        self.ctx.llm.register_adapter("scripted", self.model)
        self.ctx.tools.register(ping)

    async def slice(self) -> float:
        """CPU seconds for PER_SLICE turns of STEPS tool steps each (a fresh agent per turn, or one
        agent for the slice's turns with ``--session``)."""
        assert self.ctx is not None
        total = 0.0
        handle = None
        for _ in range(PER_SLICE):
            self.turns += 1
            self.model.add(*_script())
            if handle is None or not SESSION:
                handle = await self.ctx.agents.create(f"{self.name}-{self.turns}", agent_options=OPTIONS)
            gc.collect()
            gc.disable()  # a collection lands on whichever set-up allocates next: noise, not cost
            start = time.process_time()
            outcome = await handle.agent.run("go")
            total += time.process_time() - start
            gc.enable()
            assert outcome.kind == "completed", outcome.reason
            if not SESSION:
                await handle.dispose()
        if SESSION and handle is not None:
            await handle.dispose()
        self.model.requests.clear()  # the model keeps every request: the heap must not grow with the run
        return total


async def main(rounds: int) -> None:
    but_tools = {key: value for key, value in EVERY_LIMIT.items() if key != "max_tool_calls_per_turn"}
    setups = [
        SetUp("no plugin", None),
        SetUp("every limit", EVERY_LIMIT),
        SetUp("all but tools", but_tools),
        SetUp("no limit", {}),
    ]
    steps = PER_SLICE * (STEPS + 1)
    async with AsyncExitStack() as stack:
        for setup in setups:
            await setup.open(stack)
        for setup in setups:  # warm up
            await setup.slice()
        per_step: dict[str, list[float]] = {setup.name: [] for setup in setups}
        ratios: dict[str, list[float]] = {setup.name: [] for setup in setups[1:]}
        for round_number in range(rounds):
            spent = dict.fromkeys(per_step, 0.0)
            for index in range(SLICES):
                turn = (index + round_number) % len(setups)
                for setup in setups[turn:] + setups[:turn]:
                    seconds = await setup.slice()
                    spent[setup.name] += seconds
                    per_step[setup.name].append(seconds / steps)
            for name in ratios:
                ratios[name].append(spent[name] / spent["no plugin"])
    kind = f"one agent for {PER_SLICE} turns" if SESSION else "a fresh agent per turn"
    print(f"budget plugin: CPU time per step ({STEPS} tool steps + 1 answer per turn, {kind}), {rounds} rounds")
    floor = min(per_step["no plugin"])
    for name, values in per_step.items():
        line = f"  {name:13s} median {statistics.median(values) * 1e6:7.1f} us/step, best {min(values) * 1e6:7.1f}"
        if name in ratios:
            r = ratios[name]
            line += (
                f"   x{statistics.median(r):.3f} per round (range x{min(r):.3f}-x{max(r):.3f}),"
                f" x{min(values) / floor:.3f} best to best"
            )
        print(line)
    print("  budget: <= x1.10 with every limit set")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    parser.add_argument("--session", action="store_true", help=f"one agent runs {PER_SLICE} turns in a row")
    args = parser.parse_args()
    SESSION = args.session
    anyio.run(main, args.rounds, backend=args.backend)
