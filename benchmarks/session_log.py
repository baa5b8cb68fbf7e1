"""The session log's own costs, in microseconds: typed and raw appends, derive steps, the codec, resume.

Run: ``.venv/bin/python benchmarks/session_log.py``; ``--against TREE`` measures this tree and another
checkout (e.g. ``git worktree add /work/wt/base 1d609ea``) alternately in one run and prints the ratio of
each figure (this tree over the baseline; issue 16's budget: at most 0.7x). Prints figures, asserts
nothing. Each figure is the best of several rounds (the least disturbed by the machine), in CPU time of
the process (the machine is shared: time spent descheduled is not counted).

- ``append, typed chunk``: one streamed chunk as the loop appends it (``AssistantChunkEvent``).
- ``append, raw chunk``: ``append("assistant/chunk", data)``: a declared type given as JSON, checked
  by its type's rules.
- ``append, raw undeclared``: free JSON of a type nothing declares.
- ``derive step, raw``/``typed``: a user message, two chunks and an assistant message appended, then
  ``derive_messages()`` (at 1,000 events).
- ``message to_json``/``from_json``: an assistant message with text and a tool call.
- ``event to_json``/``from_json``: a stored ``tool/result`` event, as persistence writes and reads it.
- ``payload read``: the typed payload of stored (frozen) data, as ``check_log`` and ``event.payload``
  read it: a streamed chunk, and an assistant message with text and a tool call.
- ``check_log per event``: a stored log of 4,000 events checked as a resume checks it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

import anyio
from _compare import main as compare_main

from dsh_core import AssistantMessage, Harness, SessionEvent, Text, ToolCall, ToolResultMessage, UserMessage
from dsh_core.llm import TextDelta
from dsh_core.session_log import AssistantChunkEvent, AssistantMessageEvent, UserMessageEvent, read_payload
from dsh_core.vocabulary import freeze_json_object

try:  # the folder layout
    from dsh_core.session_log import check_log
except ImportError:  # the flat layout of 1d609ea
    from dsh_core._defaults._session import check_log  # type: ignore[import-not-found, no-redef, unused-ignore]

ROUNDS = 7
#: CPU time of this process, not wall time: on a shared machine a descheduled child is not charged
_clock = time.process_time
N = 20_000

CHUNK = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "hello"}}
SMALL = {"turn": 1, "step": 1, "index": 3}
DELTA = TextDelta(0, "hello")


def best_of(rounds: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(rounds))


def timed(n: int, body: Callable[[], object]) -> float:
    gc.collect()
    gc.disable()
    try:
        start = _clock()
        for _ in range(n):
            body()
        return (_clock() - start) / n * 1e6
    finally:
        gc.enable()


def build_log(session: Any, events: int) -> None:
    """A realistic mix: per turn a user message, chunks, an assistant message, a tool call and result."""
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
        session.append("tool/call", {"turn": turn, "step": 1, "call_id": call.id, "name": "read", "arguments": "{}"})
        result = ToolResultMessage(call.id, "contents")
        session.append("tool/result", {"turn": turn, "step": 1, "message": result.to_json()})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


async def appends(figures: dict[str, float]) -> None:
    async with Harness(autoload=False) as ctx:
        sessions = iter([await ctx.sessions.create(f"s-{i}") for i in range(ROUNDS * 3)])

        def typed() -> float:
            append = next(sessions).append
            return timed(N, lambda: append(AssistantChunkEvent(turn=1, step=1, chunk=DELTA)))

        def raw(event_type: str, data: dict[str, Any]) -> Callable[[], float]:
            def run() -> float:
                append = next(sessions).append
                return timed(N, lambda: append(event_type, data))

            return run

        figures["append, typed chunk (the loop's way)"] = best_of(ROUNDS, typed)
        figures["append, raw chunk: append('assistant/chunk', data)"] = best_of(ROUNDS, raw("assistant/chunk", CHUNK))
        figures["append, raw undeclared type (3 ints)"] = best_of(ROUNDS, raw("bench/small", SMALL))


def derives(figures: dict[str, float]) -> None:
    async def body() -> None:
        async with Harness(autoload=False) as ctx:
            counter = iter(range(1_000_000))
            user_json = {"message": UserMessage("and then?").to_json()}
            answer_json = {"turn": 1, "step": 1, "message": AssistantMessage("sure").to_json()}
            steps = 200

            def fresh() -> Any:
                session = ctx.sessions.prepare(f"derive-{next(counter)}")
                build_log(session, 1_000)
                return session

            def raw_step() -> float:
                session = fresh()
                append = session.append

                def step() -> None:
                    append("user/message", user_json)
                    append("assistant/chunk", CHUNK)
                    append("assistant/chunk", CHUNK)
                    append("assistant/message", answer_json)
                    session.derive_messages()

                return timed(steps, step)

            def typed_step() -> float:
                session = fresh()
                append = session.append

                def step() -> None:
                    append(UserMessageEvent(message=UserMessage("and then?")))
                    append(AssistantChunkEvent(turn=1, step=1, chunk=DELTA))
                    append(AssistantChunkEvent(turn=1, step=1, chunk=DELTA))
                    append(AssistantMessageEvent(turn=1, step=1, message=AssistantMessage("sure")))
                    session.derive_messages()

                return timed(steps, step)

            figures["derive step, raw appends (4 appends + derive)"] = best_of(ROUNDS, raw_step)
            figures["derive step, typed appends (4 appends + derive)"] = best_of(ROUNDS, typed_step)

    anyio.run(body)


def codec(figures: dict[str, float]) -> None:
    message = AssistantMessage((Text("let me look at that file"), ToolCall("c1", "read", '{"path": "a.txt"}')))
    as_json = message.to_json()
    figures["message to_json (text + tool call)"] = best_of(ROUNDS, lambda: timed(N, message.to_json))
    figures["message from_json (text + tool call)"] = best_of(
        ROUNDS, lambda: timed(N, lambda: AssistantMessage.from_json(as_json))
    )
    result = ToolResultMessage("c1", "contents of a.txt")
    event = SessionEvent("tool/result", 7, 1.5, {"turn": 1, "step": 1, "message": result.to_json()})
    stored = event.to_json()
    figures["event to_json (tool/result)"] = best_of(ROUNDS, lambda: timed(N, event.to_json))
    figures["event from_json (tool/result)"] = best_of(ROUNDS, lambda: timed(N, lambda: SessionEvent.from_json(stored)))
    chunk_data = freeze_json_object(CHUNK, where="bench")
    reply_data = freeze_json_object({"turn": 1, "step": 1, "message": message.to_json()}, where="bench")
    figures["payload read, assistant/chunk"] = best_of(
        ROUNDS, lambda: timed(N, lambda: read_payload("assistant/chunk", chunk_data))
    )
    figures["payload read, assistant/message (text + tool call)"] = best_of(
        ROUNDS, lambda: timed(N, lambda: read_payload("assistant/message", reply_data))
    )


def resume(figures: dict[str, float]) -> None:
    async def body() -> None:
        async with Harness(autoload=False) as ctx:
            session = ctx.sessions.prepare("stored")
            build_log(session, 4_000)
            stored = [SessionEvent.from_json(event.to_json()) for event in session.events]
            meta = session.meta

            def run() -> float:
                events = [SessionEvent.from_json(event.to_json()) for event in stored]
                gc.collect()
                start = _clock()
                check_log("x", meta, events)
                return (_clock() - start) / len(events) * 1e6

            figures["check_log per stored event (resume)"] = best_of(ROUNDS, run)

    anyio.run(body)


def measure_all() -> dict[str, float]:
    figures: dict[str, float] = {}
    anyio.run(appends, figures)
    derives(figures)
    codec(figures)
    resume(figures)
    return figures


def show(figures: dict[str, float]) -> None:
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:8.3f} us")


if __name__ == "__main__":
    compare_main(__file__, measure_all, show)
