"""Helpers for the sub-agent tests: a harness with both plugins, an event recorder, a barrier model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from dsh_subagents import SubagentsPlugin

from dsh_core import (
    AgentOptions,
    Context,
    Harness,
    SessionEvent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    hookimpl,
)
from dsh_core.llm import Chunk, Finish, LlmRequest, ModelInfo, TextDelta
from dsh_core.services.sessions import Session
from dsh_core.testing import Reply, ScriptedModel

MODEL = AgentOptions(model="scripted/test")
CWD = "/work/project"

#: event types that are noise in a type trail
_QUIET = frozenset({"assistant/chunk", "request/header", "request/header-delta", "inbox/queued"})

Match = Callable[[Session, SessionEvent], bool]


class Recorder:
    """Hears every session event of the harness; a test waits on it instead of sleeping."""

    def __init__(self) -> None:
        self.events: list[tuple[Session, SessionEvent]] = []
        self._changed = anyio.Event()

    @hookimpl
    def dsh_session_event(self, session: Session, event: SessionEvent) -> None:
        self.events.append((session, event))
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def wait_for(self, match: Match) -> tuple[Session, SessionEvent]:
        """The first recorded event that matches, waiting for it if it has not happened yet."""
        seen = 0
        while True:
            changed = self._changed
            for session, event in self.events[seen:]:
                if match(session, event):
                    return session, event
            seen = len(self.events)
            await changed.wait()

    def sessions(self) -> dict[str, Session]:
        """Every session heard of, by id, in the order first heard."""
        return {session.id: session for session, _ in self.events}

    def children_of(self, parent_id: str) -> list[Session]:
        return [s for s in self.sessions().values() if s.meta.parent_id == parent_id]


def is_child_event(parent_id: str, event_type: str) -> Match:
    """Matches an event of type ``event_type`` in a child session of ``parent_id``."""
    return lambda session, event: session.meta.parent_id == parent_id and event.type == event_type


@asynccontextmanager
async def running(
    adapters: dict[str, Any], config: dict[str, Any] | None = None, plugins: Sequence[object] = ()
) -> AsyncIterator[tuple[Context, Recorder]]:
    """A harness with the sub-agent registry, the ``subagents`` plugin and ``adapters`` registered."""
    recorder = Recorder()
    every = [SubagentsPlugin(), recorder, *plugins]
    async with Harness(config=config, plugins=every, autoload=False) as ctx:
        for provider, adapter in adapters.items():
            ctx.llm.register_adapter(provider, adapter)
        yield ctx, recorder


def task_call(description: str, prompt: str, tools: list[str] | None = None) -> ToolCall:
    """A ``task`` tool-call block (for several calls in one ``Reply``)."""
    arguments: dict[str, Any] = {"description": description, "prompt": prompt}
    if tools is not None:
        arguments["tools"] = tools
    return ScriptedModel.call("task", arguments)


def task_reply(description: str, prompt: str, tools: list[str] | None = None) -> Reply:
    """A model reply that makes one ``task`` call."""
    return Reply(task_call(description, prompt, tools))


def trail(events: Sequence[SessionEvent]) -> list[str]:
    return [event.type for event in events if event.type not in _QUIET]


def of_type(events: Sequence[SessionEvent], event_type: str) -> list[SessionEvent]:
    return [event for event in events if event.type == event_type]


def tool_message(event: SessionEvent) -> ToolResultMessage:
    """The message of a ``tool/result`` event."""
    message = event.data["message"]
    assert isinstance(message, Mapping)
    return ToolResultMessage.from_json(message)


def result_text(event: SessionEvent) -> str:
    """The text of a ``tool/result`` event."""
    return tool_message(event).text


def reason_of(event: SessionEvent) -> str:
    """The reason kind of a ``turn/end`` event."""
    reason = event.data["reason"]
    assert isinstance(reason, Mapping)
    return str(reason["kind"])


def last_prompt(request: LlmRequest) -> str:
    """The text of the last user message of a request (a child's prompt, on its first step)."""
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


class BarrierModel:
    """Answers ``answer: <prompt>``, but only once ``parties`` streams are open at the same time.

    A sequential caller would deadlock here, so a test that finishes proves the streams overlapped.
    """

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived: list[str] = []
        self._all_here = anyio.Event()

    def model_info(self, model: str) -> ModelInfo:
        return ModelInfo(128_000, 8192)

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        prompt = last_prompt(request)
        self.arrived.append(prompt)
        if len(self.arrived) == self.parties:
            self._all_here.set()
        await self._all_here.wait()
        yield TextDelta(0, f"answer: {prompt}")
        yield Finish("stop")
