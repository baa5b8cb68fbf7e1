"""Assemble the assistant message of one model call from its stream of chunks.

Each chunk ``index`` is one block, and blocks keep the order in which their index first appeared:
text deltas concatenate, reasoning deltas concatenate, and tool-call deltas concatenate their
``arguments`` while the first non-``None`` ``id`` and ``name`` win. The last ``Usage`` and the
``Finish`` are recorded. ``message()`` drops tool calls when the finish reason is ``max-tokens``
(they were cut off, so they are never executed); ``interrupted()`` keeps only the non-blank text and
reasoning, for a stream cancelled midway.
"""

from __future__ import annotations

from typing import Any, Final, NoReturn

from dsh_core.vocabulary._content import AssistantMessage, Reasoning, Text, ToolCall, new_id
from dsh_core.vocabulary._llm_types import Chunk, Finish, ReasoningDelta, TextDelta, ToolCallDelta, Usage
from dsh_core.vocabulary._slots import new_instance, slot_setters

__all__ = ["BlockAssembler"]

_KIND_NAMES: Final = {TextDelta: "text", ReasoningDelta: "reasoning", ToolCallDelta: "tool-call"}


class BlockAssembler:
    """Feed it one model call's chunks with ``add``; read the message with ``message()``.

    Costs a few hundred nanoseconds per chunk: a block is a small list (its delta class, the
    pieces of its text or arguments, and for a tool call its id and name), joined only at the end.
    """

    __slots__ = ("_blocks", "_finish", "_usage", "model", "provider")

    def __init__(self, provider: str | None = None, model: str | None = None) -> None:
        self.provider = provider
        self.model = model
        self._blocks: dict[int, list[Any]] = {}
        self._usage: Usage | None = None
        self._finish: Finish | None = None

    @property
    def usage(self) -> Usage | None:
        """The last ``Usage`` chunk, if any came."""
        return self._usage

    @property
    def finish(self) -> Finish | None:
        """The ``Finish`` chunk, or ``None`` while streaming (or if the stream ended without one)."""
        return self._finish

    def add(self, chunk: Chunk) -> None:
        """Take one chunk.

        :raises ValueError: for a chunk after the ``Finish``, or a delta whose index already holds
            a block of another kind (an adapter bug: each block needs its own index).
        :raises TypeError: for something that is not a chunk.
        """
        if self._finish is not None:
            msg = f"{type(chunk).__name__} after Finish: an adapter's stream must end with its Finish chunk"
            raise ValueError(msg)
        if type(chunk) is TextDelta or type(chunk) is ReasoningDelta:
            block = self._blocks.get(chunk.index)
            if block is None:
                self._blocks[chunk.index] = [type(chunk), [chunk.text]]
            elif block[0] is type(chunk):
                block[1].append(chunk.text)
            else:
                self._conflict(chunk, block)
        elif type(chunk) is ToolCallDelta:
            block = self._blocks.get(chunk.index)
            if block is None:
                self._blocks[chunk.index] = [ToolCallDelta, [chunk.arguments], chunk.id, chunk.name]
            elif block[0] is ToolCallDelta:
                block[1].append(chunk.arguments)
                if block[2] is None:
                    block[2] = chunk.id
                if block[3] is None:
                    block[3] = chunk.name
            else:
                self._conflict(chunk, block)
        elif type(chunk) is Usage:
            self._usage = chunk
        elif type(chunk) is Finish:
            self._finish = chunk
        else:
            kind = type(chunk).__name__
            msg = f"BlockAssembler.add() takes stream chunks (TextDelta, ..., Finish), got {kind}"
            raise TypeError(msg)

    def _conflict(self, chunk: TextDelta | ReasoningDelta | ToolCallDelta, block: list[Any]) -> NoReturn:
        msg = (
            f"chunk index {chunk.index} is a {_KIND_NAMES[block[0]]} block, but a {type(chunk).__name__} "
            f"came for it; an adapter must give each block its own index"
        )
        raise ValueError(msg)

    def message(self, *, id: str | None = None) -> AssistantMessage:
        """The assistant message so far, tool calls dropped on a ``max-tokens`` finish.

        A tool call that never got an id is ``call-<index>``; one without a name gets ``""``.
        Each call builds a new message, with ``id`` or a fresh one.
        """
        keep_calls = self._finish is None or self._finish.reason != "max-tokens"
        content: list[Text | Reasoning | ToolCall] = []
        # Every piece is a str the deltas' own checks let through: the blocks are built unchecked.
        for index, block in self._blocks.items():
            kind = block[0]
            if kind is TextDelta:
                content.append(_text("".join(block[1])))
            elif kind is ReasoningDelta:
                content.append(Reasoning("".join(block[1])))
            elif keep_calls:
                call_id = f"call-{index}" if block[2] is None else block[2]
                content.append(_tool_call(call_id, block[3] or "", "".join(block[1])))
        return self._build(content, id)

    def interrupted(self, *, id: str | None = None) -> AssistantMessage:
        """What to keep of a cancelled stream: the text and reasoning blocks that are not blank.

        Tool calls are never kept. The message may be empty: check ``content`` before logging it.
        """
        content: list[Text | Reasoning | ToolCall] = []
        for block in self._blocks.values():
            kind = block[0]
            if kind is ToolCallDelta:
                continue
            text = "".join(block[1])
            if text and not text.isspace():
                content.append(Text(text) if kind is TextDelta else Reasoning(text))
        return self._build(content, id)

    def _build(self, content: list[Text | Reasoning | ToolCall], id: str | None) -> AssistantMessage:
        provider, model = self.provider, self.model
        if (
            (provider is None or provider.__class__ is str)
            and (model is None or model.__class__ is str)
            and (id is None or id.__class__ is str)
        ):  # the blocks are this assembler's own: only these need checking (once per step)
            return AssistantMessage.trusted(tuple(content), provider, model, new_id() if id is None else id)
        return AssistantMessage(tuple(content), provider, model, new_id() if id is None else id)  # raises

    def __repr__(self) -> str:
        reason = None if self._finish is None else self._finish.reason
        return f"<BlockAssembler {len(self._blocks)} blocks, finish={reason!r}>"


(_set_text,) = slot_setters(Text)
_set_call_id, _set_call_name, _set_call_arguments = slot_setters(ToolCall)


def _text(text: str) -> Text:
    block: Text = new_instance(Text)
    _set_text(block, text)
    return block


def _tool_call(call_id: str, name: str, arguments: str) -> ToolCall:
    block: ToolCall = new_instance(ToolCall)
    _set_call_id(block, call_id)
    _set_call_name(block, name)
    _set_call_arguments(block, arguments)
    return block
