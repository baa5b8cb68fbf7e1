"""dsh messages as the GenAI conventions' input and output messages (content capture only).

Only used with ``capture_content = true``, and only for spans that record. The conventions'
shapes: a message is ``{role, parts}``; a part is ``text``, ``reasoning``, ``tool_call`` (``id``,
``name``, ``arguments``), ``tool_call_response`` (``id``, ``response``) or ``blob``
(``modality``, ``mime_type``, ``content``). On spans, structured values are recorded as JSON
strings (the Python SDK's attributes hold only scalars and lists of them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from dsh_core import AssistantMessage, Image, Message, Reasoning, Text, ToolCall, ToolResultMessage

__all__ = ["FINISH_REASONS", "dumps", "input_messages", "output_message", "parsed_arguments", "tool_response"]

#: dsh's finish reasons in the conventions' words (``aborted`` has none: it is reported as an error)
FINISH_REASONS: Final[Mapping[str, str]] = {
    "stop": "stop",
    "tool-calls": "tool_call",
    "max-tokens": "length",
    "error": "error",
    "aborted": "error",
}


def dumps(value: object) -> str:
    """Compact JSON, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def parsed_arguments(raw: str) -> Any:
    """Tool arguments as an object when they are JSON (the conventions ask for one), else the raw text."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _parts(blocks: Iterable[object]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, Text):
            parts.append({"type": "text", "content": block.text})
        elif isinstance(block, Reasoning):
            parts.append({"type": "reasoning", "content": block.text})
        elif isinstance(block, ToolCall):
            arguments = parsed_arguments(block.arguments)
            parts.append({"type": "tool_call", "id": block.id, "name": block.name, "arguments": arguments})
        elif isinstance(block, Image):
            parts.append({"type": "blob", "modality": "image", "mime_type": block.media_type, "content": block.data})
    return parts


def tool_response(blocks: Iterable[object]) -> str:
    """A tool result's content as the text the model reads (images as a placeholder)."""
    pieces = []
    for block in blocks:
        if isinstance(block, Text):
            pieces.append(block.text)
        elif isinstance(block, Image):
            pieces.append(f"[image {block.media_type}]")
    return "".join(pieces)


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message, ToolResultMessage):
        part = {"type": "tool_call_response", "id": message.call_id, "response": tool_response(message.content)}
        return {"role": "tool", "parts": [part]}
    role = "assistant" if isinstance(message, AssistantMessage) else "user"
    return {"role": role, "parts": _parts(message.content)}


def input_messages(messages: Iterable[Message]) -> str:
    """The JSON of ``gen_ai.input.messages`` for these messages, in the order sent."""
    return dumps([_message(message) for message in messages])


def output_message(message: AssistantMessage, finish_reason: str | None) -> str:
    """The JSON of ``gen_ai.output.messages``: one assistant message (dsh asks for one choice)."""
    out = _message(message)
    out["finish_reason"] = FINISH_REASONS.get(finish_reason or "", "stop")
    return dumps([out])
