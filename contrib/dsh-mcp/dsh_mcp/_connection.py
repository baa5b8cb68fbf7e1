"""One MCP server: its connection's life, its tools in the registry, and the calls made to it.

A connection runs as a task owned by a context (the plugin's, or an agent's): cancelling that
task closes the SDK client, which stops the server process (stdin closed, then SIGTERM/SIGKILL
of its process group) or ends the HTTP session (``DELETE``). States::

    starting -> running -> dead -> starting -> ...       (restarted by the next call)
    starting -> failed                                    (first start: tools absent)
    any      -> stopped                                   (its context was disposed)

A server that dies is reported once (one warning); the next call restarts it. A restart that
fails, or a server that dies again before any call succeeded, waits out a backoff that doubles
up to a maximum; calls in between fail at once with a ``TOOL_ERROR`` saying when it will retry.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import IO, Any, TextIO, cast

import anyio
import anyio.abc
import mcp_types
from mcp import Client, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from dsh_core import Context, ScopeDisposedError, Tool, ToolResult

from ._config import ServerConfig
from ._results import error_result, to_tool_result
from ._status import Backoff, ServerState, ServerStatus
from ._tools import dsh_tool
from ._transport import open_transport

__all__ = ["ServerConnection"]

logger = logging.getLogger("dsh.mcp")

#: how much of a stdio server's stderr a failure quotes
_STDERR_TAIL = 600
#: seconds a graceful close may take before the owner's cancellation cuts it short
_CLOSE_WITHIN = 10.0
#: pages of tools/list read at most (a server that paginates forever cannot hang a start)
_MAX_PAGES = 100


def _client_info() -> mcp_types.Implementation:
    try:
        own = version("dsh-harness-mcp")
    except PackageNotFoundError:  # running from a source tree
        own = "0"
    return mcp_types.Implementation(name="dsh", version=own)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    leaf = _leaf(exc)
    if isinstance(leaf, MCPError):
        return f"{leaf.error.message} (MCP error {leaf.error.code})"
    text = str(leaf)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


def _connection_lost(exc: BaseException) -> bool:
    """Whether a failed request means the connection is gone (rather than a refusal of this call)."""
    leaf = _leaf(exc)
    if isinstance(leaf, MCPError):
        return leaf.error.code == mcp_types.CONNECTION_CLOSED
    return isinstance(
        leaf, OSError | anyio.BrokenResourceError | anyio.ClosedResourceError | anyio.EndOfStream
    )


def _session_expired(exc: BaseException) -> bool:
    """An HTTP server answered 404 for our session id: it restarted or dropped the session.

    The request never ran, so it is safe to send again on a new session (the spec's recovery).
    """
    leaf = _leaf(exc)
    return (
        isinstance(leaf, MCPError)
        and leaf.error.code == mcp_types.INVALID_REQUEST
        and "session" in leaf.error.message.lower()
    )


class ServerConnection:
    """A server, its connection and its tools, registered through ``ctx`` (undone with it)."""

    def __init__(self, name: str, config: ServerConfig, ctx: Context, backoff: Backoff) -> None:
        self.name = name
        self.config = config
        self._ctx = ctx
        self._backoff = backoff
        self._state: ServerState = "starting" if config.enabled else "disabled"
        self._error: str | None = None
        self._client: Client | None = None
        self._protocol_version: str | None = None
        self._server_info: str | None = None
        #: set when the current start attempt has settled (running, or failed)
        self._settled = anyio.Event()
        #: set when the running connection is gone
        self._lost = anyio.Event()
        #: set to ask the run task for a new session
        self._restart = anyio.Event()
        #: set when the server said its tools changed
        self._relist = anyio.Event()
        #: dsh name -> (what the model sees, the registration's disposer)
        self._registered: dict[str, tuple[tuple[str, Any, bool], Callable[[], object]]] = {}
        self._refused: set[str] = set()
        #: (re)starts since the last successful call; drives the backoff
        self._failures = 0
        #: no restart before this time (anyio clock)
        self._retry_at = 0.0
        self._stderr: TextIO | None = None
        self._closing = False
        #: set when the run task has finished
        self._done = anyio.Event()

    # ------------------------------------------------------------------ status

    @property
    def state(self) -> ServerState:
        return self._state

    def status(self) -> ServerStatus:
        return ServerStatus(
            name=self.name,
            transport=self.config.transport,
            state=self._state,
            tools=tuple(sorted(self._registered)),
            error=self._error,
            agent_id=self._ctx.agent_scope,
            protocol_version=self._protocol_version,
            server_info=self._server_info,
        )

    async def wait_started(self) -> None:
        """Return once the first start attempt has settled (running or failed)."""
        if self._state == "disabled":
            return
        await self._settled.wait()

    # ------------------------------------------------------------------ the owner task

    async def run(self) -> None:
        """Serve sessions until closed: one now, and another each time a call asks for a restart."""
        try:
            while not self._closing:
                await self._session()
                await self._restart.wait()
                self._restart = anyio.Event()
        finally:
            self._state = "stopped"
            self._client = None
            self._settled.set()  # nobody waits for a start that will never come
            self._done.set()

    async def close(self) -> None:
        """End the session without cancelling it, so that the SDK closes it properly.

        A stdio server gets its stdin closed and a moment to exit; an HTTP session is ended with
        ``DELETE``. Bounded: the owner's task cancellation that follows cuts anything left.
        """
        self._closing = True
        self._lost.set()
        self._restart.set()
        with anyio.move_on_after(_CLOSE_WITHIN, shield=True):
            await self._done.wait()

    async def _session(self) -> None:
        self._state = "starting"
        self._lost = anyio.Event()
        started = False
        cause: str | None = None
        stderr = (
            cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))
            if self.config.command
            else None
        )
        self._stderr = stderr
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self.config.startup_timeout) as connecting:
                async with (
                    Client(
                        open_transport(self.config, stderr=stderr, on_end=self._on_end),
                        mode=self.config.protocol,
                        message_handler=self._on_message,
                        client_info=_client_info(),
                        cache=None,
                    ) as client,
                    anyio.create_task_group() as tasks,
                ):
                    if self._announces_tool_changes(client):
                        await tasks.start(self._listen, client)  # subscribed before listing: no change missed
                    listing = await self._list_tools(client)
                    connecting.deadline = math.inf
                    self._client = client
                    self._protocol_version = client.protocol_version
                    info = client.server_info
                    self._server_info = None if info is None else f"{info.name} {info.version}".strip()
                    self._sync_tools(listing)
                    self._state, self._error, started = "running", None, True
                    self._settled.set()
                    tasks.start_soon(self._follow_tool_changes, client)
                    if not self._closing:
                        await self._lost.wait()
                    tasks.cancel_scope.cancel()
            if connecting.cancelled_caught:
                cause = f"it was not ready within startup_timeout = {self.config.startup_timeout:g} s"
        except Exception as exc:  # noqa: BLE001 - any failure of a server is reported, never raised into the harness
            cause = _describe(exc)
        finally:
            self._client = None
            self._stderr = None
            tail = self._read_tail(stderr)
            if stderr is not None:
                stderr.close()
        if self._closing:
            return
        if started:
            if self._state == "running":  # it ended without a call noticing: report it here
                self._mark_lost(cause or "the connection ended", tail)
            return
        self._failed_start(cause or "the connection ended before it was ready", tail)

    def _announces_tool_changes(self, client: Client) -> bool:
        """Whether a 2026-era server offers tool-change events (sent only to a subscription)."""
        capabilities = client.server_capabilities.tools
        return (
            client.protocol_version in MODERN_PROTOCOL_VERSIONS
            and capabilities is not None
            and capabilities.list_changed is True
        )

    async def _listen(
        self, client: Client, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Subscribe to a 2026-era server's tool changes (they reach ``_on_message`` too).

        Reports started once the server acknowledged the subscription, or once it failed.
        """
        subscribed = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                task_status.started()
                subscribed = True
                async for _event in subscription:
                    self._relist.set()
        except Exception as exc:  # noqa: BLE001 - without the stream, changes are missed, nothing else breaks
            logger.debug("MCP server %r: no tool-change subscription (%s)", self.name, _describe(exc))
        if not subscribed:
            task_status.started()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._relist.set()

    def _on_end(self) -> None:
        if self._state == "running":
            self._mark_lost("the server process exited", self._read_tail(self._stderr))

    async def _follow_tool_changes(self, client: Client) -> None:
        while True:
            await self._relist.wait()
            self._relist = anyio.Event()
            try:
                listing = await self._list_tools(client)
            except Exception as exc:  # noqa: BLE001 - keep the tools we have; the next change retries
                logger.warning("MCP server %r: could not re-read its tools: %s", self.name, _describe(exc))
                continue
            self._sync_tools(listing)

    async def _list_tools(self, client: Client) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        allowed = self.config.tools
        return [tool for tool in tools if allowed is None or tool.name in allowed]

    # ------------------------------------------------------------------ failures

    def _read_tail(self, stderr: IO[str] | None) -> str:
        if stderr is None or stderr.closed:
            return ""
        try:
            stderr.flush()
            size = os.fstat(stderr.fileno()).st_size
            stderr.seek(max(size - _STDERR_TAIL, 0))
            return stderr.read().strip()
        except (OSError, ValueError):
            return ""

    def _with_tail(self, cause: str, tail: str) -> str:
        return f"{cause}; its last output: {tail}" if tail else cause

    def _failed_start(self, cause: str, tail: str) -> None:
        self._error = self._with_tail(cause, tail)
        first = self._failures == 0 and not self._registered
        self._state = "failed"
        self._retry_at = anyio.current_time() + self._backoff.delay(max(self._failures, 1))
        if first:
            logger.warning(
                "MCP server %r failed to start: %s; its tools are not available", self.name, self._error
            )
        else:
            logger.info("MCP server %r failed to restart: %s", self.name, self._error)
        self._settled.set()

    def _mark_lost(self, cause: str, tail: str = "") -> None:
        """The running connection is gone: report it once and let the next call restart it."""
        if self._state != "running" or self._closing:  # our own close ends the connection too
            return
        self._state = "dead"
        self._error = self._with_tail(cause, tail)
        delay = 0.0 if self._failures == 0 else self._backoff.delay(self._failures)
        self._retry_at = anyio.current_time() + delay
        logger.warning(
            "MCP server %r stopped: %s; it will be restarted at the next call of one of its tools",
            self.name,
            self._error,
        )
        self._lost.set()

    # ------------------------------------------------------------------ tools

    def _sync_tools(self, listing: list[mcp_types.Tool]) -> None:
        """Make the registered tools match the server's listing (added, changed, removed)."""
        wanted: dict[str, Tool] = {}
        for remote in listing:
            try:
                made = dsh_tool(self.name, remote, timeout=self.config.timeout, call=self.call)
            except (TypeError, ValueError) as exc:
                self._refuse(remote.name, f"its input schema is not usable ({exc})")
                continue
            if made.name in wanted:
                self._refuse(remote.name, f"its name becomes {made.name!r}, like another tool of the server")
                continue
            wanted[made.name] = made
        for name in list(self._registered):
            shape, dispose = self._registered[name]
            new = wanted.get(name)
            if new is None or _shape(new) != shape:
                del self._registered[name]
                dispose()
        for name, new in wanted.items():
            if name in self._registered:
                continue
            try:
                dispose = self._ctx.tools.register(new)
            except ScopeDisposedError:
                return  # its owner is closing: nothing more to register
            except (TypeError, ValueError) as exc:  # a taken name, a schema the runtime refuses
                self._refuse(name, str(exc))
                continue
            self._registered[name] = (_shape(new), dispose)

    def _refuse(self, name: str, why: str) -> None:
        if name not in self._refused:
            self._refused.add(name)
            logger.warning("MCP server %r: tool %r is not registered: %s", self.name, name, why)

    # ------------------------------------------------------------------ calls

    async def call(
        self, tool_name: str, remote: str, arguments: dict[str, Any], *, again: bool = False
    ) -> ToolResult:
        """Call ``remote`` on the server (restarting it first if it died) and convert the result."""
        client = await self._client_for_call(tool_name)
        if isinstance(client, ToolResult):
            return client
        try:
            result = await client.call_tool(remote, arguments)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a result the model can read
            if _session_expired(exc) and not again and self.config.transport == "http":
                self._mark_lost("it no longer knows this client's session (it restarted?)")
                return await self.call(tool_name, remote, arguments, again=True)
            if _connection_lost(exc):
                self._mark_lost(
                    f"the connection broke during a call ({_describe(exc)})", self._read_tail(self._stderr)
                )
                return error_result(
                    f"Error: MCP server {self.name!r} stopped during the call to tool {tool_name!r}: "
                    f"{self._error}. The call may or may not have taken effect; the server is restarted at the "
                    "next call."
                )
            if isinstance(_leaf(exc), ValidationError):
                return error_result(
                    f"Error: MCP server {self.name!r} answered the call to tool {tool_name!r} with a malformed "
                    f"result: {_describe(exc)}"
                )
            return error_result(
                f"Error: MCP server {self.name!r} refused the call to tool {tool_name!r}: {_describe(exc)}"
            )
        self._failures = 0
        return to_tool_result(result, tool_name)

    def _running_client(self) -> Client | None:
        return self._client if self._state == "running" else None

    async def _client_for_call(self, tool_name: str) -> Client | ToolResult:
        if self._state == "starting":
            await self._settled.wait()
        if (running := self._running_client()) is not None:
            return running
        if self._state in ("stopped", "disabled"):
            return error_result(
                f"Error: MCP server {self.name!r} is {self._state}; tool {tool_name!r} cannot run."
            )
        wait = self._retry_at - anyio.current_time()
        if wait > 0:
            return error_result(
                f"Error: MCP server {self.name!r} is not running ({self._error}). It will be restarted at the "
                f"first call after {math.ceil(wait):d} s; try again later or do without tool {tool_name!r}."
            )
        self._failures += 1
        self._state = "starting"
        self._settled = anyio.Event()
        self._restart.set()
        await self._settled.wait()
        if (running := self._running_client()) is not None:
            return running
        return error_result(
            f"Error: MCP server {self.name!r} could not be restarted ({self._error}); tool {tool_name!r} cannot "
            "run now."
        )


def _shape(tool: Tool) -> tuple[str, Any, bool]:
    """What the model sees of a tool (and its read-only mark): a change means re-registering it."""
    return (tool.description, tool.parameters, tool.read_only)
