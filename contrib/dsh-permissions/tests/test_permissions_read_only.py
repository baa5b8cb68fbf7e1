"""The read-only mode runs tools marked ``read_only`` as well as the built-in read tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core import Context, tool

from .conftest import Start
from .permissions_kit import call, text

pytestmark = pytest.mark.anyio

calls: list[str] = []


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up (changes nothing)."""
    calls.append(f"lookup {key}")
    return f"value of {key}"


@tool
def store(key: str) -> str:
    """Store a key (a write)."""
    calls.append(f"store {key}")
    return "stored"


class _Tools:
    name = "test-tools"

    def start(self, ctx: Context) -> None:
        ctx.tools.register(lookup)
        ctx.tools.register(store)


async def test_read_only_mode_runs_a_read_only_tool_and_denies_a_write(start: Start, ws: Path) -> None:
    """In read-only mode a tool marked read_only runs; an unmarked one is denied naming the mode."""
    calls.clear()
    async with start(mode="read-only", plugins=[_Tools()]) as ctx:
        looked = await call(ctx, "lookup", ws, key="k")
        stored = await call(ctx, "store", ws, key="k")
    assert text(looked) == "value of k"
    assert stored.error_code == "DENIED"
    assert "the permission mode is read-only" in text(stored)
    assert calls == ["lookup k"]


async def test_a_deny_rule_still_beats_read_only(start: Start, ws: Path) -> None:
    """read_only lifts only the mode's baseline: a deny rule naming the tool still denies it."""
    calls.clear()
    rules = [{"tool": "lookup", "action": "deny"}]
    async with start(mode="read-only", rules=rules, plugins=[_Tools()]) as ctx:
        result = await call(ctx, "lookup", ws, key="k")
    assert result.error_code == "DENIED"
    assert calls == []
