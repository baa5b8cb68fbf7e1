"""What an approval costs a tool step: an ``Ask`` answered at once by a policy, against no ask, same run.

Approvals are logged records (SPEC §10.1): an asked call appends ``approval/requested`` and
``approval/resolved`` and runs only once resolved, so the question is whether a policy plugin can
afford to answer every call that way. Four tool steps, measured in this process on each backend,
interleaved, best of ``--rounds`` (process CPU time; a zero-latency ``ScriptedModel``; no
persistence, so no flush):

* **plain**: no ``tools/pre-execute`` listener;
* **no ask**: a ``tools/pre-execute`` listener that lets the call run (the fair baseline: a policy
  plugin is there either way);
* **ask + policy**: that listener answers ``Ask``, and an ``approval/answer`` listener (a policy)
  answers ``True`` at once;
* **ask + service**: ``Ask``, answered ``True`` at once by an ``approval`` service (the CLI's path,
  which races the API under a cancel scope).

A figure is (a turn of ``STEPS`` tool steps and a text step - a turn of the text step) / ``STEPS``,
each turn time the least over batches of ``PER_AGENT`` turns (a shared machine disturbs some).
Budget: **ask + policy <= 1.3x no ask**. Run ``python benchmarks/approvals.py [--rounds N] [--json]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from typing import Any

STEPS = 10
TURNS = 60
PER_AGENT = 10
BACKENDS = ("asyncio", "trio")
CASES = ("plain", "no ask", "ask + policy", "ask + service")


def figures(backend: str, rounds: int) -> dict[str, float]:
    import anyio

    from dsh_core import AgentOptions, Allow, Ask, Harness, hookimpl, tool
    from dsh_core.testing import ScriptedModel

    options = AgentOptions(model="scripted/bench")

    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    class Gate:
        name = "gate"

        def __init__(self, ask: bool) -> None:
            self.ask = ask

        @hookimpl
        def dsh_tools_pre_execute(self, execution: Any) -> Any:
            return Ask("policy checks every call") if self.ask else Allow()

    class Policy:
        name = "policy"

        @hookimpl
        def dsh_approval_answer(self, execution: Any, request: Any) -> bool:
            return True

    class Service:
        name = "service"
        provides = ("approval",)

        def start(self, ctx: Any) -> None:
            ctx.provide("approval", self)

        async def approve(self, execution: Any, reason: str) -> bool:
            return True

    plugins: dict[str, tuple[object, ...]] = {
        "plain": (),
        "no ask": (Gate(ask=False),),
        "ask + policy": (Gate(ask=True), Policy()),
        "ask + service": (Gate(ask=True), Service()),
    }

    async def per_turn(ctx: Any, model: Any, replies: list[Any]) -> float:
        """The least time per turn over batches of ``PER_AGENT`` turns (the least disturbed batch)."""
        best = float("inf")
        for batch in range(TURNS // PER_AGENT):
            async with await ctx.agents.create(f"b-{time.monotonic_ns()}-{batch}", agent_options=options) as handle:
                agent = handle.agent
                model.add(*(replies * PER_AGENT))
                gc.collect()
                gc.disable()
                start = time.process_time()
                for _ in range(PER_AGENT):
                    await agent.run("go")
                best = min(best, (time.process_time() - start) / PER_AGENT)
                gc.enable()
        model.requests.clear()
        return best

    async def one_case(case: str) -> float:
        model = ScriptedModel()
        async with Harness(autoload=False, plugins=plugins[case]) as ctx:
            ctx.llm.register_adapter("scripted", model)
            ctx.tools.register(ping)
            text = await per_turn(ctx, model, [ScriptedModel.text("done")])
            tools = await per_turn(ctx, model, [ScriptedModel.tool_call("ping")] * STEPS + [ScriptedModel.text("done")])
        return (tools - text) / STEPS * 1e6

    async def run() -> dict[str, float]:
        best = dict.fromkeys(CASES, float("inf"))
        for _ in range(rounds):
            for case in CASES:  # interleaved: a disturbance hits every case alike
                best[case] = min(best[case], await one_case(case))
        return best

    result: dict[str, float] = anyio.run(run, backend=backend)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    for backend in BACKENDS:
        found = figures(backend, args.rounds)
        ratio = found["ask + policy"] / found["no ask"]
        report[backend] = {**{case: round(value, 1) for case, value in found.items()}, "ratio": round(ratio, 2)}
    if args.json:
        print(json.dumps(report))
        return
    print(f"tool step (us, best of {args.rounds}); budget: ask + policy <= 1.3x no ask")
    for backend, found in report.items():
        cells = "  ".join(f"{case} {found[case]:7.1f}" for case in CASES)
        verdict = "ok" if found["ratio"] <= 1.3 else "OVER BUDGET"
        print(f"  {backend:8} {cells}  ratio x{found['ratio']:.2f} ({verdict})")


if __name__ == "__main__":
    main()
