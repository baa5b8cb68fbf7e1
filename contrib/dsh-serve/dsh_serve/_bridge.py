"""The app on the harness's loop, the sockets on a thread of their own.

uvicorn (asyncio) runs in its own thread with its own loop and does the socket I/O: parsing
requests, framing responses, the ``send`` system calls (which on loopback also run the reader's
side of TCP, and release the GIL while they do). The ASGI app itself runs as a task on the
harness's loop (asyncio or trio), where the agents, the sessions and their logs live, so nothing
the app touches is shared between threads. ``AsgiBridge`` is the app uvicorn calls: it starts the
real app on the harness's loop, and each ``receive``/``send`` of it is carried to the server's loop
and its result back. Cancelling either side cancels the other.

``LoopRelay`` carries calls into the harness's loop from the server's thread without ever blocking
that thread: posted calls go into a queue, and one wake-up (``call_soon_threadsafe`` on asyncio,
``run_sync_soon`` on trio) is pending at a time, whatever number of calls it drains.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["AsgiBridge", "LoopRelay", "relayed"]

logger = logging.getLogger("dsh_serve")


def _soon_threadsafe() -> Callable[[Callable[[], None]], None]:
    """A thread-safe, non-blocking way to run a callback on the current loop (asyncio or trio)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: trio (anyio's other backend)
        import trio

        try:
            return trio.lowlevel.current_trio_token().run_sync_soon
        except RuntimeError:
            msg = "dsh-serve runs its app on an asyncio or trio loop, and none is running here"
            raise RuntimeError(msg) from None

    def soon(callback: Callable[[], None]) -> None:
        loop.call_soon_threadsafe(callback)

    return soon


class LoopRelay:
    """Runs posted calls in a task on the loop that created it; ``post`` may come from any thread."""

    def __init__(self) -> None:
        self._soon = _soon_threadsafe()
        self._calls: collections.deque[tuple[Callable[..., object], tuple[Any, ...]]] = collections.deque()
        self._kick = anyio.Event()
        self._scheduled = False

    def post(self, fn: Callable[..., object], *args: Any) -> None:
        """Call ``fn(*args)`` soon in the relay's task (in order of posting); never blocks."""
        self._calls.append((fn, args))
        if not self._scheduled:
            self._scheduled = True
            self._soon(self._wake)

    def _wake(self) -> None:
        self._kick.set()

    async def run(self) -> None:
        """Run the posted calls until cancelled (a task of the loop's own)."""
        calls = self._calls
        while True:
            await self._kick.wait()
            self._kick = anyio.Event()
            self._scheduled = False  # before draining: a call posted from now on wakes us again
            while calls:
                fn, args = calls.popleft()
                try:
                    fn(*args)
                except Exception:
                    logger.exception("a call relayed to the harness's loop failed")


async def _called(fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> Any:
    return await fn(*args)


class _Exchange:
    """One request: the real app's ``receive``/``send`` carried over to the server's loop."""

    def __init__(self, relay: LoopRelay, server_loop: asyncio.AbstractEventLoop, receive: Receive, send: Send) -> None:
        self._relay = relay
        self._loop = server_loop
        self._receive = receive
        self._send = send

    async def _over(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await fn(*args)`` on the server's loop, from the harness's loop.

        :raises OSError: the server's loop has stopped (the connection is gone with it).
        """
        coro = _called(fn, args)
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:  # the loop is closed: uvicorn has stopped
            coro.close()
            msg = "the server has stopped"
            raise OSError(msg) from None
        done = anyio.Event()
        future.add_done_callback(lambda _: self._relay.post(done.set))
        try:
            await done.wait()
        except BaseException:
            future.cancel()  # cancelled here (a send timeout, the request's end): cancelled there
            raise
        return future.result()

    async def receive(self) -> Message:
        message: Message = await self._over(self._receive)
        return message

    async def send(self, message: Message) -> None:
        await self._over(self._send, message)


class AsgiBridge:
    """The ASGI app uvicorn calls on its own thread: it runs ``app`` on the harness's loop."""

    def __init__(self, app: ASGIApp, relay: LoopRelay, task_group: TaskGroup) -> None:
        self._app = app
        self._relay = relay
        self._task_group = task_group

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server_loop = asyncio.get_running_loop()
        finished: asyncio.Future[None] = server_loop.create_future()
        exchange = _Exchange(self._relay, server_loop, receive, send)
        scopes: list[anyio.CancelScope] = []

        def settle(error: BaseException | None) -> None:  # on the server's loop
            if finished.done():
                return
            if error is None:
                finished.set_result(None)
            else:
                finished.set_exception(error)

        async def run() -> None:  # on the harness's loop
            error: BaseException | None = None
            try:
                with anyio.CancelScope() as cancel_scope:
                    scopes.append(cancel_scope)
                    await self._app(scope, exchange.receive, exchange.send)
            except Exception as exc:  # noqa: BLE001 - handed to uvicorn, which logs it and answers 500
                error = exc
            finally:  # cancelled too (the server stops): uvicorn ends the connection
                with contextlib.suppress(RuntimeError):  # the server's loop is gone already
                    server_loop.call_soon_threadsafe(settle, error)

        self._relay.post(self._task_group.start_soon, run)
        try:
            await asyncio.shield(finished)
        except asyncio.CancelledError:
            # uvicorn gave up on the request (its shutdown timed out): end the app's side too
            def cancel() -> None:
                for cancel_scope in scopes:
                    cancel_scope.cancel()

            self._relay.post(cancel)
            raise


def relayed(relay: LoopRelay, fn: Callable[[], object]) -> Callable[[], Awaitable[None]]:
    """An awaitable for the server's loop that runs ``fn`` on the harness's loop and waits for it."""

    async def call() -> None:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - raised again on the server's loop
                future.set_exception(exc)
            else:
                future.set_result(None)

        relay.post(run)
        await asyncio.wrap_future(future)

    return call
