"""Permission rules name MCP tools like any tool; the read-only mode runs only tools marked readOnlyHint."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_core.testing import call_tool, result_text

from .conftest import Start

pytestmark = pytest.mark.anyio


async def test_rules_by_name_apply_to_mcp_tools(start: Start, stdio_demo: dict[str, Any]) -> None:
    """A deny rule on mcp__demo__* denies every tool of that server, and no other."""
    rules = [{"tool": "mcp__demo__*", "action": "deny"}]
    servers = {"demo": stdio_demo, "other": {**stdio_demo, "tools": ["echo"]}}
    async with start(servers, permissions={"mode": "full-access", "rules": rules}) as ctx:
        denied = await call_tool(ctx, "mcp__demo__echo", agent_id="a1", text="x")
        allowed = await call_tool(ctx, "mcp__other__echo", agent_id="a1", text="x")
    assert denied.error_code == "DENIED"
    assert "mcp__demo__echo" in result_text(denied)
    assert result_text(allowed) == "x"


async def test_read_only_mode_treats_mcp_tools_as_writes_unless_read_only_hint(
    start: Start, stdio_demo: dict[str, Any]
) -> None:
    """In read-only mode a tool with readOnlyHint runs; one without it is denied as a write."""
    async with start({"demo": stdio_demo}, permissions={"mode": "read-only"}) as ctx:
        echoed = await call_tool(ctx, "mcp__demo__echo", agent_id="a1", text="look")
        measured = await call_tool(ctx, "mcp__demo__measure", agent_id="a1")
    assert result_text(echoed) == "look"
    assert measured.error_code == "DENIED"
    assert "the permission mode is read-only" in result_text(measured)


async def test_an_ask_rule_with_no_approval_channel_denies(start: Start, stdio_demo: dict[str, Any]) -> None:
    """An ask rule on an MCP tool goes to approval like any tool (none here: denied)."""
    rules = [{"tool": "mcp__demo__echo", "action": "ask"}]
    async with start({"demo": stdio_demo}, permissions={"mode": "workspace-write", "rules": rules}) as ctx:
        result = await call_tool(ctx, "mcp__demo__echo", agent_id="a1", text="x")
    assert result.error_code == "DENIED"
    assert "needs approval" in result_text(result)
