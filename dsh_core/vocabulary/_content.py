"""Messages and their content blocks: frozen values with lossless JSON.

Their JSON comes from one ``ObjectCodec`` per class (the tag, the key order, which blocks a role
may hold), and ``message_from_json``/``block_from_json`` choose the class by its tag. Constructors
check Python types (``TypeError``); ``from_json`` checks JSON and raises ``VocabularyError`` whose
``field`` is the path of the bad spot, e.g. ``message.content[1].type``.

JSON shapes (SPEC §7)::

    {"type": "text", "text": ...}
    {"type": "reasoning", "text": ..., "signature": ... | null}
    {"type": "tool-call", "id": ..., "name": ..., "arguments": "<raw JSON text>"}
    {"type": "image", "media_type": ..., "data": "<base64>"}
    {"role": "user", "id": ..., "content": [...], "source": {"kind": ..., ...}}
    {"role": "assistant", "id": ..., "content": [...], "provider": ... | null, "model": ... | null}
    {"role": "tool", "id": ..., "call_id": ..., "content": [...], "is_error": false}
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

import attrs

from dsh_core.vocabulary._codec import ObjectCodec, TaggedUnion, json_field
from dsh_core.vocabulary._errors import VocabularyError
from dsh_core.vocabulary._json import FrozenDict, JsonValueError, expect_object, freeze_json_object
from dsh_core.vocabulary._slots import new_instance, slot_setters

__all__ = [
    "SOURCE_KINDS",
    "USER_SOURCE",
    "AssistantMessage",
    "Content",
    "ContentBlock",
    "Image",
    "Message",
    "Reasoning",
    "SourceKind",
    "Text",
    "ToolCall",
    "ToolResultMessage",
    "UserMessage",
    "as_content",
    "as_result_content",
    "block_from_json",
    "block_reader",
    "message_from_json",
    "message_reader",
    "new_id",
    "validate_bool",
    "validate_optional_str",
    "validate_str",
]

# ---------------------------------------------------------------------- ids

# A private generator, so that code seeding the global ``random`` (tests, hypothesis) cannot make
# ids repeat; reseeded in a forked child so parent and child never share a sequence.
_rng = random.Random()  # ids need uniqueness, not secrecy
os.register_at_fork(after_in_child=_rng.seed)
_random_bits = _rng.getrandbits
_UUID4_CLEAR: Final = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET: Final = (0x4000 << 64) | (0x8000 << 48)


def new_id() -> str:
    """A fresh random UUID (version 4) as 32 hex digits (kept: 0.40 us vs 1.89 for ``uuid4().hex``,
    same run, and every message built without an id makes one)."""
    return f"{(_random_bits(128) & _UUID4_CLEAR) | _UUID4_SET:032x}"


# ---------------------------------------------------------------------- attrs validators
# Shared by the other vocabulary modules and the session-log catalogue.


def instance_of_exact(*classes: type) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    """attrs' ``instance_of(classes)`` with the exact classes tried first, in a plain function.

    The common value's class is one of them, and a function with one set test costs about 0.1 us
    less per field than attrs' validator object (0.3 us of the 1.4 of an ``AssistantMessage``).
    Anything else (a subclass, a wrong type) goes to attrs' check, which words the error.
    An optional field passes ``NoneType`` too: one check where ``optional()`` makes two.
    """
    slow: Callable[[Any, attrs.Attribute[Any], Any], None] = attrs.validators.instance_of(
        classes if len(classes) > 1 else classes[0]
    )
    exact = frozenset(classes)

    def validate(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value.__class__ not in exact:
            slow(instance, attribute, value)

    return validate


validate_str: Final = instance_of_exact(str)
validate_optional_str: Final = instance_of_exact(str, type(None))
validate_bool: Final = instance_of_exact(bool)  # a bool is its own class: exact either way


# ---------------------------------------------------------------------- blocks


@attrs.frozen
class Text:
    """Plain text, from the user, the model or a tool."""

    text: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return _TEXT_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "block") -> Text:
        """Read a text block. :raises VocabularyError: naming the bad field."""
        value: Text = _TEXT_JSON.read(data, field)
        return value


@attrs.frozen
class Reasoning:
    """The model's visible reasoning; ``signature`` is the provider's opaque proof, sent back as is."""

    text: str = attrs.field(validator=validate_str)
    signature: str | None = attrs.field(default=None, validator=validate_optional_str)

    def to_json(self) -> dict[str, Any]:
        return _REASONING_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "block") -> Reasoning:
        """Read a reasoning block (``signature`` may be absent). :raises VocabularyError:"""
        value: Reasoning = _REASONING_JSON.read(data, field)
        return value


@attrs.frozen
class ToolCall:
    """A tool call the model made; ``arguments`` is the raw JSON text it produced, unparsed."""

    id: str = attrs.field(validator=validate_str)
    name: str = attrs.field(validator=validate_str)
    arguments: str = attrs.field(validator=validate_str)

    def to_json(self) -> dict[str, Any]:
        return _TOOL_CALL_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "block") -> ToolCall:
        """Read a tool-call block. :raises VocabularyError: naming the bad field."""
        value: ToolCall = _TOOL_CALL_JSON.read(data, field)
        return value


@attrs.frozen
class Image:
    """An image as base64 ``data`` of ``media_type`` (``image/png``, ...)."""

    media_type: str = attrs.field(validator=validate_str)
    data: str = attrs.field(validator=validate_str, repr=lambda data: f"<{len(data)} base64 chars>")

    def to_json(self) -> dict[str, Any]:
        return _IMAGE_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "block") -> Image:
        """Read an image block. :raises VocabularyError: naming the bad field."""
        value: Image = _IMAGE_JSON.read(data, field)
        return value


ContentBlock: TypeAlias = Text | Reasoning | ToolCall | Image
#: What public APIs accept as content: a str (one ``Text``) or a sequence of blocks.
Content: TypeAlias = str | Sequence[ContentBlock]

# The block readers check every field, so values read are built straight into their slots.
_TEXT_JSON: Final = ObjectCodec(Text, tag=("type", "text"), trusted=True)
_REASONING_JSON: Final = ObjectCodec(Reasoning, tag=("type", "reasoning"), trusted=True)
_TOOL_CALL_JSON: Final = ObjectCodec(ToolCall, tag=("type", "tool-call"), trusted=True)
_IMAGE_JSON: Final = ObjectCodec(Image, tag=("type", "image"), trusted=True)
_BLOCKS: Final = TaggedUnion("type", "block type", (Text, Reasoning, ToolCall, Image))
for _codec in (_TEXT_JSON, _REASONING_JSON, _TOOL_CALL_JSON, _IMAGE_JSON):
    _codec.install_to_json()  # before the messages' codecs, whose content calls block.to_json()


def block_from_json(data: Mapping[str, Any], *, field: str = "block") -> ContentBlock:
    """Read any content block, choosing the class by its ``type``.

    :raises VocabularyError: for a malformed block; ``field`` names the bad spot.
    """
    block: ContentBlock = _BLOCKS.read(data, field)
    return block


def block_reader(*types: str, refuse_other: Callable[[str], str] | None = None) -> Callable[[object, str], Any]:
    """A codec reader of the blocks of ``types`` (all by default), for a field holding one."""
    return _BLOCKS.reader(only=types or None, refuse_other=refuse_other)


def _content_field(role: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    """Codec options of a ``role`` message's content: an array of the blocks ``allowed``."""
    kinds = " or ".join(sorted(allowed))

    def refuse_other(tag: str) -> str:
        return f"a {role} message cannot hold a {tag} block; expected {kinds}"

    return json_field(read=_BLOCKS.reader(only=allowed, refuse_other=refuse_other), expected="an array of blocks")


