"""What flows through the tool pipeline: the execution being decided and the result it produces."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs

from dsh_core.vocabulary._content import Image, Text, as_result_content
from dsh_core.vocabulary._decisions import context_texts

if TYPE_CHECKING:
    from dsh_core.host._context import Context
    from dsh_core.vocabulary._signal import CancelSignal

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


_ERROR_CODES: frozenset[str] = frozenset(typing.get_args(ToolErrorCode))


def _error_code(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and value not in _ERROR_CODES:
        msg = f"ToolResult.error_code must be one of {sorted(_ERROR_CODES)} or None, got {value!r}"
        raise (ValueError if isinstance(value, str) else TypeError)(msg)


def _is_bool(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not bool:
        msg = f"ToolResult.is_error must be a bool, got {type(value).__name__}"
        raise TypeError(msg)


@attrs.frozen
class ToolResult:
    """The outcome of one tool call. ``error_code`` is set on every error result.

    ``content`` takes a str (one text block) or text/image blocks; ``additional_context`` a str or
    a sequence of str (each becomes one ``context/message`` after the step's results).
    """

    content: tuple[Text | Image, ...] = attrs.field(converter=as_result_content)
    is_error: bool = attrs.field(default=False, validator=_is_bool)
    error_code: ToolErrorCode | None = attrs.field(default=None, validator=_error_code)
    additional_context: tuple[str, ...] = attrs.field(default=(), converter=context_texts)
    metadata: Mapping[str, Any] = attrs.field(factory=dict, eq=False)
