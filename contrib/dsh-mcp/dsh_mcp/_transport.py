"""Opening a server's transport with the SDK: a stdio subprocess or a streamable-HTTP session.

The stdio server's stderr goes to a temporary file (never the user's terminal), so that the
cause of a failed start can quote it. Its read stream is watched: the end of the server's stdout
is how a server that dies while idle is noticed at once.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, TextIO, TypeAlias

import anyio
import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ._config import ServerConfig

__all__ = ["open_transport"]

#: what the SDK's transports yield: the read stream and the write stream
TransportStreams: TypeAlias = tuple[Any, Any]
#: the SDK's own HTTP timeouts: a response stream may stay open long, the rest may not
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


class _EndWatch:
    """A read stream that calls ``on_end`` when the peer ends it (not when we close it)."""

    __slots__ = ("_inner", "_on_end")

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except anyio.EndOfStream:
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _EndWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except StopAsyncIteration:
            self._on_end()
            raise

    async def __aenter__(self) -> _EndWatch:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def open_transport(
    config: ServerConfig, *, stderr: TextIO | None, on_end: Callable[[], None]
) -> AsyncIterator[TransportStreams]:
    """The SDK transport for ``config``; ``on_end`` is called when a stdio server's output ends.

    :raises OSError: when the command cannot be started.
    """
    if config.command is not None:
        params = StdioServerParameters(
            command=config.command, args=list(config.args), env=dict(config.env) or None, cwd=config.cwd
        )
        async with stdio_client(params, errlog=sys.stderr if stderr is None else stderr) as (read, write):
            yield _EndWatch(read, on_end), write
        return
    assert config.url is not None  # ServerConfig guarantees one of the two
    async with (
        httpx2.AsyncClient(headers=dict(config.headers), timeout=_HTTP_TIMEOUT) as http,
        streamable_http_client(config.url, http_client=http) as streams,
    ):
        yield streams
