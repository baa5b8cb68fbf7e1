"""A server's tool as a dsh ``Tool``: its name ``mcp__<server>__<tool>``, description and schema.

Model APIs allow tool names of 1-64 letters, digits, ``_`` and ``-``. A server's tool name with
other characters (MCP allows ``.`` and ``/``) has each of them replaced by ``_``; a name that
would be longer than 64 is cut and ends with 8 hex digits of its hash, so it stays unique.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from dsh_core import Tool, ToolResult

if TYPE_CHECKING:
    import mcp_types

__all__ = ["PREFIX", "dsh_tool", "dsh_tool_name"]

#: every MCP tool's name starts with this
PREFIX: Final = "mcp__"
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")
_MAX = 64

#: ``call(remote_name, arguments)``: what runs one call on the server
Caller = Callable[[str, str, dict[str, Any]], Awaitable[ToolResult]]


def dsh_tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``."""
    name = f"{PREFIX}{server}__{_NOT_ALLOWED.sub('_', tool)}"
    if len(name) <= _MAX:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[: _MAX - 9]}_{digest}"


def _plain(value: Any) -> Any:
    """Frozen JSON (``FrozenDict``, tuples) as plain dicts and lists, for the SDK to send."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


def _description(tool: mcp_types.Tool) -> str:
    if tool.description:
        return tool.description
    title = tool.title or (tool.annotations.title if tool.annotations is not None else None)
    return title or ""


def _parameters(tool: mcp_types.Tool) -> dict[str, Any]:
    schema = dict(tool.input_schema)
    schema.setdefault("type", "object")  # required by MCP; some servers leave it out
    return schema


def dsh_tool(server: str, tool: mcp_types.Tool, *, timeout: float, call: Caller) -> Tool:
    """The dsh tool that calls ``tool`` on ``server`` through ``call``.

    It is read-only (and may run alongside other calls) only when the server marks it
    ``readOnlyHint``; otherwise the permissions plugin treats it as a write.

    :raises TypeError, ValueError: when the server's schema is not a JSON object schema.
    """
    name = dsh_tool_name(server, tool.name)
    remote = tool.name
    read_only = tool.annotations is not None and tool.annotations.read_only_hint is True

    async def body(**arguments: Any) -> ToolResult:
        return await call(name, remote, _plain(arguments))

    return Tool(
        name=name,
        function=body,
        description=_description(tool),
        parameters=_parameters(tool),
        timeout=timeout,
        read_only=read_only,
        parallel_safe=read_only,
    )
