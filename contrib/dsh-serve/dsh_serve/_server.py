"""Running the app under uvicorn on a socket we bound ourselves (so port 0 works and the URL is known).

``UvicornServer`` adds two things to uvicorn's server: a callback once it listens, and one when it
starts to stop, before it waits for open connections (the app ends its SSE followers there, or
the wait would last as long as the longest-lived page). Its signal handling stops the server on
SIGINT/SIGTERM without re-raising the signal afterwards, so the harness stops cleanly after it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import signal
import socket
import threading
from collections.abc import AsyncIterator, Callable, Generator
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn

if TYPE_CHECKING:
    from ._app import ServeApp

__all__ = ["UvicornServer", "bind", "is_loopback", "listening", "server_config"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: any free port).

    :raises OSError: the address is taken or cannot be bound.
    """
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def server_config(app: Any) -> uvicorn.Config:
    """uvicorn's settings for the app: no lifespan (the harness is already running), quiet logs."""
    return uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
        proxy_headers=False,
    )


class UvicornServer(uvicorn.Server):
    """uvicorn's server, telling when it listens and when it starts to stop."""

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        on_ready: Callable[[], None] | None = None,
        on_stopping: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self._on_ready = on_ready
        self._on_stopping = on_stopping

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self._on_ready is not None:
            self._on_ready()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._on_stopping is not None:
            self._on_stopping()
        await super().shutdown(sockets=sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


@contextlib.asynccontextmanager
async def listening(app: ServeApp, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` (0: a free port) while the block runs; yields the base URL.

    For tests, benchmarks and embedding; on exit the server stops (its streams end first) and is
    awaited. The server's loop must be asyncio (uvicorn's).
    """
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}"
    ready = anyio.Event()
    server = UvicornServer(server_config(app.asgi), on_ready=ready.set, on_stopping=app.stopping)
    with sock:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            await ready.wait()
            try:
                yield url
            finally:
                server.should_exit = True
