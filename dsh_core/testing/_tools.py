"""Test helpers for tool plugins: run one call through the real pipeline, read its text."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from dsh_core.host._context import Context
from dsh_core.vocabulary._content import Text
from dsh_core.vocabulary._signal import CancelSignal
from dsh_core.vocabulary._tool_types import ToolExecution, ToolResult

__all__ = ["call_tool", "result_text"]

_ids = itertools.count(1)


async def call_tool(
    ctx: Context,
    name: str,
    cwd: Path | str | None = None,
    *,
    agent_id: str | None = None,
    signal: CancelSignal | None = None,
    **arguments: Any,
) -> ToolResult:
    """Run one call of tool ``name`` through the whole tool pipeline, as the agent loop would.

    ``arguments`` become the call's JSON arguments; ``cwd`` is the workspace the call runs in.
    """
    execution = ToolExecution(
        call_id=f"call-{next(_ids)}",
        name=name,
        arguments=json.dumps(arguments),
        cwd=None if cwd is None else str(cwd),
        agent_id=agent_id,
        signal=signal,
    )
    result: ToolResult = await ctx.tools.execute(execution)
    return result


def result_text(result: ToolResult) -> str:
    """The text blocks of a tool result, joined."""
    return "".join(block.text for block in result.content if isinstance(block, Text))
