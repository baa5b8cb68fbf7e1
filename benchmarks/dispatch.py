"""Cost of dispatching one event, per mode, with 0, 1 and 10 sync listeners, against pluggy's own call.

Prints ns per dispatch and the ratio of our per-listener cost to pluggy's ``pm.hook.x()`` on the same
listeners in the same run. Budgets (issue 2): an event with no listener costs <= 1 us; each added sync
listener costs <= 1.5x pluggy's per-listener cost.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from dsh_core import hookimpl, hookspec
from dsh_core.host import Dispatcher, new_plugin_manager

ROUNDS = 20_000


class Spec:
    @hookspec(mode="notify", subject="agent")
    def dsh_bench_notify(self, agent: Any, value: int) -> None: ...

    @hookspec(mode="waterfall", value="value", subject="agent")
    def dsh_bench_waterfall(self, agent: Any, value: int) -> int | None: ...

    @hookspec(mode="serial", subject="agent")
    def dsh_bench_serial(self, agent: Any, value: int) -> int | None: ...

    @hookspec(mode="parallel", subject="agent")
    def dsh_bench_parallel(self, agent: Any, value: int) -> None: ...

    @hookspec(mode="around", subject="agent")
    def dsh_bench_around(self, agent: Any, value: int, call_next: Any) -> Any: ...


class Listener:
    @hookimpl
    def dsh_bench_notify(self, value: int) -> None:
        return None

    @hookimpl
    def dsh_bench_waterfall(self, value: int) -> None:
        return None

    @hookimpl
    def dsh_bench_serial(self, value: int) -> None:
        return None

    @hookimpl
    def dsh_bench_parallel(self, value: int) -> None:
        return None

    @hookimpl
    def dsh_bench_around(self, value: int, call_next: Any) -> Any:
        return call_next()


class Agent:
    id = "a"


async def _inner() -> int:
    return 1


def _sync_inner() -> int:
    return 1


def make(listeners: int) -> Dispatcher:
    events = Dispatcher(new_plugin_manager())
    events.add_specs(Spec)
    for index in range(listeners):
        events.register(Listener(), name=f"l{index}")
    return events


async def ns_per_call(call: Callable[[], Awaitable[object]]) -> float:
    for _ in range(1000):
        await call()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(ROUNDS):
            await call()
        best = min(best, (time.perf_counter_ns() - start) / ROUNDS)
    return best


def pluggy_ns(events: Dispatcher, hook: str) -> float:
    caller = getattr(events._pm.hook, hook)
    extra = {"call_next": _sync_inner} if hook.endswith("around") else {}
    agent = Agent()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(ROUNDS):
            caller(agent=agent, value=1, **extra)
        best = min(best, (time.perf_counter_ns() - start) / ROUNDS)
    return best


async def main() -> None:
    agent = Agent()
    calls: dict[str, Callable[[Dispatcher], Callable[[], Awaitable[object]]]] = {
        "notify": lambda e: lambda: e.notify("bench/notify", agent=agent, value=1),
        "waterfall": lambda e: lambda: e.waterfall("bench/waterfall", 1, agent=agent),
        "serial": lambda e: lambda: e.serial("bench/serial", agent=agent, value=1),
        "parallel": lambda e: lambda: e.parallel("bench/parallel", agent=agent, value=1),
        "around": lambda e: lambda: e.around("bench/around", _inner, agent=agent, value=1),
    }
    print(f"{'mode':<10} {'n':>3} {'dsh ns':>9} {'pluggy ns':>10} {'dsh/listener':>13} {'pluggy/listener':>16} {'ratio':>6}")
    for mode, make_call in calls.items():
        base_ours = base_pluggy = 0.0
        for n in (0, 1, 10):
            events = make(n)
            ours = await ns_per_call(make_call(events))
            theirs = pluggy_ns(events, f"dsh_bench_{mode}")
            if n == 0:
                base_ours, base_pluggy = ours, theirs
                print(f"{mode:<10} {n:>3} {ours:>9.0f} {theirs:>10.0f} {'':>13} {'':>16} {'':>6}")
                continue
            per_ours = (ours - base_ours) / n
            per_pluggy = (theirs - base_pluggy) / n
            ratio = per_ours / per_pluggy if per_pluggy > 0 else float("nan")
            print(f"{mode:<10} {n:>3} {ours:>9.0f} {theirs:>10.0f} {per_ours:>13.0f} {per_pluggy:>16.0f} {ratio:>6.2f}")
    print("budgets: 0 listeners <= 1000 ns; per listener ratio <= 1.5 (the around mode's listeners also run the chain)")


if __name__ == "__main__":
    for backend in ("asyncio", "trio"):
        print(f"--- {backend}")
        anyio.run(main, backend=backend)
