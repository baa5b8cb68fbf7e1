"""Tools of a stdio server built with the SDK: registration, results, errors, timeout, cancel, changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh_core import CancelSignal, Context, Image, Text
from dsh_core.testing import call_tool, read_fifo, result_text

from .conftest import Start

pytestmark = pytest.mark.anyio


async def test_tools_are_registered_with_the_servers_description_and_schema(
    start: Start, stdio_demo: dict[str, Any]
) -> None:
    """Each tool becomes mcp__<name>__<tool> with the server's description, schema and read-only hint."""
    async with start({"demo": stdio_demo}) as ctx:
        names = ctx.tools.names()
        echo = ctx.tools.get("mcp__demo__echo")
        slow = ctx.tools.get("mcp__demo__slow")
    assert {"mcp__demo__echo", "mcp__demo__slow", "mcp__demo__picture"} <= set(names)
    assert echo is not None
    assert slow is not None
    assert echo.description == "Say the text back."
    assert echo.parameters["properties"]["text"]["type"] == "string"
    assert echo.parameters["required"] == ("text",)
    assert (echo.read_only, slow.read_only) == (True, False)
    assert (echo.timeout, slow.timeout) == (60.0, 60.0)


async def test_allow_list_registers_only_the_named_tools(start: Start, stdio_demo: dict[str, Any]) -> None:
    """tools = [...] keeps only those of the server's tools."""
    async with start({"demo": {**stdio_demo, "tools": ["echo", "fail"]}}) as ctx:
        names = [name for name in ctx.tools.names() if name.startswith("mcp__")]
    assert names == ["mcp__demo__echo", "mcp__demo__fail"]


async def test_results_of_each_kind(start: Start, stdio_demo: dict[str, Any]) -> None:
    """Text and images come back as blocks; structuredContent alone as JSON text; isError as TOOL_ERROR."""
    async with start({"demo": stdio_demo}) as ctx:
        echoed = await call_tool(ctx, "mcp__demo__echo", text="hello")
        invalid = await call_tool(ctx, "mcp__demo__echo", text=3)
        picture = await call_tool(ctx, "mcp__demo__picture")
        measured = await call_tool(ctx, "mcp__demo__measure")
        failed = await call_tool(ctx, "mcp__demo__fail")
    assert (echoed.is_error, result_text(echoed)) == (False, "hello")
    assert invalid.error_code == "INVALID_ARGS"  # the tool runtime checks the server's schema
    assert "arguments.text" in result_text(invalid)
    assert picture.content[0] == Text("a red dot")
    image = picture.content[1]
    assert isinstance(image, Image)
    assert (image.media_type, image.data[:11]) == ("image/png", "iVBORw0KGgo")
    assert result_text(measured) == '{"width": 3, "height": 4}'
    assert failed.error_code == "TOOL_ERROR"
    assert "the disk is full" in result_text(failed)


async def test_cancel_aborts_the_call_and_cancels_it_on_the_server(
    start: Start, stdio_demo: dict[str, Any], signals: Path
) -> None:
    """Cancelling the call's signal ends it ABORTED, and the server's handler is cancelled too."""
    signal = CancelSignal()
    outcome: list[Any] = []
    async with start({"demo": stdio_demo}) as ctx:

        async def run() -> None:
            outcome.append(await call_tool(ctx, "mcp__demo__slow", signal=signal))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            assert await read_fifo(signals / "started") == "started"
            signal.cancel()
        assert await read_fifo(signals / "cancelled") == "cancelled"
    assert outcome[0].error_code == "ABORTED"


async def test_timeout_is_timeout_and_cancels_on_the_server(
    start: Start, stdio_demo: dict[str, Any], signals: Path
) -> None:
    """A call past the server's timeout is TIMEOUT, and the server's handler is cancelled."""
    async with start({"demo": {**stdio_demo, "timeout": 0.5}}) as ctx:
        outcome: list[Any] = []

        async def run() -> None:
            outcome.append(await call_tool(ctx, "mcp__demo__slow"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            assert await read_fifo(signals / "started") == "started"
        assert await read_fifo(signals / "cancelled") == "cancelled"
    assert outcome[0].error_code == "TIMEOUT"


class _Watch:
    """Wraps the tool runtime's ``add`` to signal when a tool of a given name is added or removed."""

    def __init__(self, ctx: Context, name: str) -> None:
        self.added, self.removed = anyio.Event(), anyio.Event()
        runtime = ctx.tools.runtime
        add = runtime.add

        def watched(tool: Any, **kwargs: Any) -> Any:
            undo = add(tool, **kwargs)
            if tool.name != name:
                return undo
            self.added.set()

            def remove() -> None:
                undo()
                self.removed.set()

            return remove

        runtime.add = watched  # type: ignore[method-assign]


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_tool_list_changes_update_the_registered_tools(
    start: Start, stdio_demo: dict[str, Any], protocol: str
) -> None:
    """notifications/tools/list_changed (either protocol era) adds the server's new tool, and removes a gone one."""
    async with start({"demo": {**stdio_demo, "protocol": protocol}}) as ctx:
        assert ctx.tools.get("mcp__demo__extra") is None
        watch = _Watch(ctx, "mcp__demo__extra")
        assert result_text(await call_tool(ctx, "mcp__demo__grow")) == "grown"
        # pytest's timeout bounds the waits: a loaded CI machine needs more than a few seconds to re-list
        await watch.added.wait()
        added = await call_tool(ctx, "mcp__demo__extra", x=41)
        assert result_text(await call_tool(ctx, "mcp__demo__shrink")) == "shrunk"
        await watch.removed.wait()
        assert ctx.tools.get("mcp__demo__extra") is None
    assert result_text(added) == "42"
