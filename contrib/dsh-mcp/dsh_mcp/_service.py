"""The ``mcp`` service: which servers run, and connecting more of them from an agent's setup.

Seen through ``ctx.mcp`` as a view bound to that context. A server connected through
``agent.ctx`` belongs to that agent: its tools are registered in the agent's scope (no other
agent sees them; they shadow a configured tool of the same name there) and it is stopped when
the agent is disposed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from dsh_core import DuplicateRegistrationError

from ._config import ServerConfig, check_server_name
from ._status import Backoff, ServerStatus

if TYPE_CHECKING:
    from dsh_core import Context

    from ._connection import ServerConnection

__all__ = ["McpService", "McpView"]


class McpService:
    """Every MCP server of the harness, by scope (``None``: configured; else an agent id) and name."""

    def __init__(self, backoff: Backoff) -> None:
        self._backoff = backoff
        self._servers: dict[tuple[str | None, str], ServerConnection] = {}

    def bind(self, ctx: Context) -> McpView:
        return McpView(self, ctx)

    async def start(self, ctx: Context, name: str, config: ServerConfig) -> ServerConnection:
        """Start server ``name`` as a task of ``ctx`` and wait until it runs or has failed.

        Never raises for the server's own failure (its status says why).

        :raises DuplicateRegistrationError: when that scope already has a server of that name.
        """
        from ._connection import ServerConnection  # the SDK is imported when a server is first started

        check_server_name(name)
        if not isinstance(config, ServerConfig):
            msg = f"MCP server {name!r}: expected a ServerConfig, got {type(config).__name__}"
            raise TypeError(msg)
        key = (ctx.agent_scope, name)
        if key in self._servers:
            where = "in the configuration" if key[0] is None else f"for agent {key[0]!r}"
            msg = f"an MCP server named {name!r} is already connected {where}; pick another name"
            raise DuplicateRegistrationError(msg)
        connection = ServerConnection(name, config, ctx, self._backoff)
        self._servers[key] = connection

        def forget() -> None:
            if self._servers.get(key) is connection:
                del self._servers[key]

        ctx.effect(forget)
        if config.enabled:
            ctx.start_task(connection.run, name=f"mcp server {name}")
            ctx.effect(connection.close)  # undone first (LIFO): a graceful close before the task's cancel
            await connection.wait_started()
        return connection

    def statuses(self, agent_id: str | None = None) -> tuple[ServerStatus, ...]:
        """The configured servers, and ``agent_id``'s own, by name (an agent's shadows a configured one)."""
        seen: dict[str, ServerStatus] = {}
        for (scope, name), connection in self._servers.items():
            if scope is None and name not in seen:
                seen[name] = connection.status()
        if agent_id is not None:
            for (scope, name), connection in self._servers.items():
                if scope == agent_id:
                    seen[name] = connection.status()
        return tuple(seen[name] for name in sorted(seen))


class McpView:
    """``ctx.mcp``: the servers as this context sees them, and ``connect`` into its scope."""

    def __init__(self, service: McpService, ctx: Context) -> None:
        self._service = service
        self._ctx = ctx

    async def connect(self, name: str, config: ServerConfig | None = None, **keys: Any) -> ServerStatus:
        """Start a server owned by this context (through ``agent.ctx``: that agent's own).

        Give a ``ServerConfig`` or its keys (``command=..., args=[...]`` or ``url=...``). Returns
        once the server runs or has failed; its status says which (a failure is also logged).

        :raises TypeError, ValueError: for a bad name or configuration.
        :raises DuplicateRegistrationError: when this scope already has a server of that name.
        """
        if config is None:
            if "args" in keys:
                keys["args"] = tuple(keys["args"])
            if keys.get("tools") is not None:
                keys["tools"] = tuple(keys["tools"])
            config = ServerConfig(**keys)
        elif keys:
            config = attrs.evolve(config, **keys)
        connection = await self._service.start(self._ctx, name, config)
        return connection.status()

    def servers(self) -> tuple[ServerStatus, ...]:
        """Every server this context's agent sees (the configured ones when it belongs to no agent)."""
        return self._service.statuses(self._ctx.agent_scope)

    def get(self, name: str) -> ServerStatus | None:
        """The status of server ``name`` as this context sees it, or ``None``."""
        return next((status for status in self.servers() if status.name == name), None)
