"""The values plugins return from waterfall and serial events to steer the loop and the tools.

- ``agent/prompt-submit``: ``Allow(additional_context=())`` (default) or ``Block(reason)``
- ``tools/pre-execute``: ``Allow()`` (default), ``Deny(reason)`` or ``Ask(reason)``
- ``tools/post-execute``: ``Accept(content=None, additional_context=())`` (default) or ``Reject(feedback)``
- ``agent/request-error``: ``Retry(delay=0)``, or ``None`` to fail (default)
- ``agent/turn-continuation``: ``ContinuationDecision(action, reason=None)``
- ``agent/turn-stop``: ``ContinuationStop(reason)``, or ``None`` to leave the turn be

Each is a frozen attrs value with ``to_json``/``from_json``; the JSON carries a ``kind``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

from dsh_core.vocabulary._content import (
    Image,
    Text,
    as_result_content,
    block_from_json,
    validate_optional_str,
    validate_str,
)
from dsh_core.vocabulary._json import (
    check_keys,
    expect_object,
    literal_field,
    number_field,
    optional_str_field,
    refuse,
    str_field,
)

__all__ = [
    "Accept",
    "Allow",
    "Ask",
    "Block",
    "ContinuationAction",
    "ContinuationDecision",
    "ContinuationStop",
    "Decision",
    "Deny",
    "PostToolDecision",
    "PreToolDecision",
    "PromptDecision",
    "Reject",
    "Retry",
    "context_texts",
    "decision_from_json",
]


def context_texts(value: object) -> tuple[str, ...]:
    """Converter: additional context as a tuple of str; one str is one entry (not its characters)."""
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list | tuple):
        msg = f"additional_context must be a sequence of str, got {type(value).__name__}"
        raise TypeError(msg)
    entries = tuple(value)
    for index, entry in enumerate(entries):
        if not isinstance(entry, str):
            msg = f"additional_context[{index}] must be a str, got {type(entry).__name__}"
            raise TypeError(msg)
    return entries


def _to_optional_result_content(value: object) -> tuple[Text | Image, ...] | None:
    if value is None:
        return None
    return as_result_content(value)  # type: ignore[arg-type]  # it raises TypeError for anything else


def _to_delay(value: object) -> float:
    if type(value) is int or type(value) is float:
        if math.isfinite(value) and value >= 0:
            return float(value)
        msg = f"Retry.delay must be a finite number of seconds >= 0, got {value!r}"
        raise ValueError(msg)
    msg = f"Retry.delay must be a number of seconds, got {type(value).__name__}"
    raise TypeError(msg)


def _context_field(data: Mapping[str, Any], field: str) -> tuple[str, ...]:
    raw = data.get("additional_context", ())
    if not isinstance(raw, list | tuple) or not all(type(entry) is str for entry in raw):
        refuse(f"{field}.additional_context", "expected an array of strings")
    return tuple(raw)


def _envelope(data: object, kind: str, keys: frozenset[str], field: str) -> Mapping[str, Any]:
    obj = expect_object(data, field)
    if obj.get("kind") != kind:
        refuse(f"{field}.kind", f"expected {kind!r}, got {obj.get('kind')!r}")
    check_keys(obj, keys, field)
    return obj


@attrs.frozen
class Allow:
    """Let the prompt or the tool call through; ``additional_context`` adds model-visible notes.

    The notes are logged as ``context/message`` right after the prompt (``agent/prompt-submit``).
    """

    additional_context: tuple[str, ...] = attrs.field(default=(), converter=context_texts)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "allow", "additional_context": list(self.additional_context)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Allow:
        data = _envelope(data, "allow", frozenset({"kind", "additional_context"}), field)
        return cls(_context_field(data, field))


@attrs.frozen
class Block:
    """Drop the prompt (logged as ``prompt/blocked`` with ``reason``); it never reaches the model."""

    reason: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "block", "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Block:
        return cls(str_field(_envelope(data, "block", _REASON_KEYS, field), "reason", field))


@attrs.frozen
class Deny:
    """Refuse the tool call; the model gets an error result (``DENIED``) carrying ``reason``."""

    reason: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "deny", "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Deny:
        return cls(str_field(_envelope(data, "deny", _REASON_KEYS, field), "reason", field))


@attrs.frozen
class Ask:
    """Let a person decide about the tool call (through ``ctx.approval`` when one is loaded)."""

    reason: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "ask", "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Ask:
        return cls(str_field(_envelope(data, "ask", _REASON_KEYS, field), "reason", field))


@attrs.frozen
class Accept:
    """Keep the tool's result; ``content`` (when given) replaces what the model sees.

    ``additional_context`` adds model-visible notes after the tool results of the step.
    """

    content: tuple[Text | Image, ...] | None = attrs.field(
        default=None, converter=_to_optional_result_content
    )
    additional_context: tuple[str, ...] = attrs.field(default=(), converter=context_texts)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "accept",
            "content": None if self.content is None else [block.to_json() for block in self.content],
            "additional_context": list(self.additional_context),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Accept:
        data = _envelope(data, "accept", frozenset({"kind", "content", "additional_context"}), field)
        raw = data.get("content")
        if raw is None:
            return cls(None, _context_field(data, field))
        if not isinstance(raw, list | tuple):
            refuse(f"{field}.content", "expected an array of blocks or null")
        blocks = [block_from_json(item, field=f"{field}.content[{i}]") for i, item in enumerate(raw)]
        for index, block in enumerate(blocks):
            if type(block) is not Text and type(block) is not Image:
                refuse(f"{field}.content[{index}].type", "a tool result holds only text and image blocks")
        return cls(blocks, _context_field(data, field))


@attrs.frozen
class Reject:
    """Replace the tool's result with an error carrying ``feedback`` for the model."""

    feedback: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "reject", "feedback": self.feedback}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Reject:
        data = _envelope(data, "reject", frozenset({"kind", "feedback"}), field)
        return cls(str_field(data, "feedback", field))


