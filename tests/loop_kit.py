"""Shared helpers for the agent-loop tests: a harness with a scripted model and the event-type trail."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from dsh_core import AgentOptions, Context, Harness
from dsh_core.testing import ScriptedModel

MODEL = AgentOptions(model="scripted/test")

#: event types that are noise in a type trail (chunks are counted separately)
_QUIET = frozenset({"assistant/chunk", "request/header", "request/header-delta"})


@asynccontextmanager
async def running(
    model: ScriptedModel, plugins: Sequence[object] = (), config: dict[str, Any] | None = None
) -> AsyncIterator[Context]:
    async with Harness(config=config, plugins=plugins, autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        yield ctx


def trail(events: Sequence[Any], *, quiet: bool = True) -> list[str]:
    """The session's event types, without chunks and headers unless ``quiet`` is off."""
    return [event.type for event in events if not (quiet and event.type in _QUIET)]


# ---------------------------------------------------------------------- added for the error, lifecycle,
# inbox and scale suites (the helpers above are unchanged)


def assert_tool_calls_answered(messages: Sequence[Any]) -> None:
    """``messages`` (a ``derive_messages()`` result) is a valid request history: every tool call of
    an assistant message is answered by its tool result, in the model's order, before any other
    message."""
    from dsh_core import AssistantMessage, ToolResultMessage

    pending: list[str] = []
    for position, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            assert pending, f"message {position}: a tool result answers no open tool call ({message.call_id!r})"
            assert message.call_id == pending[0], (
                f"message {position}: tool result for {message.call_id!r}, expected one for {pending[0]!r}"
            )
            pending.pop(0)
            continue
        assert not pending, f"message {position}: tool calls {pending} have no result before it"
        if isinstance(message, AssistantMessage):
            pending = [call.id for call in message.tool_calls]
    assert not pending, f"tool calls {pending} have no result at the end of the history"


def turn_trail(events: Sequence[Any], turn: int, *, quiet: bool = True) -> list[str]:
    """The event types from ``turn/start`` of ``turn`` to its ``turn/end`` (inclusive)."""
    start = next(e.seq for e in events if e.type == "turn/start" and e.data["turn"] == turn)
    end = next(e.seq for e in events if e.type == "turn/end" and e.data["turn"] == turn)
    return trail(list(events)[start : end + 1], quiet=quiet)


def turn_end(events: Sequence[Any], turn: int) -> Any:
    """The ``reason`` of the ``turn/end`` of ``turn`` (as logged JSON)."""
    return next(e.data["reason"] for e in events if e.type == "turn/end" and e.data["turn"] == turn)
