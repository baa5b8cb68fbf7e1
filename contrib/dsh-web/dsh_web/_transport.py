"""An httpx transport that connects only to vetted addresses: the check happens where the socket is opened.

``GuardedBackend`` is an ``httpcore`` network backend: asked to connect to a host, it resolves the
name itself, refuses when any address it resolves to is not public (``blocked_reason``) unless the
host is allowed by name, and then connects to the address it checked, so a DNS answer that changes
between the check and the connection (rebinding) cannot slip through. TLS is still verified for
the name in the URL. ``GuardedTransport`` is the httpx transport over a connection pool using it;
proxies from the environment are never used (a proxy would make the connection for us).
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
import httpcore
import httpx

from dsh_core import ToolError

from ._addresses import BlockedAddressError, HostAllowList, Resolver, blocked_reason, normal_host

__all__ = ["GuardedBackend", "GuardedTransport", "system_resolver"]

async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the C library's resolver gives (which reads ``2130706433`` as ``127.0.0.1``)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[str] = []
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]  # an IPv6 scope id is not part of the address
        if address not in found:
            found.append(address)
    return found


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, checks every address, and connects to a checked one."""

    def __init__(self, allowed: HostAllowList, resolver: Resolver) -> None:
        self._allowed = allowed
        self._resolver = resolver
        self._inner = httpcore.AnyIOBackend()

    async def vet(self, host: str, port: int) -> list[str]:
        """The addresses of ``host`` that may be connected to.

        :raises BlockedAddressError: when the host is not allowed by name and any of its addresses
            is not public, or it resolves to nothing.
        """
        name = normal_host(host)
        try:
            addresses = list(await self._resolver(name, port))
        except OSError as exc:
            msg = f"the host {name!r} could not be resolved ({exc.strerror or exc})"
            raise ToolError(msg) from exc
        if not addresses:
            msg = f"the host {name!r} resolves to no address"
            raise ToolError(msg)
        if self._allowed.allows(name):
            return addresses
        for address in addresses:
            reason = blocked_reason(ipaddress.ip_address(address))
            if reason is not None:
                where = name if name == address else f"{name!r} (it resolves to {address})"
                msg = (
                    f"refused to fetch from {where}: {reason}. Only public addresses may be fetched, "
                    "unless [plugins.web] allowed_hosts names the host"
                )
                raise BlockedAddressError(msg)
        return addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self.vet(host, port)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # vet returns at least one address
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        msg = "web_fetch never connects to a Unix socket"
        raise BlockedAddressError(msg)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _Body(httpx.AsyncByteStream):
    """A response body read from the pool, closed with it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._stream:
            yield part

    async def aclose(self) -> None:
        if hasattr(self._stream, "aclose"):
            await self._stream.aclose()


class GuardedTransport(httpx.AsyncBaseTransport):
    """httpx's transport over a connection pool whose every connection ``GuardedBackend`` vetted."""

    def __init__(self, backend: GuardedBackend, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context or ssl.create_default_context(),
            network_backend=backend,
            max_connections=20,
            keepalive_expiry=5.0,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        response = await self._pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
