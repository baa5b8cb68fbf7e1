"""What comes back from ``tools/call``, as the ``ToolResult`` the model reads.

Text and image blocks pass through. A result with no text gets its ``structuredContent`` as JSON
text. Audio, binary resources and resource links have no block of their own in dsh, so each
becomes one line of text saying what was there. ``isError`` is ``TOOL_ERROR`` with the server's
own content.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types

from dsh_core import Image, Text, ToolResult

__all__ = ["error_result", "to_tool_result"]


def error_result(message: str, code: Any = "TOOL_ERROR") -> ToolResult:
    """An error result with one text block (``code`` is a ``ToolErrorCode``)."""
    return ToolResult(content=(Text(message),), is_error=True, error_code=code)


def _block(block: mcp_types.ContentBlock) -> Text | Image:
    if isinstance(block, mcp_types.TextContent):
        return Text(block.text)
    if isinstance(block, mcp_types.ImageContent):
        return Image(media_type=block.mime_type, data=block.data)
    if isinstance(block, mcp_types.AudioContent):
        return Text(
            f"[audio content of type {block.mime_type}, {len(block.data)} base64 characters, not shown]"
        )
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return Text(f"[resource {resource.uri}]\n{resource.text}")
        kind = resource.mime_type or "binary data"
        return Text(f"[resource {resource.uri}: {kind}, {len(resource.blob)} base64 characters, not shown]")
    if isinstance(block, mcp_types.ResourceLink):
        described = f" ({block.description})" if block.description else ""
        return Text(f"[resource link {block.uri}: {block.name}{described}]")
    return Text(f"[content of type {getattr(block, 'type', type(block).__name__)!r}, not shown]")


def to_tool_result(result: mcp_types.CallToolResult, tool_name: str) -> ToolResult:
    """The model's view of one ``CallToolResult`` of the dsh tool ``tool_name``."""
    blocks = [_block(block) for block in result.content]
    if result.structured_content is not None and not any(isinstance(b, Text) for b in blocks):
        blocks.insert(0, Text(json.dumps(result.structured_content, ensure_ascii=False)))
    if result.is_error:
        if not any(isinstance(b, Text) and b.text.strip() for b in blocks):
            blocks.insert(0, Text(f"Error: tool {tool_name!r} failed; its server gave no message."))
        return ToolResult(content=tuple(blocks), is_error=True, error_code="TOOL_ERROR")
    if not blocks:
        blocks.append(Text(""))
    return ToolResult(content=tuple(blocks))
