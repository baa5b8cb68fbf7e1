"""The session-log catalogue: every event type the loop writes, its ``data`` and what it means.

Each type is one frozen attrs payload class declared with ``@log_event``: its fields are the
event's ``data`` (SPEC §7; a key marked ``?`` is left out while it holds its default, and an absent
key reads as the default; ``null`` only where the type admits ``None``), and its flags
say whether it is **model-visible** (a surface entry carrying a ``message``; ``derive_messages()``
folds it), whether it **consumes** a queued prompt (carries the ``queued_id`` of an
``inbox/queued`` record) and whether it is **in a turn** (written between its turn's
``turn/start`` and ``turn/end``). ``docs/session-log.md`` is generated from this module
(``python -m dsh_core session-log``).

Writers append a payload (``session.append(TurnStartEvent(turn=3))``): it was checked when it was
built, and it is serialised once, when ``event.data`` is first read. Readers compare
``event.type`` with a class's ``type`` and read ``event.payload``, which checks stored data by the
same rules (``read_payload``). A plugin declares its own types the same way, named
``<plugin>/<event>`` (``permissions/mode``, ``llm/retry``, ``compaction/summary``).
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import Any, ClassVar, Final, Literal, TypeAlias

import attrs

from dsh_core.session_log._spec import (
    LogEvent,
    LogEventSpec,
    declared_types,
    is_visible,
    log_event,
    read_payload,
    spec_for,
)
from dsh_core.session_log._surface import SurfaceOp
from dsh_core.vocabulary._codec import ObjectCodec, json_field
from dsh_core.vocabulary._content import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    instance_of_exact,
    message_reader,
)
from dsh_core.vocabulary._json import FrozenDict, freeze_json_object, refuse
from dsh_core.vocabulary._llm_types import (
    Chunk,
    Failure,
    Finish,
    LlmCallConfig,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
    chunk_reader,
)
from dsh_core.vocabulary._slots import new_instance, slot_setters
from dsh_core.vocabulary._tool_types import ToolErrorCode

__all__ = [
    "APPROVAL_DECISIONS",
    "CONSUMING_EVENT_TYPES",
    "SURFACE_EVENT_TYPES",
    "ApprovalDecision",
    "ApprovalRequestedEvent",
    "ApprovalResolvedEvent",
    "AssistantChunkEvent",
    "AssistantMessageEvent",
    "ContextMessageEvent",
    "EndKind",
    "InboxClearedEvent",
    "InboxKind",
    "InboxQueuedEvent",
    "LogEvent",
    "LogEventSpec",
    "PromptBlockedEvent",
    "RequestHeaderDeltaEvent",
    "RequestHeaderEvent",
    "SteeringMessageEvent",
    "StepStartEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "TurnEnd",
    "TurnEndEvent",
    "TurnStartEvent",
    "UserMessageEvent",
    "declared_types",
    "is_visible",
    "log_event",
    "read_payload",
    "spec_for",
]

# ---------------------------------------------------------------------- field checks
# attrs' validators, except ``_number``.


def _where(instance: object, attribute: attrs.Attribute[Any]) -> str:
    return f"{type(instance).__name__}.{attribute.name}"


def _number(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """A turn or step number: an int >= 1 (a bool is not one).

    Hand-written: attrs' ``instance_of(int)`` admits a bool, and ``not_(instance_of(bool))`` raises
    and catches an exception on every valid value (twice per streamed chunk).
    """
    if value.__class__ is not int or value < 1:
        got = repr(value) if value.__class__ is int else type(value).__name__
        msg = f"{_where(instance, attribute)} must be an int >= 1, got {got}"
        raise (ValueError if value.__class__ is int else TypeError)(msg)


def _optional_number(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # Hand-written like ``_number`` (and one call where attrs' optional() makes two).
    if value is not None:
        _number(instance, attribute, value)


_str: Final = instance_of_exact(str)
_optional_str: Final = instance_of_exact(str, type(None))  # one check, not optional()'s two
_bool: Final = instance_of_exact(bool)


def _is(*classes: type, optional: bool = False) -> Any:
    allowed = (*classes, type(None)) if optional else classes
    return instance_of_exact(*allowed)


def _one_of(choices: Iterable[str], *, optional: bool = False) -> Any:
    check = attrs.validators.in_(tuple(sorted(choices)))  # sorted: the message lists them in order
    return attrs.validators.optional(check) if optional else check


def _strs(value: object) -> tuple[str, ...]:
    """Converter: a sequence of str as a tuple."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        msg = f"expected a sequence of str, got {type(value).__name__}"
        raise TypeError(msg)
    items = tuple(value)
    for index, item in enumerate(items):
        if item.__class__ is not str:
            msg = f"item {index} must be a str, got {type(item).__name__}"
            raise TypeError(msg)
    return items