@attrs.frozen
class Retry:
    """Stream the failed model request again, within the same step, after ``delay`` seconds."""

    delay: float = attrs.field(default=0.0, converter=_to_delay)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "retry", "delay": self.delay}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Retry:
        data = _envelope(data, "retry", frozenset({"kind", "delay"}), field)
        return cls(number_field(data, "delay", field, minimum=0.0))


ContinuationAction: TypeAlias = Literal["continue", "stop"]
_ACTIONS: Final = frozenset({"continue", "stop"})


def _validate_action(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in _ACTIONS:
        msg = f"ContinuationDecision.action must be 'continue' or 'stop', got {value!r}"
        raise ValueError(msg)


@attrs.frozen
class ContinuationDecision:
    """Whether the turn runs another step. A ``continue`` ``reason`` is shown to the next step
    (logged as ``steering/message`` with source ``{"kind": "continuation"}``)."""

    action: ContinuationAction = attrs.field(validator=_validate_action)
    reason: str | None = attrs.field(default=None, validator=validate_optional_str)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "continuation", "action": self.action, "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> ContinuationDecision:
        data = _envelope(data, "continuation", frozenset({"kind", "action", "reason"}), field)
        return cls(literal_field(data, "action", field, _ACTIONS), optional_str_field(data, "reason", field))


@attrs.frozen
class ContinuationStop:
    """End the turn now, as ``stopped`` with ``reason``, whatever the ordinary decision was."""

    reason: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "continuation-stop", "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> ContinuationStop:
        return cls(str_field(_envelope(data, "continuation-stop", _REASON_KEYS, field), "reason", field))


_REASON_KEYS: Final = frozenset({"kind", "reason"})

PromptDecision: TypeAlias = Allow | Block
PreToolDecision: TypeAlias = Allow | Deny | Ask
PostToolDecision: TypeAlias = Accept | Reject
Decision: TypeAlias = (
    Allow | Block | Deny | Ask | Accept | Reject | Retry | ContinuationDecision | ContinuationStop
)

_READERS: Final[dict[str, Callable[..., Decision]]] = {
    "allow": Allow.from_json,
    "block": Block.from_json,
    "deny": Deny.from_json,
    "ask": Ask.from_json,
    "accept": Accept.from_json,
    "reject": Reject.from_json,
    "retry": Retry.from_json,
    "continuation": ContinuationDecision.from_json,
    "continuation-stop": ContinuationStop.from_json,
}


def decision_from_json(data: Mapping[str, Any], *, field: str = "decision") -> Decision:
    """Read any decision, choosing the class by its ``kind``.

    :raises VocabularyError: naming the bad field.
    """
    kind = expect_object(data, field).get("kind")
    read = _READERS.get(kind) if type(kind) is str else None
    if read is None:
        problem = "missing" if kind is None else f"unknown decision kind {kind!r}"
        refuse(f"{field}.kind", f"{problem}; expected one of {', '.join(_READERS)}")
    return read(data, field=field)
