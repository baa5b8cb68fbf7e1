"""The values plugins return from waterfall and serial events to steer the loop and the tools.

- ``agent/prompt-submit``: ``Allow(additional_context=())`` (default) or ``Block(reason)``
- ``tools/pre-execute``: ``Allow()`` (default), ``Deny(reason)`` or ``Ask(reason)``
- ``tools/post-execute``: ``Accept(content=None, additional_context=())`` (default) or ``Reject(feedback)``
- ``agent/request-error``: ``Retry(delay=0)``, or ``None`` to fail (default)
- ``agent/turn-continuation``: ``ContinuationDecision(action, reason=None)``
- ``agent/turn-stop``: ``ContinuationStop(reason)``, or ``None`` to leave the turn be

Each is a frozen attrs value with ``to_json``/``from_json`` (one ``ObjectCodec`` each); the JSON
carries a ``kind``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

from dsh_core.vocabulary._codec import ObjectCodec, TaggedUnion, json_field
from dsh_core.vocabulary._content import (
    Image,
    Text,
    as_result_content,
    block_reader,
    validate_optional_str,
    validate_str,
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


@attrs.frozen
class Allow:
    """Let the prompt or the tool call through; ``additional_context`` adds model-visible notes.

    The notes are logged as ``context/message`` right after the prompt (``agent/prompt-submit``).
    """

    additional_context: tuple[str, ...] = attrs.field(default=(), converter=context_texts)

    def to_json(self) -> dict[str, Any]:
        return _ALLOW_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Allow:
        """Read a Allow from JSON. :raises VocabularyError: naming the bad field."""
        value: Allow = _ALLOW_JSON.read(data, field)
        return value


@attrs.frozen
class Block:
    """Drop the prompt (logged as ``prompt/blocked`` with ``reason``); it never reaches the model."""

    reason: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return _BLOCK_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Block:
        """Read a Block from JSON. :raises VocabularyError: naming the bad field."""
        value: Block = _BLOCK_JSON.read(data, field)
        return value


@attrs.frozen
class Deny:
    """Refuse the tool call; the model gets an error result (``DENIED``) carrying ``reason``."""

    reason: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return _DENY_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Deny:
        """Read a Deny from JSON. :raises VocabularyError: naming the bad field."""
        value: Deny = _DENY_JSON.read(data, field)
        return value


@attrs.frozen
class Ask:
    """Let a person decide about the tool call (through ``ctx.approval`` when one is loaded)."""

    reason: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return _ASK_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Ask:
        """Read a Ask from JSON. :raises VocabularyError: naming the bad field."""
        value: Ask = _ASK_JSON.read(data, field)
        return value


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
        return _ACCEPT_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Accept:
        """Read a Accept from JSON. :raises VocabularyError: naming the bad field."""
        value: Accept = _ACCEPT_JSON.read(data, field)
        return value


@attrs.frozen
class Reject:
    """Replace the tool's result with an error carrying ``feedback`` for the model."""

    feedback: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return _REJECT_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Reject:
        """Read a Reject from JSON. :raises VocabularyError: naming the bad field."""
        value: Reject = _REJECT_JSON.read(data, field)
        return value


@attrs.frozen
class Retry:
    """Stream the failed model request again, within the same step, after ``delay`` seconds."""

    delay: float = attrs.field(default=0.0, converter=_to_delay)

    def to_json(self) -> dict[str, Any]:
        return _RETRY_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> Retry:
        """Read a Retry from JSON. :raises VocabularyError: naming the bad field."""
        value: Retry = _RETRY_JSON.read(data, field)
        return value


ContinuationAction: TypeAlias = Literal["continue", "stop"]


_validate_action: Final = attrs.validators.in_(("continue", "stop"))


@attrs.frozen
class ContinuationDecision:
    """Whether the turn runs another step. A ``continue`` ``reason`` is shown to the next step
    (logged as ``steering/message`` with source ``{"kind": "continuation"}``)."""

    action: ContinuationAction = attrs.field(validator=_validate_action)
    reason: str | None = attrs.field(default=None, validator=validate_optional_str)

    def to_json(self) -> dict[str, Any]:
        return _CONTINUATION_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> ContinuationDecision:
        """Read a ContinuationDecision from JSON. :raises VocabularyError: naming the bad field."""
        value: ContinuationDecision = _CONTINUATION_JSON.read(data, field)
        return value


@attrs.frozen
class ContinuationStop:
    """End the turn now, as ``stopped`` with ``reason``, whatever the ordinary decision was."""

    reason: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return _STOP_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "decision") -> ContinuationStop:
        """Read a ContinuationStop from JSON. :raises VocabularyError: naming the bad field."""
        value: ContinuationStop = _STOP_JSON.read(data, field)
        return value



PromptDecision: TypeAlias = Allow | Block
PreToolDecision: TypeAlias = Allow | Deny | Ask
PostToolDecision: TypeAlias = Accept | Reject
Decision: TypeAlias = (
    Allow | Block | Deny | Ask | Accept | Reject | Retry | ContinuationDecision | ContinuationStop
)

_CONTEXT: Final = json_field(expected="an array of strings")
_ALLOW_JSON: Final = ObjectCodec(Allow, tag=("kind", "allow"), fields={"additional_context": _CONTEXT})
_BLOCK_JSON: Final = ObjectCodec(Block, tag=("kind", "block"))
_DENY_JSON: Final = ObjectCodec(Deny, tag=("kind", "deny"))
_ASK_JSON: Final = ObjectCodec(Ask, tag=("kind", "ask"))
_ACCEPT_JSON: Final = ObjectCodec(
    Accept,
    tag=("kind", "accept"),
    fields={
        "content": json_field(
            read=block_reader("text", "image", refuse_other=lambda tag: "a tool result holds only text and image blocks"),
            expected="an array of blocks or null",
        ),
        "additional_context": _CONTEXT,
    },
)
_REJECT_JSON: Final = ObjectCodec(Reject, tag=("kind", "reject"))
_RETRY_JSON: Final = ObjectCodec(Retry, tag=("kind", "retry"), fields={"delay": json_field(minimum=0.0, required=True)})
_CONTINUATION_JSON: Final = ObjectCodec(ContinuationDecision, tag=("kind", "continuation"))
_STOP_JSON: Final = ObjectCodec(ContinuationStop, tag=("kind", "continuation-stop"))
_DECISIONS: Final = TaggedUnion(
    "kind", "decision kind", (Allow, Block, Deny, Ask, Accept, Reject, Retry, ContinuationDecision, ContinuationStop)
)
for _codec in (
    _ALLOW_JSON,
    _BLOCK_JSON,
    _DENY_JSON,
    _ASK_JSON,
    _ACCEPT_JSON,
    _REJECT_JSON,
    _RETRY_JSON,
    _CONTINUATION_JSON,
    _STOP_JSON,
):
    _codec.install_to_json()


def decision_from_json(data: Mapping[str, Any], *, field: str = "decision") -> Decision:
    """Read any decision, choosing the class by its ``kind``.

    :raises VocabularyError: naming the bad field.
    """
    decision: Decision = _DECISIONS.read(data, field)
    return decision