def _to_blocks(value: object, allowed: frozenset[type], owner: str) -> tuple[Any, ...]:
    if type(value) is tuple:
        for block in value:
            if type(block) not in allowed:
                break
        else:
            return value
    if isinstance(value, str):
        return (Text(value),)
    if type(value) is tuple:
        blocks: tuple[Any, ...] = value
    elif isinstance(value, list | tuple):
        blocks = tuple(value)
    else:
        msg = f"{owner}.content must be a str or a sequence of content blocks, got {type(value).__name__}"
        raise TypeError(msg)
    for index, block in enumerate(blocks):
        if type(block) not in allowed:
            names = " or ".join(sorted(t.__name__ for t in allowed))
            hint = "; wrap text in Text(...)" if isinstance(block, str) else ""
            msg = f"{owner}.content[{index}] must be a {names} block, got {type(block).__name__}{hint}"
            raise TypeError(msg)
    return blocks


_ANY_BLOCK: Final[frozenset[type]] = frozenset({Text, Reasoning, ToolCall, Image})
_USER_BLOCK: Final[frozenset[type]] = frozenset({Text, Image})
_ASSISTANT_BLOCK: Final[frozenset[type]] = frozenset({Text, Reasoning, ToolCall})


def as_content(value: Content) -> tuple[ContentBlock, ...]:
    """Content as public APIs take it, as a tuple of blocks: a str becomes ``(Text(s),)``.

    :raises TypeError: for anything but a str or a list/tuple of content blocks.
    """
    return _to_blocks(value, _ANY_BLOCK, "message")


