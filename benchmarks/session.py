"""Session hot paths, in microseconds: append, derive_messages() per step, assembler and stream per chunk.

Run: ``.venv/bin/python benchmarks/session.py``. Prints figures, asserts nothing. Each figure is the
best of several rounds (the least disturbed by the machine). Budgets (issue 3): append <= 3 us per
small event with no listener; the per-step derive cost flat in log length (100k within 1.5x of 1k).

"chunk append, the loop's way" appends one streamed chunk as the loop of the tree does: its
``AssistantChunkEvent.trusted`` constructor where it has one (the loop builds the payload from
its own turn and step and a chunk its assembler took), else the typed ``AssistantChunkEvent``
where the tree has the session-log catalogue, else the old hand-frozen dict.
``--against TREE`` measures this tree and another checkout alternately and prints the ratios
(issue 16's baseline: ``git worktree add /tmp/base 1d609ea``, then ``--against /tmp/base``).
"""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import anyio
from _compare import main as compare_main

from dsh_core import (
    AssistantMessage,
    Context,
    Harness,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    hookimpl,
)
from dsh_core.llm import BlockAssembler, Chunk, Finish, LlmRequest, ModelInfo, TextDelta, Usage

try:
    from dsh_core.services.llm_runtime import LlmRuntime
    from dsh_core.services.sessions import Session
except ImportError:  # a tree before the core's folders, such as 1d609ea (for --against)
    from dsh_core._defaults.llm_runtime import LlmRuntime  # type: ignore[no-redef]
    from dsh_core._defaults.sessions import Session  # type: ignore[no-redef]

ROUNDS = 5


def best_of(rounds: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(rounds))


class Listener:
    """A cheap session/event listener, like a persistence plugin buffering events."""

    def __init__(self) -> None:
        self.seen = 0

    @hookimpl
    def dsh_session_event(self, event: Any) -> None:
        self.seen += 1


SMALL = {"turn": 1, "step": 1, "index": 3}
CHUNK = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "hello"}}
DELTA = TextDelta(0, "hello")


def chunk_appender(session: Session) -> Callable[[], object]:
    """One streamed chunk appended as the loop of this tree does it."""
    try:
        from dsh_core.session_log import AssistantChunkEvent
    except ImportError:  # a tree before the catalogue: the loop froze the dict by hand
        from dsh_core.vocabulary import frozen_trusted  # type: ignore[attr-defined, unused-ignore]

        def old_way() -> object:
            chunk = frozen_trusted(DELTA.to_json())
            return session.append("assistant/chunk", frozen_trusted({"turn": 1, "step": 1, "chunk": chunk}))

        return old_way
    append = session.append
    trusted = getattr(AssistantChunkEvent, "trusted", None)
    if trusted is not None:
        return lambda: append(trusted(1, 1, DELTA))
    return lambda: append(AssistantChunkEvent(turn=1, step=1, chunk=DELTA))


async def append_costs(ctx: Context, label: str, figures: dict[str, float]) -> None:
    # Fresh live sessions, one per round, so every round appends to a published session of equal size.
    sessions = iter([await ctx.sessions.create(f"{label}-{i}") for i in range(ROUNDS * 3)])
    n = 20_000

    def run(event_type: str, data: dict[str, Any]) -> float:
        session = next(sessions)
        start = time.perf_counter()
        for _ in range(n):
            session.append(event_type, data)
        return (time.perf_counter() - start) / n * 1e6

    def loop_way() -> float:
        append = chunk_appender(next(sessions))
        start = time.perf_counter()
        for _ in range(n):
            append()
        return (time.perf_counter() - start) / n * 1e6

    figures[f"append, {label}: undeclared type, 3 ints"] = best_of(ROUNDS, lambda: run("bench/small", SMALL))
    figures[f"append, {label}: assistant/chunk as (type, data)"] = best_of(
        ROUNDS, lambda: run("assistant/chunk", CHUNK)
    )
    figures[f"append, {label}: chunk append, the loop's way"] = best_of(ROUNDS, loop_way)


