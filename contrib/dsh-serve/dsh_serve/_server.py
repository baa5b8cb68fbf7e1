"""Running the app under uvicorn on a socket we bound ourselves (so port 0 works and the URL is known).

uvicorn runs on a thread and an asyncio loop of its own (``running_server``), the app on the
harness's loop (``_bridge``): the agents never wait for a follower's socket writes, and the harness
may run on asyncio or trio. ``UvicornServer`` adds two things to uvicorn's server: a callback once
it listens, and one when it starts to stop, before it waits for open connections (the app ends its
SSE followers there, or the wait would last as long as the longest-lived page). It handles no
signals: the caller's loop does, and sets ``should_exit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import attrs
import uvicorn

from ._bridge import AsgiBridge, LoopRelay, relayed

if TYPE_CHECKING:
    from ._app import ServeApp

__all__ = ["RunningServer", "UvicornServer", "bind", "is_loopback", "listening", "running_server", "server_config"]


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
        on_stopping: Callable[[], Awaitable[None]] | None = None,
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
            await self._on_stopping()
        await super().shutdown(sockets=sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the harness's loop handles the signals (uvicorn's thread is not the main one)


def _yield_to_the_agents(niceness: int) -> None:
    """Lower this thread's CPU priority (``[plugins.serve] io_niceness``): when the CPU is short, the
    agents' work goes first and the followers' writes wait (their rounds then carry more events).
    Only on Linux, which sets it per thread (elsewhere it would be the whole process's)."""
    if niceness and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)


@attrs.define
class RunningServer:
    """uvicorn serving on its thread: ``stop()`` asks it to stop; ``ended`` is set once it has."""

    server: UvicornServer
    ended: anyio.Event
    error: list[BaseException] = attrs.field(factory=list)
    #: the native id of uvicorn's thread (set once it runs)
    thread_id: int | None = None

    def stop(self) -> None:
        self.server.should_exit = True  # uvicorn's loop looks at it every 0.1 s


@contextlib.asynccontextmanager
async def running_server(
    app: ServeApp, sock: socket.socket, *, on_ready: Callable[[], None] | None = None
) -> AsyncIterator[RunningServer]:
    """uvicorn serving ``app`` on ``sock`` from a thread of its own while the block runs.

    The app runs on this (the harness's) loop; ``on_ready`` is called here once the server listens.
    On exit the server stops (its streams end first) and its thread is awaited, also when the
    block is cancelled. :raises OSError: and what else uvicorn's startup raised.
    """
    relay = LoopRelay()
    relay_scope = anyio.CancelScope(shield=True)  # until the thread ends: its shutdown calls us

    async def run_relay() -> None:
        with relay_scope:
            await relay.run()

    started = anyio.Event()
    ended = anyio.Event()

    def ready() -> None:
        started.set()
        if on_ready is not None:
            on_ready()

    async with anyio.create_task_group() as relaying:
        relaying.start_soon(run_relay)
        async with anyio.create_task_group() as requests:
            bridge = AsgiBridge(app.asgi, relay, requests)
            server = UvicornServer(
                server_config(bridge), on_ready=lambda: relay.post(ready), on_stopping=relayed(relay, app.stopping)
            )
            running = RunningServer(server, ended)

            def serve() -> None:
                try:
                    running.thread_id = threading.get_native_id()
                    _yield_to_the_agents(app.config.io_niceness)
                    asyncio.run(server.serve(sockets=[sock]))
                except BaseException as exc:  # noqa: BLE001 - raised again on the harness's loop
                    running.error.append(exc)
                finally:
                    relay.post(ended.set)

            thread = threading.Thread(target=serve, name="dsh-serve uvicorn", daemon=True)
            thread.start()
            try:
                async with anyio.create_task_group() as first:

                    async def wait_for(event: anyio.Event) -> None:
                        await event.wait()
                        first.cancel_scope.cancel()

                    first.start_soon(wait_for, started)
                    first.start_soon(wait_for, ended)
                if not started.is_set():
                    raise running.error[0] if running.error else RuntimeError("uvicorn stopped before it listened")
                yield running
            finally:
                running.stop()
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(thread.join)
                    await ended.wait()
                requests.cancel_scope.cancel()  # uvicorn is gone: what is left of a request has nobody to answer
        relay_scope.cancel()


@contextlib.asynccontextmanager
async def listening(app: ServeApp, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` (0: a free port) while the block runs; yields the base URL.

    For tests, benchmarks and embedding; on exit the server stops (its streams end first) and is
    awaited. The app runs on the caller's loop (asyncio or trio), uvicorn on a thread of its own.
    """
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}"
    with sock:
        async with running_server(app, sock):
            yield url
