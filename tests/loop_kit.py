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