def build_log(session: Session, events: int) -> None:
    """A realistic mix: per step a user message, chunks, an assistant message, a tool call and result."""
    turn = 0
    while len(session.events) < events:
        turn += 1
        session.append("turn/start", {"turn": turn})
        session.append("step/start", {"turn": turn, "step": 1})
        session.append("user/message", {"message": UserMessage(f"question {turn}").to_json()})
        for index in range(12):
            session.append(
                "assistant/chunk", {"turn": turn, "step": 1, "chunk": {"type": "text-delta", "index": index, "text": "t"}}
            )
        call = ToolCall(f"call-{turn}", "read", '{"path": "a.txt"}')
        reply = AssistantMessage((Text("let me look"), call))
        session.append("assistant/message", {"turn": turn, "step": 1, "message": reply.to_json()})
        session.append(
            "tool/call", {"turn": turn, "step": 1, "call_id": call.id, "name": "read", "arguments": "{}"}
        )
        result = ToolResultMessage(call.id, "contents")
        session.append("tool/result", {"turn": turn, "step": 1, "message": result.to_json()})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def derive_costs(ctx: Context, figures: dict[str, float]) -> None:
    user = {"message": UserMessage("and then?").to_json()}
    answer = {"turn": 1, "step": 1, "message": AssistantMessage("sure").to_json()}
    chunk = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "s"}}
    steps = 100  # each round starts from a freshly built log; 100 steps add 400 events to it
    counter = iter(range(1_000_000))
    results: dict[int, float] = {}
    for size in (1_000, 10_000, 100_000):

        def fresh(size: int = size) -> Session:
            session: Session = ctx.sessions.prepare(f"derive-{size}-{next(counter)}")
            build_log(session, size)
            gc.collect()
            return session

        def step_total(size: int = size) -> float:
            session = fresh(size)
            start = time.perf_counter()
            for _ in range(steps):
                session.append("user/message", user)
                session.append("assistant/chunk", chunk)
                session.append("assistant/chunk", chunk)
                session.append("assistant/message", answer)
                session.derive_messages()
            return (time.perf_counter() - start) / steps * 1e6

        def derive_only(size: int = size) -> float:
            session = fresh(size)
            spent = 0.0
            for _ in range(steps):
                session.append("assistant/message", answer)
                start = time.perf_counter()
                session.derive_messages()
                spent += time.perf_counter() - start
            return spent / steps * 1e6

        results[size] = best_of(ROUNDS, step_total)
        figures[f"derive step at {size:,} events (4 appends + derive)"] = results[size]
        figures[f"derive_messages() alone at {size:,} events"] = best_of(ROUNDS, derive_only)


def assembler_cost(figures: dict[str, float]) -> None:
    chunks: list[Chunk] = [TextDelta(i % 4, "tok") for i in range(4_000)]
    chunks.append(Usage(100, 4_000))
    chunks.append(Finish("stop"))

    def run() -> float:
        start = time.perf_counter()
        for _ in range(20):
            assembler = BlockAssembler("fake", "m")
            for chunk in chunks:
                assembler.add(chunk)
            assembler.message()
        return (time.perf_counter() - start) / (20 * len(chunks)) * 1e6

    figures["assembler per chunk (add + the final message(), 4 blocks)"] = best_of(ROUNDS, run)


class Firehose:
    """An adapter streaming N text deltas then a Finish, as fast as Python allows."""

    def __init__(self, n: int) -> None:
        self.n = n

    async def stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
        delta = TextDelta(0, "tok")
        for _ in range(self.n):
            yield delta
        yield Finish("stop")

    def model_info(self, model: str) -> ModelInfo:
        return ModelInfo(1000, 100)


async def stream_cost(backend: str, figures: dict[str, float]) -> None:
    n = 50_000
    adapter = Firehose(n)
    runtime = LlmRuntime()
    runtime.register_adapter("fire", adapter)
    request = LlmRequest("fire", "m", (UserMessage("go"),))

    async def direct() -> float:
        start = time.perf_counter()
        async for _ in adapter.stream(request):
            pass
        return (time.perf_counter() - start) / n * 1e6

    async def through() -> float:
        start = time.perf_counter()
        async for _ in runtime.stream(request):
            pass
        return (time.perf_counter() - start) / n * 1e6

    figures[f"llm stream ({backend}) per chunk, adapter alone"] = min([await direct() for _ in range(ROUNDS)])
    figures[f"llm stream ({backend}) per chunk, through ctx.llm.stream"] = min([await through() for _ in range(ROUNDS)])


async def main(figures: dict[str, float]) -> None:
    async with Harness(autoload=False) as ctx:
        await append_costs(ctx, "0 listeners", figures)
        listeners = [Listener() for _ in range(5)]
        for listener in listeners:
            ctx.register_plugin(listener)
        await append_costs(ctx, "5 listeners", figures)
    async with Harness(autoload=False) as ctx:
        derive_costs(ctx, figures)
    assembler_cost(figures)


def measure_all() -> dict[str, float]:
    figures: dict[str, float] = {}
    anyio.run(main, figures)
    for backend in ("asyncio", "trio"):
        anyio.run(stream_cost, backend, figures, backend=backend)
    return figures


def show(figures: dict[str, float]) -> None:
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:8.3f} us")
    ratio = figures["derive step at 100,000 events (4 appends + derive)"] / figures["derive step at 1,000 events (4 appends + derive)"]
    print(f"derive step, 100k / 1k: {ratio:4.2f}x (budget 1.5x)")


if __name__ == "__main__":
    compare_main(__file__, measure_all, show)
