"""Helpers for the permissions tests: run a tool call, fake approval channels, watch processes.

The tool-call and process helpers live in ``dsh_core.testing`` (shared with the workspace tests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from dsh_core import CancelSignal, Context, ToolExecution, ToolResult
from dsh_core.testing import call_tool, is_alive, pids_running, read_fifo, wait_gone
from dsh_core.testing import result_text as text

__all__ = [
    "Approval",
    "ApprovalPlugin",
    "call",
    "is_alive",
    "listing",
    "pids_running",
    "read_fifo",
    "text",
    "wait_gone",
]


async def call(
    ctx: Context,
    name: str,
    cwd: Path | str | None,
    *,
    agent_id: str | None = "a1",
    signal: CancelSignal | None = None,
    **arguments: Any,
) -> ToolResult:
    """Run one call of tool ``name`` by agent ``agent_id`` (default ``a1``) through the whole pipeline."""
    return await call_tool(ctx, name, cwd, agent_id=agent_id, signal=signal, **arguments)


async def listing(directory: Path) -> list[str]:
    """The names in ``directory``, sorted."""
    return sorted([entry.name async for entry in anyio.Path(directory).iterdir()])


class Approval:
    """An ``approval`` service that answers ``answer`` and records each question."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str]] = []

    async def approve(self, execution: ToolExecution, reason: str) -> bool:
        self.asked.append((execution.name, reason))
        return self.answer


class ApprovalPlugin:
    """A tiny plugin providing ``approval``."""

    name = "test-approval"
    provides = ("approval",)

    def __init__(self, approval: Approval) -> None:
        self.approval = approval

    def start(self, ctx: Context) -> None:
        ctx.provide("approval", self.approval)
