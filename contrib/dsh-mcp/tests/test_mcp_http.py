"""A streamable-HTTP server built with the SDK, on a loopback port the test bound: calls, cancel, headers, close."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from dsh_mcp import Backoff

from dsh_core import CancelSignal
from dsh_core.testing import call_tool, read_fifo, result_text

from .conftest import HttpDemo, Start

pytestmark = pytest.mark.anyio

# On trio, the SDK's handshake-era client leaves its standalone GET stream's async generators
# (httpx2 / httpcore2) to the garbage collector when it closes; trio warns about each. Only those
# warnings are let through, in the tests using that protocol; docs/plugins/mcp.md names the limit.
SDK_TRIO_GC = pytest.mark.filterwarnings(
    r"ignore:Exception ignored in. <async_generator object (PoolByteStream|HTTP11ConnectionByteStream|Response|EventSource)\.:"
    "pytest.PytestUnraisableExceptionWarning"
)


async def test_http_tools_results_and_headers(start: Start, http_demo: dict[str, Any], signals: Path) -> None:
    """Tools of an HTTP server are registered and called; every request carries the configured headers."""
    server = {**http_demo, "headers": {"Authorization": "Bearer sekrit"}}
    async with start({"web": server}) as ctx:
        echo = ctx.tools.get("mcp__web__echo")
        echoed = await call_tool(ctx, "mcp__web__echo", text="over http")
        failed = await call_tool(ctx, "mcp__web__fail")
        status = ctx.mcp.get("web")
    assert echo is not None
    assert echo.read_only is True
    assert result_text(echoed) == "over http"
    assert failed.error_code == "TOOL_ERROR"
    assert "the disk is full" in result_text(failed)
    assert status is not None
    assert (status.transport, status.state, status.server_info) == ("http", "running", "demo 1.0")
    requests = (signals / "requests").read_text().splitlines()
    assert requests
    assert all(line.endswith(" Bearer sekrit") for line in requests)


async def test_http_cancel_reaches_the_server(start: Start, http_demo: dict[str, Any], signals: Path) -> None:
    """A cancelled call over HTTP ends ABORTED and the server's handler is cancelled."""
    signal = CancelSignal()
    outcome: list[Any] = []
    async with start({"web": http_demo}) as ctx:

        async def run() -> None:
            outcome.append(await call_tool(ctx, "mcp__web__slow", signal=signal))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            assert await read_fifo(signals / "started") == "started"
            signal.cancel()
        assert await read_fifo(signals / "cancelled") == "cancelled"
    assert outcome[0].error_code == "ABORTED"


@SDK_TRIO_GC
async def test_stopping_the_harness_closes_the_http_session(
    start: Start, http_demo: dict[str, Any], signals: Path
) -> None:
    """When the harness stops, the client ends its session with the server (an HTTP DELETE).

    Sessions exist in the handshake-era protocol; a 2026-era connection has none to end.
    """
    async with start({"web": {**http_demo, "protocol": "legacy"}}) as ctx:
        await call_tool(ctx, "mcp__web__echo", text="x")
        before = (signals / "requests").read_text().splitlines()
    after = (signals / "requests").read_text().splitlines()
    assert not any(line.startswith("DELETE") for line in before)
    assert after[len(before) :] == ["DELETE -"]


async def test_an_unreachable_http_server_is_one_warning(
    start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing listening at the url: the harness starts, with one warning naming the server."""
    import socket

    with socket.socket() as sock:  # a port that was free a moment ago and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with caplog.at_level("WARNING", logger="dsh.mcp"):
        async with start({"web": {"url": f"http://127.0.0.1:{port}/mcp"}}) as ctx:
            status = ctx.mcp.get("web")
    warnings = [record.getMessage() for record in caplog.records if record.name == "dsh.mcp"]
    assert len(warnings) == 1
    assert "MCP server 'web' failed to start" in warnings[0]
    assert status is not None
    assert status.state == "failed"


@SDK_TRIO_GC
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_http_server_that_goes_away_is_used_again_when_it_is_back(
    start: Start, http_server: HttpDemo, protocol: str
) -> None:
    """While the server is gone a call ends TIMEOUT; once it is back (a new session if need be) calls work."""
    server = {"url": http_server.url, "protocol": protocol, "timeout": 3}
    async with start({"web": server}, backoff=Backoff(initial=0, maximum=0)) as ctx:
        assert result_text(await call_tool(ctx, "mcp__web__echo", text="one")) == "one"
        http_server.kill()
        gone = await call_tool(ctx, "mcp__web__echo", text="two")
        http_server.start()
        back = await call_tool(ctx, "mcp__web__echo", text="three")
        status = ctx.mcp.get("web")
    assert gone.error_code == "TIMEOUT"
    assert result_text(back) == "three"
    assert status is not None
    assert status.state == "running"
