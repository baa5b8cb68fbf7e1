"""A real MCP server published on PyPI by others (``mcp-server-time``), started by the test, offline."""

from __future__ import annotations

import json
import sys

import pytest

from dsh_core.testing import call_tool, is_alive, result_text

from .conftest import Start

pytestmark = pytest.mark.anyio

TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


async def test_mcp_server_time(start: Start) -> None:
    """Its tools are registered from its own listing and answer; it is gone after the harness stops."""
    async with start({"time": TIME}, permissions={"mode": "read-only"}) as ctx:
        tool = ctx.tools.get("mcp__time__get_current_time")
        now = await call_tool(ctx, "mcp__time__get_current_time", agent_id="a1", timezone="Asia/Tokyo")
        converted = await call_tool(
            ctx,
            "mcp__time__convert_time",
            agent_id="a1",
            source_timezone="Asia/Tokyo",
            time="12:00",
            target_timezone="Asia/Kolkata",
        )
        bad = await call_tool(ctx, "mcp__time__get_current_time", agent_id="a1", timezone="Not/AZone")
        status = ctx.mcp.get("time")
        pids = _children_running("mcp_server_time")
    assert tool is not None
    assert tool.read_only is True  # the server marks it readOnlyHint, so read-only mode runs it
    assert "timezone" in tool.parameters["properties"]
    assert json.loads(result_text(now))["timezone"] == "Asia/Tokyo"
    target = json.loads(result_text(converted))["target"]
    assert target["datetime"].endswith("T08:30:00+05:30")  # neither zone has daylight saving time
    assert bad.error_code == "TOOL_ERROR"
    assert "Not/AZone" in result_text(bad)
    assert status is not None
    assert (status.server_info or "").startswith("mcp-time")
    assert len(pids) == 1
    assert not is_alive(pids[0])


def _children_running(module: str) -> list[int]:
    """Our child processes running ``python -m module`` (found through /proc)."""
    import os
    from pathlib import Path

    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_text().split("\0")
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        if parent == os.getpid() and module in cmdline:
            found.append(int(entry))
    return found
