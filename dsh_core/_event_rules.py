"""The data rules of the core session-log events: one table, applied at append and at load.

``EVENT_RULES`` maps each event type the loop writes (SPEC §7) to the fields its ``data`` holds:
which are required, which optional, and what each one must be. ``Session.append`` (and a seed,
and so a resumed log) checks every event of a listed type against its rule before it is
committed; a persistence backend checks stored events through the very same rules when it
loads them (``check_event_data`` here, then the session's own checks through ``check_log`` in
``_defaults._session``), so what append refuses, load refuses too, naming the same field.

Rules are per event and stateless; what depends on the log so far (turn numbering, surface
spans, the message role of a model-visible event) is the session's. Unknown fields of a listed
type are refused, like unknown fields anywhere in the vocabulary; event types not listed here
(a plugin's own, a later version's) are stored as they are.

Costs: the rules run on every append, so the per-chunk rule of ``assistant/chunk`` checks the
chunk's ``type`` only (its reader, ``chunk_from_json``, checks the rest when a chunk is read back);
messages are parsed once, by the session, when it folds them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from ._content import AssistantMessage, ToolResultMessage, UserMessage, message_from_json
from ._errors import EventDataError, VocabularyError
from ._json import check_keys, expect_object, json_type_name, refuse
from ._llm_types import Failure, LlmCallConfig, Usage

__all__ = [
    "EVENT_RULES",
    "EventRule",
    "FieldRule",
    "check_event_data",
]

#: ``check(value, field)``: raise ``VocabularyError`` (through ``refuse``) naming ``field``
FieldCheck = Callable[[Any, str], object]


@attrs.frozen
class FieldRule:
    """One field of an event's ``data``: how it is checked, and whether it may be absent."""

    check: FieldCheck
    required: bool = True
    #: what the field holds, for the message when it is missing ("a turn number (an integer >= 1)")
    expected: str = ""


@attrs.frozen
class EventRule:
    """The ``data`` of one event type: its fields in order, and, for a model-visible event, the
    message class ``data.message`` holds (the session parses it when it folds the surface)."""

    fields: tuple[tuple[str, FieldRule], ...]
    message_class: type | None = None
    #: every key ``data`` may hold (``surface`` too, for a model-visible event)
    keys: frozenset[str] = attrs.field(init=False)

    @keys.default
    def _keys(self) -> frozenset[str]:
        names = frozenset(name for name, _ in self.fields)
        return names | {"surface"} if self.message_class is not None else names


# ---------------------------------------------------------------------- field checks


def _counter(what: str) -> FieldCheck:
    """A turn or step number: an integer >= 1 (a bool is not one)."""

    def check(value: Any, field: str) -> None:
        if type(value) is not int or value < 1:
            refuse(field, f"expected {what} (an integer >= 1), got {_shown(value)}")

    return check


def _string(value: Any, field: str) -> None:
    if type(value) is not str:
        refuse(field, f"expected a string, got {json_type_name(value)}")


def _identifier(value: Any, field: str) -> None:
    if type(value) is not str or not value:
        refuse(field, f"expected a non-empty string, got {_shown(value)}")


def _boolean(value: Any, field: str) -> None:
    if type(value) is not bool:
        refuse(field, f"expected true or false, got {json_type_name(value)}")


def _object(value: Any, field: str) -> None:
    expect_object(value, field)


def _array(value: Any, field: str) -> tuple[Any, ...]:
    if type(value) is not tuple and type(value) is not list:
        refuse(field, f"expected an array, got {json_type_name(value)}")
    return tuple(value)


def _one_of(choices: frozenset[str]) -> FieldCheck:
    listed = ", ".join(sorted(choices))

    def check(value: Any, field: str) -> None:
        if type(value) is not str or value not in choices:
            refuse(field, f"{_shown(value)} is not valid; expected one of {listed}")

    return check


def _array_of(item: FieldCheck) -> FieldCheck:
    def check(value: Any, field: str) -> None:
        for index, element in enumerate(_array(value, field)):
            item(element, f"{field}[{index}]")

    return check


def _user_message(value: Any, field: str) -> None:
    UserMessage.from_json(expect_object(value, field), field=field)


def _any_message(value: Any, field: str) -> None:
    message_from_json(expect_object(value, field), field=field)


def _usage(value: Any, field: str) -> None:
    Usage.from_json(expect_object(value, field), field=field)


def _call_config(value: Any, field: str) -> None:
    LlmCallConfig.from_json(expect_object(value, field), field=field)


_CHUNK_TYPES: Final = frozenset({"text-delta", "reasoning-delta", "tool-call-delta", "usage", "finish"})
_chunk_type = _one_of(_CHUNK_TYPES)


def _chunk(value: Any, field: str) -> None:
    """A stream chunk's envelope: an object with a known ``type`` (see the module docstring)."""
    _chunk_type(expect_object(value, field).get("type"), f"{field}.type")


#: SPEC §3's turn-end reasons, ``interrupted`` (written by crash repair) included
TURN_END_KINDS: Final = frozenset(
    {"completed", "rejected", "stopped", "max-tokens", "error", "aborted", "disposed", "interrupted"}
)
_REASON_KEYS: Final = frozenset({"kind", "failure", "reason"})
_end_kind = _one_of(TURN_END_KINDS)


def _turn_end_reason(value: Any, field: str) -> None:
    """``{kind}``; ``error`` adds its ``failure``, ``stopped`` may add its ``reason`` (a string)."""
    reason = expect_object(value, field)
    check_keys(reason, _REASON_KEYS, field)
    kind = reason.get("kind")
    _end_kind(kind, f"{field}.kind")
    failure = reason.get("failure")
    if kind == "error":
        if failure is None:
            refuse(f"{field}.failure", "missing; a turn that ends in error carries its failure")
        Failure.from_json(expect_object(failure, f"{field}.failure"), field=f"{field}.failure")
    elif "failure" in reason:
        refuse(f"{field}.failure", f"only a turn that ends in error carries a failure, not {kind!r}")
    if "reason" in reason:
        _string(reason["reason"], f"{field}.reason")