def _schemas(value: object) -> tuple[FrozenDict, ...]:
    """Converter: tool schemas (JSON objects), frozen."""
    if not isinstance(value, list | tuple):
        msg = f"tools must be a sequence of tool schemas, got {type(value).__name__}"
        raise TypeError(msg)
    return tuple(
        [freeze_json_object(schema, where="tools", root=f"tools[{i}]") for i, schema in enumerate(value)]
    )


def _optional_schemas(value: object) -> tuple[FrozenDict, ...] | None:
    return None if value is None else _schemas(value)


_MESSAGE_CLASSES: Final = (UserMessage, AssistantMessage, ToolResultMessage)


def _messages(value: object) -> tuple[Message, ...]:
    """Converter: a sequence of messages as a tuple."""
    if not isinstance(value, list | tuple):
        msg = f"prefix must be a sequence of messages, got {type(value).__name__}"
        raise TypeError(msg)
    items = tuple(value)
    for index, item in enumerate(items):
        if item.__class__ not in _MESSAGE_CLASSES:
            msg = f"prefix[{index}] must be a message, got {type(item).__name__}"
            raise TypeError(msg)
    return items


def _optional_messages(value: object) -> tuple[Message, ...] | None:
    return None if value is None else _messages(value)


# ---------------------------------------------------------------------- JSON readers


_ROLE: Final[dict[type, str]] = {
    UserMessage: "user",
    AssistantMessage: "assistant",
    ToolResultMessage: "tool",
}


def _message_of(cls: type) -> Any:
    """Read a message that must be of ``cls`` (a model-visible event's ``message``)."""
    role = _ROLE[cls]

    def refuse_other(other: str) -> str:
        return f"this event carries a {role!r} message, got {other!r}"

    read_message = message_reader(role, refuse_other=refuse_other)

    def read(value: object, path: str) -> Message:
        if value is None:
            refuse(
                path,
                "missing; a model-visible event carries its message as JSON, e.g. {'message': message.to_json()}",
            )
        message: Message = read_message(value, path)
        return message

    return read


def _counter(what: str) -> Any:
    """Read a turn or step number, saying which it is when it is wrong."""

    def read(value: object, path: str) -> int:
        if value.__class__ is int and value >= 1:
            return value
        refuse(path, f"expected a {what} number (an int >= 1), got {value!r}")

    return read


_TURN: Final = json_field(minimum=1, refuse=_counter("turn"))
_STEP: Final = json_field(minimum=1, refuse=_counter("step"))
_OPTIONAL_TURN: Final = json_field(omit_default=True, minimum=1, refuse=_counter("turn"))
_OPTIONAL_STEP: Final = json_field(omit_default=True, minimum=1, refuse=_counter("step"))


_any_message: Final = message_reader()
_read_chunk: Final = chunk_reader()


def _any_chunk(value: object, path: str) -> Chunk:
    if value is None:
        refuse(path, "missing")
    chunk: Chunk = _read_chunk(value, path)
    return chunk


_CHUNK_CLASSES: Final = (TextDelta, ReasoningDelta, ToolCallDelta, Usage, Finish)
_OMIT: Final = json_field(omit_default=True)
_APPEND: Final = SurfaceOp.append()


class _CoreEvent(LogEvent):
    """The core types: each field's reader checks what its validator does (``TRUSTS_READERS``)."""

    __slots__ = ()
    _codec_trusts_readers: ClassVar[bool] = True


# ---------------------------------------------------------------------- turns and steps


@log_event("turn/start", in_turn=True)
@attrs.frozen(kw_only=True)
class TurnStartEvent(_CoreEvent):
    """A turn begins. ``turn`` counts from 1 and continues across resumes; turns never overlap."""

    turn: int = attrs.field(validator=_number, metadata=_TURN)


