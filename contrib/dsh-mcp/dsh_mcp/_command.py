"""``dsh mcp``: start the configured MCP servers, list each with its state and tools, stop them.

An entry point of the ``dsh.commands`` group (the CLI imports this module only to run it). The
exit status is 0 when every enabled server runs, 1 when one failed to start.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ._status import ServerStatus

__all__ = ["add_arguments", "help", "render", "run"]

help = "list the MCP servers with their state and tools"  # the name the CLI reads


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object per server")


def _as_json(status: ServerStatus, read_only: Sequence[str]) -> dict[str, Any]:
    return {
        "name": status.name,
        "transport": status.transport,
        "state": status.state,
        "tools": list(status.tools),
        "read_only_tools": list(read_only),
        "error": status.error,
        "protocol_version": status.protocol_version,
        "server_info": status.server_info,
    }


def render(
    statuses: Sequence[ServerStatus], read_only: set[str], out: TextIO, *, as_json: bool = False
) -> None:
    """Write the listing of ``statuses`` (``read_only``: the names of tools marked read-only)."""
    if as_json:
        for status in statuses:
            marked = [name for name in status.tools if name in read_only]
            out.write(json.dumps(_as_json(status, marked)) + "\n")
        return
    if not statuses:
        out.write("no MCP servers are configured (add [plugins.mcp.servers.<name>] to dsh.toml)\n")
        return
    width = max(len(status.name) for status in statuses)
    for status in statuses:
        about = ", ".join(part for part in (status.server_info, status.protocol_version) if part)
        line = f"{status.name:<{width}}  {status.transport:<5}  {status.state}"
        if status.state in ("running", "dead"):
            line += f"  {len(status.tools)} tool{'s' if len(status.tools) != 1 else ''}"
        if about:
            line += f"  ({about})"
        out.write(line + "\n")
        if status.error:
            out.write(f"  {status.error}\n")
        for name in status.tools:
            out.write(f"  {name}{'  (read-only)' if name in read_only else ''}\n")


async def run(args: argparse.Namespace) -> int:
    """Start a harness from the usual configuration layers, list its MCP servers, stop it."""
    import dsh_cli

    config = dsh_cli.config_from_args(args)
    async with dsh_cli.open_harness(config) as ctx:
        mcp = ctx.get_service("mcp")
        if mcp is None:
            raise dsh_cli.CliError("the mcp plugin is not loaded", hint="check plugins.disable")
        statuses = mcp.servers()
        read_only = {
            name
            for status in statuses
            for name in status.tools
            if (tool := ctx.tools.get(name)) and tool.read_only
        }
    render(statuses, read_only, sys.stdout, as_json=bool(getattr(args, "json", False)))
    return 1 if any(status.state == "failed" for status in statuses) else 0