#: SPEC §7's ``tool/result`` error codes, crash repair's included
TOOL_ERROR_CODES: Final = frozenset(
    {
        "UNKNOWN_TOOL",
        "INVALID_ARGS",
        "TOOL_ERROR",
        "TIMEOUT",
        "ABORTED",
        "DENIED",
        "TOOL_NOT_STARTED",
        "TOOL_OUTCOME_UNKNOWN",
    }
)
INBOX_KINDS: Final = frozenset({"send", "steer", "inject"})

_tool_schemas = _array_of(_object)
_messages = _array_of(_any_message)
_ids = _array_of(_identifier)


def _shown(value: Any) -> str:
    """A short rendering of a bad value: the value itself for a scalar, the JSON type otherwise."""
    if value is None or type(value) in (bool, int, float) or (type(value) is str and len(value) <= 40):
        return "null" if value is None else repr(value)
    return json_type_name(value)


# ---------------------------------------------------------------------- the table

_TURN_NUMBER: Final = "a turn number (an integer >= 1)"
_STEP_NUMBER: Final = "a step number (an integer >= 1)"
_TURN: Final = ("turn", FieldRule(_counter("a turn number"), expected=_TURN_NUMBER))
_STEP: Final = ("step", FieldRule(_counter("a step number"), expected=_STEP_NUMBER))
#: a model-visible event may be appended outside any step (by a plugin, a seed), so its turn and
#: step are optional; when present they are numbers
_IN_TURN: Final = ("turn", attrs.evolve(_TURN[1], required=False))
_IN_STEP: Final = ("step", attrs.evolve(_STEP[1], required=False))
_MESSAGE: Final = ("message", FieldRule(_object))  # parsed by the session, as its event's class
_QUEUED_ID: Final = ("queued_id", FieldRule(_identifier, required=False))


def _optional(check: FieldCheck) -> FieldRule:
    return FieldRule(check, required=False)


#: event type -> the rule its ``data`` keeps (SPEC §7). The one place these shapes are checked.
EVENT_RULES: Final[Mapping[str, EventRule]] = {
    "turn/start": EventRule((_TURN,)),
    "turn/end": EventRule((_TURN, ("reason", FieldRule(_turn_end_reason)))),
    "step/start": EventRule((_TURN, _STEP)),
    "user/message": EventRule((_MESSAGE, _QUEUED_ID), message_class=UserMessage),
    "context/message": EventRule((_MESSAGE, _QUEUED_ID), message_class=UserMessage),
    "steering/message": EventRule((_MESSAGE, _QUEUED_ID), message_class=UserMessage),
    "prompt/blocked": EventRule(
        (
            ("queued_id", FieldRule(_identifier)),
            ("reason", FieldRule(_string)),
            ("message", FieldRule(_user_message)),
        )
    ),
    "request/header": EventRule(
        (
            ("config", FieldRule(_call_config)),
            ("system", FieldRule(_string)),
            ("tools", FieldRule(_tool_schemas)),
            ("prefix", FieldRule(_messages)),
        )
    ),
    "request/header-delta": EventRule(
        (
            ("config", _optional(_call_config)),
            ("system", _optional(_string)),
            ("tools", _optional(_tool_schemas)),
            ("prefix", _optional(_messages)),
        )
    ),
    "assistant/chunk": EventRule((_TURN, _STEP, ("chunk", FieldRule(_chunk)))),
    "assistant/message": EventRule(
        (_IN_TURN, _IN_STEP, _MESSAGE, ("usage", _optional(_usage)), ("interrupted", _optional(_boolean))),
        message_class=AssistantMessage,
    ),
    "tool/call": EventRule(
        (
            _TURN,
            _STEP,
            ("call_id", FieldRule(_identifier)),
            ("name", FieldRule(_string)),
            ("arguments", FieldRule(_string)),
        )
    ),
    "tool/result": EventRule(
        (_IN_TURN, _IN_STEP, _MESSAGE, ("error_code", _optional(_one_of(TOOL_ERROR_CODES)))),
        message_class=ToolResultMessage,
    ),
    "inbox/queued": EventRule(
        (
            ("id", FieldRule(_identifier)),
            ("kind", FieldRule(_one_of(INBOX_KINDS))),
            ("message", FieldRule(_user_message)),
        )
    ),
    "inbox/cleared": EventRule((("ids", FieldRule(_ids)),)),
}


def check_event_data(event_type: str, data: Mapping[str, Any]) -> None:
    """Check ``data`` against the rule of ``event_type`` (nothing to check for an unlisted type).

    :raises EventDataError: naming the event type and, in ``.field``, the offending field
        (``data.turn``, ``data.reason.kind``...).
    """
    rule = EVENT_RULES.get(event_type)
    if rule is None:
        return
    try:
        for name, field in rule.fields:
            if name in data:
                field.check(data[name], f"data.{name}")
            elif field.required:
                refuse(f"data.{name}", f"missing; expected {field.expected}" if field.expected else "missing")
        if not data.keys() <= rule.keys:
            check_keys(data, rule.keys, "data")
    except VocabularyError as exc:
        raise EventDataError(f"{event_type}: {exc}", event_type=event_type, field=exc.field) from None
    except RecursionError:
        msg = f"{event_type}: data: nested too deeply to be read"
        raise EventDataError(msg, event_type=event_type, field="data") from None