def as_result_content(value: str | Sequence[Text | Image]) -> tuple[Text | Image, ...]:
    """Content a tool result may hold (``Text`` and ``Image``), as a tuple: a str becomes one ``Text``.

    :raises TypeError: for anything else.
    """
    return _to_blocks(value, _USER_BLOCK, "tool result")


def _user_content(value: str | Sequence[Text | Image]) -> tuple[Text | Image, ...]:
    return _to_blocks(value, _USER_BLOCK, "UserMessage")


def _assistant_content(
    value: str | Sequence[Text | Reasoning | ToolCall],
) -> tuple[Text | Reasoning | ToolCall, ...]:
    return _to_blocks(value, _ASSISTANT_BLOCK, "AssistantMessage")


def _tool_content(value: str | Sequence[Text | Image]) -> tuple[Text | Image, ...]:
    return _to_blocks(value, _USER_BLOCK, "ToolResultMessage")




def _text_of(content: tuple[ContentBlock, ...]) -> str:
    return "".join([block.text for block in content if type(block) is Text])


# ---------------------------------------------------------------------- sources

SourceKind: TypeAlias = Literal["user", "steering", "context", "plugin", "continuation", "compaction"]
SOURCE_KINDS: Final[frozenset[str]] = frozenset(
    {"user", "steering", "context", "plugin", "continuation", "compaction"}
)
#: The default source of a ``UserMessage``.
USER_SOURCE: Final = FrozenDict(kind="user")


def _to_source(value: object) -> FrozenDict:
    """Freeze and check a message source: a JSON object whose ``kind`` says where it came from."""
    if type(value) is FrozenDict:
        _check_source(value, "source")
        return value
    if not isinstance(value, Mapping):
        msg = f'UserMessage.source must be a mapping such as {{"kind": "user"}}, got {type(value).__name__}'
        raise TypeError(msg)
    source = freeze_json_object(value, where="UserMessage.source", root="source")
    _check_source(source, "source")
    return source


def _check_source(source: Mapping[str, Any], field: str) -> None:
    kind = source.get("kind")
    if kind not in SOURCE_KINDS:
        problem = "missing" if kind is None else f"{kind!r} is not a message source kind"
        kinds = ", ".join(sorted(SOURCE_KINDS))
        raise VocabularyError(f"{field}.kind: {problem}; expected one of {kinds}", field=f"{field}.kind")
    if kind == "plugin" and not (type(source.get("plugin")) is str and source["plugin"]):
        msg = f"{field}.plugin: a plugin source names its plugin, e.g. {{'kind': 'plugin', 'plugin': 'todo'}}"
        raise VocabularyError(msg, field=f"{field}.plugin")


# ---------------------------------------------------------------------- messages


@attrs.frozen
class UserMessage:
    """A user-role message; ``source`` says who put it there (the user, steering, a plugin, ...).

    ``source`` is a frozen JSON object whose ``kind`` is one of ``user``, ``steering``,
    ``context``, ``plugin`` (with a ``plugin`` name), ``continuation`` or ``compaction``; other
    keys are kept as they are. Content may be ``Text`` and ``Image`` blocks.
    """

    content: tuple[Text | Image, ...] = attrs.field(converter=_user_content)
    source: FrozenDict = attrs.field(default=USER_SOURCE, converter=_to_source)
    id: str = attrs.field(factory=new_id, validator=validate_str)

    @property
    def text(self) -> str:
        """The text blocks, joined."""
        return _text_of(self.content)

    def to_json(self) -> dict[str, Any]:
        return _USER_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "message") -> UserMessage:
        """Read a user message. :raises VocabularyError: naming the bad field."""
        value: UserMessage = _USER_JSON.read(data, field)
        return value


