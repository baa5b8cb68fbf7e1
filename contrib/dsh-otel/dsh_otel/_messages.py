"""dsh messages (their contract JSON) as the GenAI conventions' input and output messages.

Only used with ``capture_content = true``. The conventions' shapes: a message is ``{role, parts}``;
a part is ``text``, ``reasoning``, ``tool_call`` (``id``, ``name``, ``arguments``),
``tool_call_response`` (``id``, ``response``) or ``blob`` (``modality``, ``mime_type``,
``content``). On spans, structured values are recorded as JSON strings (the Python SDK's
attributes hold only scalars and lists of them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

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


def _parts(blocks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "content": block.get("text", "")})
        elif kind == "reasoning":
            parts.append({"type": "reasoning", "content": block.get("text", "")})
        elif kind == "tool-call":
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.get("id"),
                    "name": block.get("name"),
                    "arguments": parsed_arguments(str(block.get("arguments", ""))),
                }
            )
        elif kind == "image":
            parts.append(
                {
                    "type": "blob",
                    "modality": "image",
                    "mime_type": block.get("media_type"),
                    "content": block.get("data"),
                }
            )
    return parts


def tool_response(blocks: Iterable[Mapping[str, Any]]) -> str:
    """A tool result's content as the text the model reads (images as a placeholder)."""
    pieces = []
    for block in blocks:
        if block.get("type") == "text":
            pieces.append(str(block.get("text", "")))
        elif block.get("type") == "image":
            pieces.append(f"[image {block.get('media_type')}]")
    return "".join(pieces)


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    role = message.get("role")
    content: Sequence[Mapping[str, Any]] = message.get("content", ())
    if role == "tool":
        part = {
            "type": "tool_call_response",
            "id": message.get("call_id"),
            "response": tool_response(content),
        }
        return {"role": "tool", "parts": [part]}
    return {"role": role, "parts": _parts(content)}


def input_messages(messages: Iterable[Mapping[str, Any]]) -> str:
    """The JSON of ``gen_ai.input.messages`` for messages as dsh's JSON, in the order sent."""
    return dumps([_message(message) for message in messages])


def output_message(message: Mapping[str, Any], finish_reason: str | None) -> str:
    """The JSON of ``gen_ai.output.messages``: one assistant message (dsh asks for one choice)."""
    out = _message(message)
    out["finish_reason"] = FINISH_REASONS.get(finish_reason or "", "stop")
    return dumps([out])
