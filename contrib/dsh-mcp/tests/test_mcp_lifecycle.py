"""A server's life: a failed start, a death and its restart with backoff, per-agent servers, clean exits."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from dsh_mcp import Backoff

from dsh_core import CancelSignal, Context
from dsh_core.testing import call_tool, is_alive, read_fifo, result_text

from .conftest import Start

pytestmark = pytest.mark.anyio


class _Warnings(logging.Handler):
    """Collects the mcp plugin's warnings, and wakes a waiter on each."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self.arrived = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.arrived.set()

    async def next(self) -> str:
        with anyio.fail_after(10):
            await self.arrived.wait()
        self.arrived = anyio.Event()
        return self.records[-1].getMessage()


@pytest.fixture
def warnings() -> Iterator[_Warnings]:
    handler = _Warnings()
    logger = logging.getLogger("dsh.mcp")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _starts(signals: Path) -> list[int]:
    return [int(line) for line in (signals / "starts").read_text().split()]


async def _pid(ctx: Context, name: str = "mcp__demo__pid", agent_id: str | None = None) -> int:
    return int(result_text(await call_tool(ctx, name, agent_id=agent_id)))


@pytest.mark.parametrize(
    ("server", "cause"),
    [
        ({"command": "/nonexistent/mcp-server"}, "FileNotFoundError"),
        (
            {
                "command": sys.executable,
                "args": ["-c", "import sys; sys.stderr.write('no API token set'); sys.exit(2)"],
            },
            "no API token set",
        ),
    ],
    ids=["missing-command", "exits-at-once"],
)
async def test_a_server_that_fails_to_start_is_one_warning(
    start: Start, stdio_demo: dict[str, Any], warnings: _Warnings, server: dict[str, Any], cause: str
) -> None:
    """The harness starts anyway: one warning names the server and the cause, and its tools are absent."""
    async with start({"broken": server, "demo": stdio_demo}) as ctx:
        names = ctx.tools.names()
        status = ctx.mcp.get("broken")
        echoed = await call_tool(ctx, "mcp__demo__echo", text="still here")
    assert [record.getMessage() for record in warnings.records if "'broken'" in record.getMessage()] == [
        warnings.records[0].getMessage()
    ]
    assert len(warnings.records) == 1
    assert "MCP server 'broken' failed to start" in warnings.records[0].getMessage()
    assert cause in warnings.records[0].getMessage()
    assert not [name for name in names if name.startswith("mcp__broken__")]
    assert status is not None
    assert status.state == "failed"
    assert cause in (status.error or "")
    assert result_text(echoed) == "still here"


async def test_a_dead_server_is_reported_once_and_restarted_with_backoff(
    start: Start, stdio_demo: dict[str, Any], signals: Path, warnings: _Warnings
) -> None:
    """A death is one warning; the next call restarts; dying again before any success waits out the backoff."""
    async with start({"demo": stdio_demo}, backoff=Backoff(initial=30, maximum=60)) as ctx:
        first = await _pid(ctx)
        died = await call_tool(ctx, "mcp__demo__die")
        assert died.error_code == "TOOL_ERROR"
        assert "MCP server 'demo' stopped during the call to tool 'mcp__demo__die'" in result_text(died)
        assert len(warnings.records) == 1
        assert "MCP server 'demo' stopped" in warnings.records[0].getMessage()
        second = await _pid(ctx)  # restarted by this call
        assert second != first
        assert not is_alive(first)
        await call_tool(ctx, "mcp__demo__die")  # a death after a success: the next call restarts at once
        died_again = await call_tool(ctx, "mcp__demo__die")  # restarted, and dies before any success...
        assert died_again.error_code == "TOOL_ERROR"
        waiting = await call_tool(ctx, "mcp__demo__echo", text="hi")  # ...so no restart for 30 s
        assert waiting.error_code == "TOOL_ERROR"
        assert "It will be restarted at the first call after 30 s" in result_text(waiting)
        assert ctx.mcp.get("demo").state == "dead"
    assert len(_starts(signals)) == 3  # first, second, and the one the last die call made
    assert len(warnings.records) == 3  # one per death, none for the refused call


async def test_a_server_dying_while_idle_is_noticed(
    start: Start, stdio_demo: dict[str, Any], warnings: _Warnings
) -> None:
    """A stdio server killed between calls is reported at once, and the next call restarts it."""
    import os
    import signal as signals_module

    async with start({"demo": stdio_demo}) as ctx:
        first = await _pid(ctx)
        os.kill(first, signals_module.SIGKILL)
        message = await warnings.next()
        assert "MCP server 'demo' stopped: the server process exited" in message
        assert ctx.mcp.get("demo").state == "dead"
        second = await _pid(ctx)
    assert second != first
    assert not is_alive(second)


async def test_no_server_process_remains_after_the_harness_exits(
    start: Start, stdio_demo: dict[str, Any], signals: Path
) -> None:
    """Every server process is gone once the harness has stopped, also after a cancel in mid-call."""
    signal = CancelSignal()
    async with start({"a": stdio_demo, "b": stdio_demo}) as ctx:
        pids = [await _pid(ctx, "mcp__a__pid"), await _pid(ctx, "mcp__b__pid")]
        outcome: list[Any] = []

        async def run() -> None:
            outcome.append(await call_tool(ctx, "mcp__a__slow", signal=signal))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            assert await read_fifo(signals / "started") == "started"
            signal.cancel()
        assert await read_fifo(signals / "cancelled") == "cancelled"
        assert all(is_alive(pid) for pid in pids)
    assert outcome[0].error_code == "ABORTED"
    assert sorted(_starts(signals)) == sorted(pids)
    assert [pid for pid in pids if is_alive(pid)] == []


async def test_a_server_connected_through_agent_ctx_is_that_agents_only(
    start: Start, stdio_demo: dict[str, Any]
) -> None:
    """agent.ctx.mcp.connect() gives that agent the tools; others never see them; disposal stops it."""

    async def setup(agent_ctx: Context) -> None:
        status = await agent_ctx.mcp.connect("notes", **stdio_demo)
        assert status.state == "running"

    async with start({}) as ctx:
        owner = await ctx.agents.create("owner", setup=setup)
        other = await ctx.agents.create("other")
        pid = await _pid(ctx, "mcp__notes__pid", agent_id="owner")
        assert "mcp__notes__echo" in ctx.tools.names("owner")
        assert "mcp__notes__echo" not in ctx.tools.names("other")
        assert "mcp__notes__echo" not in ctx.tools.names()
        unknown = await call_tool(ctx, "mcp__notes__echo", agent_id="other", text="x")
        assert unknown.error_code == "UNKNOWN_TOOL"
        assert [s.name for s in owner.agent.ctx.mcp.servers()] == ["notes"]
        assert ctx.mcp.servers() == ()
        await owner.dispose()
        assert not is_alive(pid)
        assert "mcp__notes__echo" not in ctx.tools.names("owner")
        await other.dispose()
