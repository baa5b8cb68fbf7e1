"""Shared helpers for the compaction tests: a harness with the plugin, a model that answers by request, checks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from dsh_compaction import CompactionPlugin
from dsh_compaction._summarise import SUMMARY_PROMPT

from dsh_core import (
    AgentOptions,
    AssistantMessage,
    Context,
    Harness,
    Message,
    SessionEvent,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    tool,
)
from dsh_core.llm import Chunk, LlmRequest, ModelInfo
from dsh_core.testing import Reply, ScriptedModel

MODEL = AgentOptions(model="scripted/test")


@asynccontextmanager
async def running(
    model: Any, config: Mapping[str, Any] | None = None, plugins: Sequence[object] = ()
) -> AsyncIterator[Context]:
    """A harness with the compaction plugin (``config`` is its table) and ``model`` as ``scripted``."""
    table = {"plugins": {"compaction": dict(config or {})}}
    async with Harness(config=table, plugins=[CompactionPlugin, *plugins], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        yield ctx


def is_summary_request(request: LlmRequest) -> bool:
    return request.system == SUMMARY_PROMPT


def summary_reply(text: str = "The user asked for notes; the agent read them.") -> Reply:
    return ScriptedModel.text(text)


@tool(parallel_safe=True)
def read_note(name: str) -> str:
    """Read a note: 800 characters of it."""
    return f"note {name}: " + "lorem ipsum " * 66


class Responder:
    """An LLM adapter that answers each request with ``answer(request)``, played by a ``ScriptedModel``.

    For tests whose model calls cannot be scripted in advance (when compaction happens depends
    on sizes). ``requests`` records every request, as the scripted model does.
    """

    def __init__(
        self,
        answer: Callable[[LlmRequest], Reply],
        *,
        context_window: int,
        max_output_tokens: int = 8192,
        checkpoints: bool = False,
    ) -> None:
        self.scripted = ScriptedModel(
            context_window=context_window, max_output_tokens=max_output_tokens, checkpoints=checkpoints
        )
        self.answer = answer
        self.requests = self.scripted.requests

    def model_info(self, model: str) -> ModelInfo:
        return self.scripted.model_info(model)

    def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        self.scripted.add(self.answer(request))
        return self.scripted.stream(request)


def compactions(events: Sequence[SessionEvent]) -> list[Mapping[str, Any]]:
    """The data of every ``compaction/summary`` event."""
    return [event.data for event in events if event.type == "compaction/summary"]


def replaces(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """Every event whose surface operation is a replace."""
    return [event for event in events if event.surface is not None and event.surface.op == "replace"]


def check_pairs(messages: Sequence[Message]) -> None:
    """Every tool call has its result right after its message, every result its call; no leading result."""
    assert messages, "no messages"
    assert not isinstance(messages[0], ToolResultMessage), "the history starts with a tool result"
    waiting: list[str] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            assert waiting, f"result {message.call_id} at {index} answers no call"
            assert message.call_id == waiting[0], f"result {message.call_id} out of place at {index}"
            waiting.pop(0)
            continue
        assert not waiting, f"calls {waiting} have no result before message {index}"
        if isinstance(message, AssistantMessage):
            waiting = [call.id for call in message.tool_calls]
    assert not waiting, f"calls {waiting} have no result"


def independent_count(request: LlmRequest, chars_per_token: float = 4) -> int:
    """The request's size by another method: every character the model reads, divided by ``chars_per_token``."""

    def chars(message: Message) -> Iterator[int]:
        for block in message.content:
            if isinstance(block, Text):
                yield len(block.text)
            elif isinstance(block, ToolCall):
                yield len(block.id) + len(block.name) + len(block.arguments)
        if isinstance(message, ToolResultMessage):
            yield len(message.call_id)

    total = len(request.system or "") + len(json.dumps([dict(schema) for schema in request.tools]))
    total += sum(sum(chars(message)) for message in request.messages)
    return int(total / chars_per_token) + 1


def summaries(messages: Sequence[Message]) -> list[UserMessage]:
    return [m for m in messages if isinstance(m, UserMessage) and m.source.get("kind") == "compaction"]
