"""What flows through the tool pipeline: the execution being decided and the result it produces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs

if TYPE_CHECKING:
    from ._content import Image, Text
    from ._context import Context
    from ._signal import CancelSignal

__all__ = ["ToolErrorCode", "ToolExecution", "ToolResult"]

ToolErrorCode: TypeAlias = Literal[
    "UNKNOWN_TOOL",
    "INVALID_ARGS",
    "TOOL_ERROR",
    "TIMEOUT",
    "ABORTED",
    "DENIED",
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
]


@attrs.frozen(kw_only=True)
class ToolExecution:
    """One tool call on its way through the pipeline.

    ``arguments`` is the raw JSON text the model produced; ``parsed`` the decoded arguments when
    they were valid JSON. ``agent_id`` selects which agent-scoped plugins hear the tools/* events.
    """

    call_id: str
    name: str
    arguments: str
    parsed: Mapping[str, Any] | None = None
    agent_id: str | None = None
    session_id: str | None = None
    turn: int = 0
    step: int = 0
    cwd: str | None = None
    ctx: Context | None = attrs.field(default=None, eq=False, repr=False)
    signal: CancelSignal | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(kw_only=True)
class ToolResult:
    """The outcome of one tool call. ``error_code`` is set on every error result."""

    content: tuple[Text | Image, ...]
    is_error: bool = False
    error_code: ToolErrorCode | None = None
    additional_context: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = attrs.field(factory=dict, eq=False)