@attrs.frozen
class AssistantMessage:
    """What the model said in one step: text, reasoning and tool calls, in the order it produced them.

    ``provider`` and ``model`` name who produced it (``None`` when unknown).
    """

    content: tuple[Text | Reasoning | ToolCall, ...] = attrs.field(converter=_assistant_content)
    provider: str | None = attrs.field(default=None, validator=validate_optional_str)
    model: str | None = attrs.field(default=None, validator=validate_optional_str)
    id: str = attrs.field(factory=new_id, validator=validate_str)

    @classmethod
    def trusted(
        cls, content: tuple[Text | Reasoning | ToolCall, ...], provider: str | None, model: str | None, id: str
    ) -> AssistantMessage:
        """A message from values already checked (a ``BlockAssembler``: the blocks it built, its
        provider and model), without the converter and validators (once per step)."""
        message = new_instance(cls)
        _set_reply_content(message, content)
        _set_reply_provider(message, provider)
        _set_reply_model(message, model)
        _set_reply_id(message, id)
        return message

    @property
    def text(self) -> str:
        """The text blocks, joined (reasoning excluded)."""
        return _text_of(self.content)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool-call blocks, in the order the model made them."""
        return tuple([block for block in self.content if type(block) is ToolCall])

    def to_json(self) -> dict[str, Any]:
        return _ASSISTANT_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "message") -> AssistantMessage:
        """Read an assistant message. :raises VocabularyError: naming the bad field."""
        value: AssistantMessage = _ASSISTANT_JSON.read(data, field)
        return value


@attrs.frozen
class ToolResultMessage:
    """The result of the tool call ``call_id``, as the model will see it."""

    call_id: str = attrs.field(validator=validate_str)
    content: tuple[Text | Image, ...] = attrs.field(converter=_tool_content)
    is_error: bool = attrs.field(default=False, validator=validate_bool)
    id: str = attrs.field(factory=new_id, validator=validate_str)

    @classmethod
    def trusted(cls, call_id: str, content: tuple[Text | Image, ...], is_error: bool) -> ToolResultMessage:
        """A message from values already checked (the loop: a ``ToolCall``'s id, a ``ToolResult``'s
        content and flag), with a fresh id, without the converter and validators (once per tool
        call: 1.0 us instead of 2.1 us, timeit)."""
        message = new_instance(cls)
        _set_result_call_id(message, call_id)
        _set_result_content(message, content)
        _set_result_is_error(message, is_error)
        _set_result_id(message, new_id())
        return message

    @property
    def text(self) -> str:
        """The text blocks, joined."""
        return _text_of(self.content)

    def to_json(self) -> dict[str, Any]:
        return _TOOL_RESULT_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "message") -> ToolResultMessage:
        """Read a tool result message. :raises VocabularyError: naming the bad field."""
        value: ToolResultMessage = _TOOL_RESULT_JSON.read(data, field)
        return value


_set_reply_content, _set_reply_provider, _set_reply_model, _set_reply_id = slot_setters(AssistantMessage)
_set_result_call_id, _set_result_content, _set_result_is_error, _set_result_id = slot_setters(ToolResultMessage)

Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


def _read_source(value: object, path: str) -> FrozenDict:
    """A message source: a JSON object whose ``kind`` is known (frozen)."""
    source = expect_object(value, path)
    if source.__class__ is not FrozenDict:
        try:
            source = freeze_json_object(source, where=path, root=path)
        except JsonValueError as exc:  # only when handed Python objects rather than parsed JSON
            raise VocabularyError(f"{exc.path}: {exc.problem}", field=exc.path) from exc
    _check_source(source, path)
    return source


# Keys in the order of SPEC §7 (role, id first); the id is required in JSON although the
# constructor makes one. The readers check everything the constructors do.
_USER_JSON: Final = ObjectCodec(
    UserMessage,
    tag=("role", "user"),
    keys=("id", "content", "source"),
    fields={
        "id": json_field(required=True),
        "content": _content_field("user", ("text", "image")),
        "source": json_field(read=_read_source),
    },
    trusted=True,
)
_ASSISTANT_JSON: Final = ObjectCodec(
    AssistantMessage,
    tag=("role", "assistant"),
    keys=("id", "content", "provider", "model"),
    fields={"id": json_field(required=True), "content": _content_field("assistant", ("text", "reasoning", "tool-call"))},
    trusted=True,
)
_TOOL_RESULT_JSON: Final = ObjectCodec(
    ToolResultMessage,
    tag=("role", "tool"),
    keys=("id", "call_id", "content", "is_error"),
    fields={"id": json_field(required=True), "content": _content_field("tool", ("text", "image"))},
    trusted=True,
)
_MESSAGES: Final = TaggedUnion("role", "role", (UserMessage, AssistantMessage, ToolResultMessage))
for _codec in (_USER_JSON, _ASSISTANT_JSON, _TOOL_RESULT_JSON):
    _codec.install_to_json()


def message_from_json(data: Mapping[str, Any], *, field: str = "message") -> Message:
    """Read any message, choosing the class by its ``role``.

    :raises VocabularyError: for a malformed message; ``field`` names the bad spot.
    """
    message: Message = _MESSAGES.read(data, field)
    return message


def message_reader(*roles: str, refuse_other: Callable[[str], str] | None = None) -> Callable[[object, str], Any]:
    """A codec reader of the messages of ``roles`` (all by default), for a field holding one."""
    return _MESSAGES.reader(only=roles or None, refuse_other=refuse_other)
