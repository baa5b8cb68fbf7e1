"""The ``mcp`` plugin: starts the configured servers (concurrently) and provides ``ctx.mcp``."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import anyio

from ._config import McpConfig
from ._service import McpService
from ._status import Backoff

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["McpPlugin"]


class McpPlugin:
    """Model Context Protocol servers' tools for every agent (SPEC §9.4).

    ``backoff`` sets the waits between restarts of a server that keeps failing.
    """

    name = "mcp"
    requires: ClassVar[tuple[str, ...]] = ("tools",)
    provides: ClassVar[tuple[str, ...]] = ("mcp",)
    Config = McpConfig

    def __init__(self, backoff: Backoff | None = None) -> None:
        self._backoff = backoff if backoff is not None else Backoff()

    async def start(self, ctx: Context) -> None:
        """Start every enabled server; one that fails is logged, and the harness starts anyway."""
        config = ctx.config if isinstance(ctx.config, McpConfig) else McpConfig()
        service = McpService(self._backoff)
        ctx.provide("mcp", service)
        async with anyio.create_task_group() as tg:
            for name, server in config.servers.items():
                tg.start_soon(service.start, ctx, name, server)