EndKind: TypeAlias = Literal[
    "completed", "rejected", "stopped", "max-tokens", "error", "aborted", "disposed", "interrupted"
]
_END_KINDS: Final = frozenset(typing.get_args(EndKind))


def _failure_of_error(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    """A turn that ended ``error`` says why (SPEC §7: ``error`` adds ``failure``)."""
    if instance.kind == "error" and value is None:
        msg = f"{_where(instance, attribute)}: missing; a turn that ended 'error' carries its failure"
        raise ValueError(msg)


@attrs.frozen
class TurnEnd:
    """How a turn ended (SPEC §3): ``kind``, the ``failure`` of an ``error``, the ``reason`` of ``stopped``.

    ``interrupted`` is written only by crash repair, for a stored turn that had no ``turn/end``.
    """

    kind: EndKind = attrs.field(validator=_one_of(_END_KINDS))
    failure: Failure | None = attrs.field(
        default=None, validator=[_is(Failure, optional=True), _failure_of_error], metadata=_OMIT
    )
    reason: str | None = attrs.field(default=None, validator=_optional_str, metadata=_OMIT)

    def to_json(self) -> FrozenDict:
        """``{"kind": ..., "failure"?: ..., "reason"?: ...}``."""
        return _TURN_END.encode(self)

    @classmethod
    def from_json(cls, data: object, *, field: str = "reason") -> TurnEnd:
        """Read a turn-end reason. :raises VocabularyError: naming the bad field."""
        end: TurnEnd = _TURN_END.read(data, field)
        return end


_TURN_END: Final = ObjectCodec(TurnEnd)


@log_event("turn/end", in_turn=True)
@attrs.frozen(kw_only=True)
class TurnEndEvent(_CoreEvent):
    """The open turn ends, for ``reason``; every ``turn/start`` gets exactly one (crash repair adds
    ``interrupted`` to a stored turn left open). The loop always writes ``reason``; a log written
    by other means may leave it out."""

    turn: int = attrs.field(validator=_number, metadata=_TURN)
    reason: TurnEnd | None = attrs.field(default=None, validator=_is(TurnEnd, optional=True), metadata=_OMIT)


@log_event("step/start", in_turn=True)
@attrs.frozen(kw_only=True)
class StepStartEvent(_CoreEvent):
    """A step of the turn begins (``step`` counts from 1 in every turn), just before its request."""

    turn: int = attrs.field(validator=_number, metadata=_TURN)
    step: int = attrs.field(validator=_number, metadata=_STEP)

    @classmethod
    def trusted(cls, turn: int, step: int) -> StepStartEvent:
        """From the loop's own turn and step numbers, without the validators (0.3 us instead of 0.7 us)."""
        event = new_instance(cls)
        _set_start_turn(event, turn)
        _set_start_step(event, step)
        return event


# ---------------------------------------------------------------------- prompts and the inbox

InboxKind: TypeAlias = Literal["send", "steer", "inject"]


@log_event("inbox/queued")
@attrs.frozen(kw_only=True)
class InboxQueuedEvent(_CoreEvent):
    """A ``send``/``steer``/``inject`` was accepted: logged before ``agent/queued`` fires, so no accepted
    prompt is lost to a crash. The event that consumes it carries ``id`` as its ``queued_id``."""

    id: str = attrs.field(validator=_str)
    kind: InboxKind = attrs.field(validator=_one_of(("send", "steer", "inject")))
    message: UserMessage = attrs.field(
        validator=_is(UserMessage), metadata=json_field(read=_message_of(UserMessage))
    )


@log_event("inbox/cleared")
@attrs.frozen(kw_only=True)
class InboxClearedEvent(_CoreEvent):
    """Queued prompts dropped without running (``cancel()``, a refused turn); ``ids`` are their ids."""

    ids: tuple[str, ...] = attrs.field(converter=_strs)


@log_event("user/message", visible=True, consumes=True, in_turn=True)
@attrs.frozen(kw_only=True)
class UserMessageEvent(_CoreEvent):
    """A prompt admitted by ``agent/prompt-submit``, at the start of its turn (``queued_id``: its
    ``inbox/queued`` record). Also a compaction summary replacing a span of the surface."""

    message: UserMessage = attrs.field(
        validator=_is(UserMessage), metadata=json_field(read=_message_of(UserMessage))
    )
    queued_id: str | None = attrs.field(default=None, validator=_optional_str, metadata=_OMIT)
    surface: SurfaceOp = attrs.field(default=_APPEND, validator=_is(SurfaceOp), metadata=_OMIT)


@log_event("prompt/blocked", consumes=True, in_turn=True)
@attrs.frozen(kw_only=True)
class PromptBlockedEvent(_CoreEvent):
    """A queued prompt that ``agent/prompt-submit`` blocked, with the listener's ``reason``; the
    model never sees it."""

    queued_id: str = attrs.field(validator=_str)
    reason: str = attrs.field(validator=_str)
    message: UserMessage = attrs.field(
        validator=_is(UserMessage), metadata=json_field(read=_message_of(UserMessage))
    )


@log_event("context/message", visible=True, consumes=True)
@attrs.frozen(kw_only=True)
class ContextMessageEvent(_CoreEvent):
    """Model-visible context: ``inject()`` (idle: at once; running: at the next step) and the
    ``additional_context`` of prompt and tool decisions."""

    message: UserMessage = attrs.field(
        validator=_is(UserMessage), metadata=json_field(read=_message_of(UserMessage))
    )
    queued_id: str | None = attrs.field(default=None, validator=_optional_str, metadata=_OMIT)
    surface: SurfaceOp = attrs.field(default=_APPEND, validator=_is(SurfaceOp), metadata=_OMIT)


@log_event("steering/message", visible=True, consumes=True, in_turn=True)
@attrs.frozen(kw_only=True)
class SteeringMessageEvent(_CoreEvent):
    """Steering for the running turn, before its next step: ``steer()``, or the reason of a
    ``continue`` decision of ``agent/turn-continuation`` (source ``continuation``)."""

    message: UserMessage = attrs.field(
        validator=_is(UserMessage), metadata=json_field(read=_message_of(UserMessage))
    )
    queued_id: str | None = attrs.field(default=None, validator=_optional_str, metadata=_OMIT)
    surface: SurfaceOp = attrs.field(default=_APPEND, validator=_is(SurfaceOp), metadata=_OMIT)


# ---------------------------------------------------------------------- requests and replies


@log_event("request/header", in_turn=True)
@attrs.frozen(kw_only=True)
class RequestHeaderEvent(_CoreEvent):
    """What the first request of an agent instance carries besides history: the call ``config``,
    the rendered ``system`` prompt, the ``tools`` schemas and the session ``prefix`` (always
    written; absent in logs older than the prefix, it reads as none)."""

    config: LlmCallConfig = attrs.field(validator=_is(LlmCallConfig))
    system: str = attrs.field(validator=_str)
    tools: tuple[FrozenDict, ...] = attrs.field(converter=_schemas)
    prefix: tuple[Message, ...] = attrs.field(
        default=(), converter=_messages, metadata=json_field(read=_any_message)
    )


@log_event("request/header-delta", in_turn=True)
@attrs.frozen(kw_only=True)
class RequestHeaderDeltaEvent(_CoreEvent):
    """Only the header fields that changed since the last request (a step whose header equals the
    previous one writes nothing)."""

    config: LlmCallConfig | None = attrs.field(
        default=None, validator=_is(LlmCallConfig, optional=True), metadata=_OMIT
    )
    system: str | None = attrs.field(default=None, validator=_optional_str, metadata=_OMIT)
    tools: tuple[FrozenDict, ...] | None = attrs.field(
        default=None, converter=_optional_schemas, metadata=_OMIT
    )
    prefix: tuple[Message, ...] | None = attrs.field(
        default=None, converter=_optional_messages, metadata=json_field(omit_default=True, read=_any_message)
    )


@log_event("assistant/chunk", in_turn=True)
@attrs.frozen(kw_only=True)
class AssistantChunkEvent(_CoreEvent):
    """One chunk of the model's stream, as the adapter produced it (deltas, usage, the finish)."""

    turn: int = attrs.field(validator=_number, metadata=_TURN)
    step: int = attrs.field(validator=_number, metadata=_STEP)
    chunk: Chunk = attrs.field(validator=_is(*_CHUNK_CLASSES), metadata=json_field(read=_any_chunk))


@log_event("assistant/message", visible=True, in_turn=True)
@attrs.frozen(kw_only=True)
class AssistantMessageEvent(_CoreEvent):
    """What the model said in one step (after ``agent/step-result``), with its ``usage``.

    ``interrupted`` marks the text and reasoning kept from a step cancelled while it streamed (no
    tool calls). An empty message is logged but sends nothing back. The loop always writes
    ``turn`` and ``step``; an event appended by other means may leave them out.
    """

    turn: int | None = attrs.field(default=None, validator=_optional_number, metadata=_OPTIONAL_TURN)
    step: int | None = attrs.field(default=None, validator=_optional_number, metadata=_OPTIONAL_STEP)
    message: AssistantMessage = attrs.field(
        validator=_is(AssistantMessage), metadata=json_field(read=_message_of(AssistantMessage))
    )
    interrupted: bool = attrs.field(default=False, validator=_bool, metadata=_OMIT)
    usage: Usage | None = attrs.field(default=None, validator=_is(Usage, optional=True), metadata=_OMIT)
    surface: SurfaceOp = attrs.field(default=_APPEND, validator=_is(SurfaceOp), metadata=_OMIT)

    @classmethod
    def trusted(cls, turn: int, step: int, message: AssistantMessage, usage: Usage | None) -> AssistantMessageEvent:
        """A step's reply from values the loop has checked (an ``AssistantMessage``, the ``Usage``
        its assembler kept), appended to the surface, without the validators."""
        event = new_instance(cls)
        _set_reply_turn(event, turn)
        _set_reply_step(event, step)
        _set_reply_message(event, message)
        _set_reply_interrupted(event, False)
        _set_reply_usage(event, usage)
        _set_reply_surface(event, _APPEND)
        return event


# ---------------------------------------------------------------------- tools

_ERROR_CODES: Final = frozenset(typing.get_args(ToolErrorCode))


@log_event("tool/call", in_turn=True)
@attrs.frozen(kw_only=True)
class ToolCallEvent(_CoreEvent):
    """A tool call about to run (``arguments`` is the model's raw JSON text). Every one gets a
    ``tool/result``; a call left without one in a stored log is flagged by crash repair."""

    turn: int = attrs.field(validator=_number, metadata=_TURN)
    step: int = attrs.field(validator=_number, metadata=_STEP)
    call_id: str = attrs.field(validator=_str)
    name: str = attrs.field(validator=_str)
    arguments: str = attrs.field(validator=_str)

    @classmethod
    def trusted(cls, turn: int, step: int, call: ToolCall) -> ToolCallEvent:
        """The call of a ``ToolCall`` block (its fields checked when it was built), without the validators."""
        event = new_instance(cls)
        _set_call_turn(event, turn)
        _set_call_step(event, step)
        _set_call_id(event, call.id)
        _set_call_name(event, call.name)
        _set_call_arguments(event, call.arguments)
        return event


@log_event("tool/result", visible=True, in_turn=True)
@attrs.frozen(kw_only=True)
class ToolResultEvent(_CoreEvent):
    """The result of a tool call, as the model sees it; ``error_code`` says why it failed (absent on
    success). The loop always writes ``turn`` and ``step``; an event appended by other means may
    leave them out."""

    turn: int | None = attrs.field(default=None, validator=_optional_number, metadata=_OPTIONAL_TURN)
    step: int | None = attrs.field(default=None, validator=_optional_number, metadata=_OPTIONAL_STEP)
    message: ToolResultMessage = attrs.field(
        validator=_is(ToolResultMessage), metadata=json_field(read=_message_of(ToolResultMessage))
    )
    error_code: ToolErrorCode | None = attrs.field(
        default=None, validator=_one_of(_ERROR_CODES, optional=True), metadata=_OMIT
    )
    surface: SurfaceOp = attrs.field(default=_APPEND, validator=_is(SurfaceOp), metadata=_OMIT)

    @classmethod
    def trusted(
        cls, turn: int, step: int, message: ToolResultMessage, error_code: ToolErrorCode | None
    ) -> ToolResultEvent:
        """A result the loop built (a ``ToolResultMessage``, the code of a ``ToolResult``, both checked
        when they were made), appended to the surface, without the validators."""
        event = new_instance(cls)
        _set_result_turn(event, turn)
        _set_result_step(event, step)
        _set_result_message(event, message)
        _set_result_code(event, error_code)
        _set_result_surface(event, _APPEND)
        return event


# ---------------------------------------------------------------------- approvals

ApprovalDecision: TypeAlias = Literal["once", "always", "deny", "cancelled"]
APPROVAL_DECISIONS: Final[tuple[ApprovalDecision, ...]] = typing.get_args(ApprovalDecision)


def _frozen_object(value: object) -> FrozenDict:
    """Converter: a JSON object (tool arguments), deep-frozen."""
    if isinstance(value, FrozenDict):
        return value
    return freeze_json_object(value, where="approval", root="arguments")


def _optional_frozen_object(value: object) -> FrozenDict | None:
    return None if value is None else _frozen_object(value)


def _non_empty(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value.__class__ is not str or not value:
        msg = f"{_where(instance, attribute)} must be a non-empty str, got {value!r}"
        raise (ValueError if value.__class__ is str else TypeError)(msg)


@log_event("approval/requested", in_turn=True)
@attrs.frozen(kw_only=True)
class ApprovalRequestedEvent(_CoreEvent):
    """A tool call waits for a yes: a ``tools/pre-execute`` listener answered ``Ask(reason)``.

    Made durable (SPEC §9.1) before anyone is asked; ``arguments`` are the model's, decoded. The
    call runs only after its ``approval/resolved``; a log that ends with a request unresolved and
    the step's calls not run is a *parked* turn, which a resume re-opens (never repaired).
    """

    call_id: str = attrs.field(validator=_non_empty)
    tool: str = attrs.field(validator=_str)
    arguments: FrozenDict = attrs.field(converter=_frozen_object)
    reason: str = attrs.field(validator=_str)


@log_event("approval/resolved", in_turn=True)
@attrs.frozen(kw_only=True)
class ApprovalResolvedEvent(_CoreEvent):
    """The first answer to the ``approval/requested`` of ``call_id``; any later one is refused.

    ``decision``: ``once`` / ``always`` (this tool, for the rest of the session: derived from the
    log, so it survives resume) run the call; ``deny`` refuses it, telling the model ``reason``;
    ``cancelled`` (by ``cancel``: the turn was cancelled; by ``repair``: crash repair closed the
    turn) never runs it. ``arguments`` (or ``null``) replace the model's before the call runs,
    checked like them. ``by`` names who answered: ``cli``, ``serve``, ``api``, ``policy``,
    ``cancel``, ``repair`` or a caller's own string.
    """

    call_id: str = attrs.field(validator=_non_empty)
    decision: ApprovalDecision = attrs.field(validator=_one_of(APPROVAL_DECISIONS))
    reason: str | None = attrs.field(default=None, validator=_optional_str)
    arguments: FrozenDict | None = attrs.field(default=None, converter=_optional_frozen_object)
    by: str = attrs.field(default="api", validator=_non_empty)


# ---------------------------------------------------------------------- trusted constructors


_set_start_turn, _set_start_step = slot_setters(StepStartEvent)
(
    _set_reply_turn,
    _set_reply_step,
    _set_reply_message,
    _set_reply_interrupted,
    _set_reply_usage,
    _set_reply_surface,
) = slot_setters(AssistantMessageEvent)
_set_call_turn, _set_call_step, _set_call_id, _set_call_name, _set_call_arguments = slot_setters(ToolCallEvent)
_set_result_turn, _set_result_step, _set_result_message, _set_result_code, _set_result_surface = slot_setters(
    ToolResultEvent
)


# ---------------------------------------------------------------------- derived sets

#: The model-visible core types: each one is an entry of the surface (SPEC §3).
SURFACE_EVENT_TYPES: Final[frozenset[str]] = frozenset(
    spec.type for spec in declared_types() if spec.visible and spec.module == __name__
)
#: The core types that may carry the ``queued_id`` of the inbox item they consume.
CONSUMING_EVENT_TYPES: Final[frozenset[str]] = frozenset(
    spec.type for spec in declared_types() if spec.consumes and spec.module == __name__
)
