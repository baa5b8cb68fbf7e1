"""What the plugin tells about a server (``ServerStatus``), and how long restarts wait (``Backoff``).

Kept apart from the connection so that importing the plugin does not import the SDK.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import attrs

__all__ = ["Backoff", "ServerState", "ServerStatus"]

ServerState: TypeAlias = Literal["disabled", "starting", "running", "failed", "dead", "stopped"]


@attrs.frozen(kw_only=True)
class Backoff:
    """Seconds between restarts of a server that keeps failing: ``initial``, doubling up to ``maximum``."""

    initial: float = 1.0
    maximum: float = 30.0

    def delay(self, failures: int) -> float:
        """The wait after ``failures`` consecutive failed (re)starts (1 or more)."""
        return float(min(self.initial * 2.0 ** max(failures - 1, 0), self.maximum))


@attrs.frozen(kw_only=True)
class ServerStatus:
    """What ``dsh mcp`` and ``ctx.mcp.servers()`` show about one server."""

    name: str
    transport: Literal["stdio", "http"]
    state: ServerState
    #: the dsh names of its registered tools, sorted
    tools: tuple[str, ...]
    #: why it failed or died (``None`` while it runs)
    error: str | None
    #: the agent it belongs to, or ``None`` for a server of the configuration
    agent_id: str | None
    #: the negotiated protocol version, once connected
    protocol_version: str | None = None
    #: the server's own name and version, when it gave them
    server_info: str | None = None
