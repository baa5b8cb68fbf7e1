"""Benchmark: the tool pipeline's own cost per call, with 0 and 3 listeners on each pipeline event.

Run: ``.venv/bin/python benchmarks/tools.py``. Prints microseconds per call; asserts nothing.
The body (a trivial sync ``add``) is timed on its own and subtracted. Budget: <= 30 us per call
with no listeners.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from dsh_core import CancelSignal, Context, Harness, hookimpl
from dsh_core.tools import tool
from dsh_core.vocabulary import ToolExecution, ToolResult

CALLS = 20_000
ROUNDS = 5


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Listener:
    """One listener on every pipeline event, each doing nothing."""

    @hookimpl
    def dsh_tools_pre_execute(self, execution: ToolExecution) -> None:
        return None

    @hookimpl
    async def dsh_tools_execute(
        self, execution: ToolExecution, call_next: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        return await call_next()

    @hookimpl
    def dsh_tools_post_execute(self, result: ToolResult) -> None:
        return None

    @hookimpl
    def dsh_tools_result(self, result: ToolResult) -> None:
        return None


def body_cost() -> float:
    """Seconds per call of the body alone, called the way the pipeline calls it."""
    best = float("inf")
    execution = ToolExecution(call_id="c", name="add", arguments="")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(CALLS):
            add.function(**add.keyword_arguments({"a": 2, "b": 3}, execution))
        best = min(best, (time.perf_counter() - start) / CALLS)
    return best


async def pipeline_cost(ctx: Context, *, signal: bool) -> float:
    """Best seconds per call of ``ctx.tools.execute`` over several rounds."""
    best = float("inf")
    for _ in range(ROUNDS):
        executions = [
            ToolExecution(
                call_id=f"c{i}",
                name="add",
                arguments='{"a": 2, "b": 3}',
                signal=CancelSignal() if signal else None,
            )
            for i in range(CALLS)
        ]
        start = time.perf_counter()
        for execution in executions:
            await ctx.tools.execute(execution)
        best = min(best, (time.perf_counter() - start) / CALLS)
    return best


async def measure(backend: str, listeners: int) -> dict[str, Any]:
    plugins = [Listener() for _ in range(listeners)]
    async with Harness(plugins=plugins, autoload=False) as ctx:
        ctx.tools.register(add)
        plain = await pipeline_cost(ctx, signal=False)
        with_signal = await pipeline_cost(ctx, signal=True)
    return {"backend": backend, "listeners": listeners, "plain": plain, "signal": with_signal}


def main() -> None:
    body = body_cost()
    print(f"body alone (sync add, argument binding included): {body * 1e6:6.2f} us/call")
    print(
        f"{'backend':8} {'listeners/event':>15} {'no signal':>12} {'with signal':>12}   (pipeline only, body subtracted)"
    )
    for backend in ("asyncio", "trio"):
        for listeners in (0, 3):
            row = anyio.run(measure, backend, listeners, backend=backend)
            print(
                f"{backend:8} {listeners:>15} {(row['plain'] - body) * 1e6:>9.2f} us"
                f" {(row['signal'] - body) * 1e6:>9.2f} us"
            )


if __name__ == "__main__":
    main()
