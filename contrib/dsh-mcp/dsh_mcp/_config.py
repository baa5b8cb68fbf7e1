"""Configuration of the ``mcp`` plugin: the ``[plugins.mcp.servers.<name>]`` tables (SPEC §9.4)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

__all__ = ["SERVER_NAME", "McpConfig", "Protocol", "ServerConfig", "check_server_name"]

#: What a server's ``<name>`` may be: it becomes part of every tool name (``mcp__<name>__<tool>``).
SERVER_NAME: Final = re.compile(r"^[A-Za-z0-9_-]+$")

#: How the connection negotiates the protocol: ``auto`` probes for the newest protocol and falls
#: back to the ``initialize`` handshake; ``legacy`` always uses the handshake.
Protocol: TypeAlias = Literal["auto", "legacy"]


def check_server_name(name: object) -> str:
    """``name`` if it is a valid server name.

    :raises TypeError: when it is not a str. :raises ValueError: when it has other characters.
    """
    if not isinstance(name, str):
        msg = f"an MCP server name must be a str, got {type(name).__name__} {name!r}"
        raise TypeError(msg)
    if not SERVER_NAME.match(name):
        msg = (
            f"MCP server name {name!r} must be letters, digits, '_' or '-' "
            "because it becomes part of the tool names mcp__<name>__<tool>"
        )
        raise ValueError(msg)
    return name


def _positive_seconds(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not (0 < value < math.inf):
        msg = f"{attribute.name} must be a positive, finite number of seconds, got {value!r}"
        raise ValueError(msg)


def _non_empty(_instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and not value.strip():
        msg = f"{attribute.name} must not be empty"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class ServerConfig:
    """One server: either ``command`` (a stdio server) or ``url`` (a streamable-HTTP server).

    ``env`` is added to a minimal inherited environment (``HOME``, ``PATH``, ``USER``, ...), as
    the SDK does; ``tools`` is an allow-list of the server's tool names (``None``: all of them).
    """

    #: the executable of a stdio server (looked up on PATH)
    command: str | None = attrs.field(default=None, validator=_non_empty)
    #: its arguments
    args: tuple[str, ...] = ()
    #: extra environment variables for it
    env: Mapping[str, str] = attrs.field(factory=dict)
    #: its working directory (default: the harness's)
    cwd: str | None = None
    #: the endpoint of a streamable-HTTP server (``http://127.0.0.1:8000/mcp``)
    url: str | None = attrs.field(default=None, validator=_non_empty)
    #: HTTP headers sent with every request (``Authorization = "Bearer ..."``)
    headers: Mapping[str, str] = attrs.field(factory=dict)
    #: false: configured but not started
    enabled: bool = True
    #: seconds a call may take
    timeout: float = attrs.field(default=60.0, validator=_positive_seconds)
    #: seconds the server may take to start and list its tools
    startup_timeout: float = attrs.field(default=30.0, validator=_positive_seconds)
    #: only these of the server's tools are registered (``None``: all)
    tools: tuple[str, ...] | None = None
    #: how the protocol version is negotiated
    protocol: Protocol = "auto"

    def __attrs_post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            msg = (
                "give either command, for a stdio server, or url, for a streamable-HTTP server"
                if self.command is None
                else "give either command or url, not both"
            )
            raise ValueError(msg)
        if self.url is not None:
            stdio_only = [key for key in ("args", "env", "cwd") if getattr(self, key) not in ((), {}, None)]
            if stdio_only:
                msg = f"{', '.join(stdio_only)} apply to a stdio server with a command, not to a url"
                raise ValueError(msg)
            if not self.url.startswith(("http://", "https://")):
                msg = f"url must start with http:// or https://, got {self.url!r}"
                raise ValueError(msg)
        elif self.headers:
            msg = "headers apply to a streamable-HTTP server with a url, not to a command"
            raise ValueError(msg)

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"


def _check_servers(_instance: object, _attribute: object, value: Mapping[str, ServerConfig]) -> None:
    for name in value:
        check_server_name(name)


@attrs.frozen(kw_only=True)
class McpConfig:
    """The ``[plugins.mcp]`` table: the servers, by name."""

    servers: Mapping[str, ServerConfig] = attrs.field(factory=dict, validator=_check_servers)
