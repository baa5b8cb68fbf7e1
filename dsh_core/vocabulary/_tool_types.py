"""What flows through the tool pipeline: the execution being decided and the result it produces."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import attrs

from dsh_core.vocabulary._content import Image, Text, as_result_content, instance_of_exact
from dsh_core.vocabulary._decisions import context_texts
from dsh_core.vocabulary._slots import new_instance, slot_setters

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


_error_code: Final = attrs.validators.optional(attrs.validators.in_(tuple(sorted(_ERROR_CODES))))
_is_bool: Final = instance_of_exact(bool)


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

    @classmethod
    def of_text(cls, text: str) -> ToolResult:
        """A successful result holding one ``Text``: what a tool that returns a str gives.

        The tool runtime's constructor, once per such call: ``text`` is a str, so the converters
        and validators have nothing to refuse (1.5 us instead of 2.9 us, timeit).
        """
        result = new_instance(cls)
        _set_content(result, (Text(text),))
        _set_is_error(result, False)
        _set_error_code(result, None)
        _set_additional_context(result, ())
        _set_metadata(result, {})
        return result


_set_content, _set_is_error, _set_error_code, _set_additional_context, _set_metadata = slot_setters(ToolResult)
