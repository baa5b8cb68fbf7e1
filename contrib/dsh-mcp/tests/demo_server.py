"""An MCP server for the tests, built with the SDK's own server API (``MCPServer``).

    python demo_server.py [--signals DIR] [--http FD]

Over stdio by default; with ``--http FD`` it serves streamable HTTP on the listening socket it
inherits as file descriptor FD (the test picked and bound the loopback port). With ``--signals
DIR`` it reports to the test: each start appends its pid to ``DIR/starts``; ``slow`` writes
``started`` into the FIFO ``DIR/started`` and, when it is cancelled, ``cancelled`` into the FIFO
``DIR/cancelled``; over HTTP every request's method and ``Authorization`` header is appended to
``DIR/requests``.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations

#: a 1x1 red PNG
DOT = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
        "0000000c49444154789c63f8cfc0000003010100c9fe92ef0000000049454e44ae426082"
    )
).decode()

parser = argparse.ArgumentParser()
parser.add_argument("--signals", type=Path)
parser.add_argument("--http", type=int)
options = parser.parse_args()
signals: Path | None = options.signals

server = MCPServer("demo", version="1.0")


def _signal(name: str, text: str) -> None:
    if signals is not None:
        with open(signals / name, "w") as fifo:  # a FIFO: blocks until the test reads it
            fifo.write(text)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def picture() -> CallToolResult:
    """A caption and a tiny picture."""
    return CallToolResult(
        content=[TextContent(text="a red dot"), ImageContent(data=DOT, mime_type="image/png")]
    )


@server.tool()
def measure() -> CallToolResult:
    """Structured content only, no text."""
    return CallToolResult(content=[], structured_content={"width": 3, "height": 4})


@server.tool()
def fail() -> str:
    """Always fails, as a tool error."""
    raise ToolError("the disk is full")


@server.tool()
async def slow() -> str:
    """Runs until it is cancelled."""
    _signal("started", "started")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        _signal("cancelled", "cancelled")
        raise
    return "never"


@server.tool()
async def grow(ctx: Context[Any, Any]) -> str:
    """Adds the tool ``extra`` and announces that the tools changed."""

    def extra(x: int) -> int:
        """Add one."""
        return x + 1

    server.add_tool(extra, name="extra")
    await ctx.notify_tools_changed()  # 2026-era clients, through subscriptions/listen
    await ctx.session.send_tool_list_changed()  # handshake-era clients (dropped for the others)
    return "grown"


@server.tool()
async def shrink(ctx: Context[Any, Any]) -> str:
    """Removes the tool ``extra`` and announces that the tools changed."""
    server.remove_tool("extra")
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "shrunk"


@server.tool()
def die() -> str:
    """The server process exits in the middle of the call."""
    os._exit(3)


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


def _record_requests(app: Any) -> Any:
    async def recorded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and signals is not None:
            headers = dict(scope.get("headers") or [])
            line = f"{scope['method']} {headers.get(b'authorization', b'-').decode()}\n"
            with open(signals / "requests", "a") as log:  # noqa: ASYNC230 - one line, before the answer
                log.write(line)
        await app(scope, receive, send)

    return recorded


if signals is not None:
    with open(signals / "starts", "a") as starts:
        starts.write(f"{os.getpid()}\n")

if options.http is None:
    server.run()
else:
    import uvicorn

    sock = socket.socket(fileno=options.http)
    app = _record_requests(server.streamable_http_app())
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
