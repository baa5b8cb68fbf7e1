"""A plugin for ``dsh worker`` subprocesses under test: a model that follows the prompt, and tools.

The model (provider ``scripted``) reads the request's last message, so every worker answers a
session alike however many turns it saw before (a ``ScriptedModel`` plays each reply):

- ``tool:NAME {json}`` calls tool ``NAME`` with those arguments;
- after a tool result, it answers ``done: <result>``;
- ``say:TEXT`` answers ``TEXT``; a prompt from the ``temporal`` plugin answers ``resumed``;
- anything else answers ``echo: <prompt>``.

It prints ``SESSION-START <id> <startup|resume>`` whenever the worker opens a session.

Tools: ``hold`` makes the log durable, prints ``HOLDING <session id>`` on stdout and waits until
cancelled (a test kills or cancels the worker then); ``wait_for_steer`` prints ``WAITING <session
id>`` and returns once steering was queued; ``wait_for_inject`` prints ``WAITING-INJECT <session
id>`` and returns once an inject was queued; ``echo`` returns its text.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import attrs

from dsh_core import Context, SessionEvent, ToolExecution, ToolResultMessage, UserMessage, hookimpl, tool
from dsh_core.llm import Chunk, LlmRequest, ModelInfo
from dsh_core.testing import ScriptedModel

__all__ = ["FollowingModel", "KitConfig", "KitPlugin"]


def _reply(request: LlmRequest) -> Any:
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        text = "".join(getattr(block, "text", "") for block in last.content)
        return f"done: {text}"
    if isinstance(last, UserMessage):
        if last.source.get("plugin") == "temporal":
            return "resumed"
        text = last.text
        if text.startswith("tool:"):
            name, _, arguments = text[len("tool:") :].partition(" ")
            return ScriptedModel.tool_call(name, json.loads(arguments or "{}"))
        if text.startswith("say:"):
            return text[len("say:") :]
        return f"echo: {text}"
    return "echo: ?"


class FollowingModel:
    """An ``LlmAdapter`` whose reply follows the request's last message (see the module doc)."""

    def __init__(self) -> None:
        self.calls = 0

    def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        self.calls += 1
        return ScriptedModel([_reply(request)]).stream(request)

    def model_info(self, model: str) -> ModelInfo:
        return ModelInfo(128_000, 8192)


@tool
async def hold(execution: ToolExecution, label: str = "") -> str:
    """Hold the turn until cancelled (after making the log durable and saying so)."""
    ctx = execution.ctx
    assert ctx is not None
    agent = ctx.agents.get(execution.agent_id)
    assert agent is not None
    await ctx.sessions.flush(agent.session)
    print(f"HOLDING {execution.agent_id} {label}", flush=True)
    await anyio.sleep_forever()
    return "never"


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


@attrs.frozen
class KitConfig:
    """``[plugins.temporal-testkit]``: inert unless ``enabled`` (every test venv installs it)."""

    enabled: bool = False
    #: print ``SESSION-START`` lines (off for benchmarks)
    announce: bool = True


class KitPlugin:
    """Entry point ``temporal-testkit``: with ``enabled = true``, the ``scripted`` model and the test tools."""

    name = "temporal-testkit"
    requires = ("llm", "tools")
    Config = KitConfig

    def __init__(self) -> None:
        #: per session: set once steering for it was queued
        self._steered: dict[str, anyio.Event] = {}
        #: per session: set once an inject for it was queued
        self._injected: dict[str, anyio.Event] = {}
        self._announce = False

    def _steered_event(self, session_id: str) -> anyio.Event:
        return self._steered.setdefault(session_id, anyio.Event())

    @hookimpl
    def dsh_session_event(self, session: Any, event: SessionEvent) -> None:
        if event.type == "inbox/queued" and event.data["kind"] == "steer":
            self._steered_event(session.id).set()
        if event.type == "inbox/queued" and event.data["kind"] == "inject":
            self._injected.setdefault(session.id, anyio.Event()).set()

    @hookimpl
    def dsh_agent_session_start(self, agent: Any, source: str) -> None:
        """Say when a worker opens a session (``startup``: created, ``resume``: loaded from the store)."""
        if self._announce:
            print(f"SESSION-START {agent.id} {source}", flush=True)

    def start(self, ctx: Context) -> None:
        if not (isinstance(ctx.config, KitConfig) and ctx.config.enabled):
            return
        self._announce = ctx.config.announce
        ctx.llm.register_adapter("scripted", FollowingModel())
        ctx.tools.register(hold)
        ctx.tools.register(echo)

        @tool
        async def wait_for_steer(execution: ToolExecution) -> str:
            """Print ``WAITING <session id>`` and return once steering for this session was queued."""
            print(f"WAITING {execution.agent_id}", flush=True)
            await self._steered_event(execution.agent_id).wait()
            return "steered"

        ctx.tools.register(wait_for_steer)

        @tool
        async def wait_for_inject(execution: ToolExecution) -> str:
            """Print ``WAITING-INJECT <session id>`` and return once an inject for this session was queued."""
            print(f"WAITING-INJECT {execution.agent_id}", flush=True)
            await self._injected.setdefault(execution.agent_id, anyio.Event()).wait()
            return "injected"

        ctx.tools.register(wait_for_inject)
