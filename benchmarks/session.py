"""Session hot paths, in microseconds: append, derive_messages() per step, assembler and stream per chunk.

Run: ``.venv/bin/python benchmarks/session.py``. Prints figures, asserts nothing. Each figure is the
best of several rounds (the least disturbed by the machine). Budgets (issue 3): append <= 3 us per
small event with no listener; the per-step derive cost flat in log length (100k within 1.5x of 1k).
"""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import anyio

from dsh_core import Context, Harness, hookimpl
from dsh_core._assembler import BlockAssembler
from dsh_core._content import AssistantMessage, Text, ToolCall, ToolResultMessage, UserMessage
from dsh_core._defaults.llm_runtime import LlmRuntime
from dsh_core._defaults.sessions import Session
from dsh_core._llm_types import Chunk, Finish, LlmRequest, ModelInfo, TextDelta, Usage

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


async def append_costs(ctx: Context, label: str) -> None:
    # Fresh live sessions, one per round, so every round appends to a published session of equal size.
    sessions = iter([await ctx.sessions.create(f"{label}-{i}") for i in range(ROUNDS * 2)])

    def run(data: dict[str, Any]) -> float:
        session = next(sessions)
        n = 20_000
        start = time.perf_counter()
        for _ in range(n):
            session.append("assistant/chunk", data)
        return (time.perf_counter() - start) / n * 1e6

    small = best_of(ROUNDS, lambda: run(SMALL))
    chunk = best_of(ROUNDS, lambda: run(CHUNK))
    print(f"append, {label}: {small:5.2f} us/event (3 ints)   {chunk:5.2f} us/event (assistant/chunk shape)")


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
                "assistant/chunk", {"turn": turn, "step": 1, "chunk": {"type": "text-delta", "index": index}}
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


def derive_costs(ctx: Context) -> None:
    user = {"message": UserMessage("and then?").to_json()}
    answer = {"turn": 0, "step": 1, "message": AssistantMessage("sure").to_json()}
    chunk = {"turn": 0, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "s"}}
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
        derive = best_of(ROUNDS, derive_only)
        messages = len(fresh(size).derive_messages())
        print(
            f"derive step at {size:>7,} events ({messages:>5,} messages): {results[size]:6.2f} us/step "
            f"(4 appends + derive_messages()); derive_messages() alone {derive:5.3f} us"
        )
    ratio = results[100_000] / results[1_000]
    print(f"derive step, 100k / 1k: {ratio:4.2f}x (budget 1.5x)")


def assembler_cost() -> None:
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

    print(f"assembler: {best_of(ROUNDS, run):5.3f} us/chunk (add + the final message(), 4 blocks)")


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


async def stream_cost(backend: str) -> None:
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

    raw = min([await direct() for _ in range(ROUNDS)])
    wrapped = min([await through() for _ in range(ROUNDS)])
    print(
        f"llm stream ({backend}): {wrapped:5.3f} us/chunk through ctx.llm.stream, "
        f"{raw:5.3f} us/chunk reading the adapter directly (+{wrapped - raw:5.3f})"
    )


async def main() -> None:
    async with Harness(autoload=False) as ctx:
        await append_costs(ctx, "0 listeners")
        listeners = [Listener() for _ in range(5)]
        for listener in listeners:
            ctx.register_plugin(listener)
        await append_costs(ctx, "5 listeners")
    async with Harness(autoload=False) as ctx:
        derive_costs(ctx)
    assembler_cost()


if __name__ == "__main__":
    anyio.run(main)
    for backend in ("asyncio", "trio"):
        anyio.run(stream_cost, backend, backend=backend)
