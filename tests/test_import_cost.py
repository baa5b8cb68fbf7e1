"""What ``import dsh_core`` and a tool call load: ``jsonschema`` only when a schema needs the full validator (issue 18)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_dsh_core_does_not_import_jsonschema() -> None:
    """A fresh ``import dsh_core`` leaves jsonschema unimported."""
    loaded = run_python(
        """
        import sys
        import dsh_core
        print(sorted(name for name in sys.modules if name.split(".")[0] == "jsonschema"))
        """
    )
    assert loaded == "[]"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_valid_calls_of_simple_tools_never_import_jsonschema(backend: str) -> None:
    """Registering and calling a tool of the fast subset needs no jsonschema; explaining bad arguments does."""
    out = run_python(
        f"""
        import sys
        from typing import Annotated
        import anyio
        from dsh_core import Harness, Text, ToolExecution, tool
        from dsh_core.services import ToolsPlugin

        @tool
        def scale(x: Annotated[int, {{"minimum": 0}}], label: str | None = None) -> str:
            return f"{{label}}:{{2 * x}}"

        def text(result):
            return "".join(block.text for block in result.content if isinstance(block, Text))

        async def main():
            async with Harness(autoload=False, plugins=[ToolsPlugin()]) as ctx:
                ctx.tools.register(scale)
                good = await ctx.tools.execute(ToolExecution(call_id="1", name="scale", arguments='{{"x": 2}}'))
                print(text(good), "jsonschema" in sys.modules)
                bad = await ctx.tools.execute(ToolExecution(call_id="2", name="scale", arguments='{{"x": -1}}'))
                print(bad.error_code, "jsonschema" in sys.modules)
                print(text(bad).splitlines()[1])

        anyio.run(main, backend={backend!r})
        """
    )
    assert out.splitlines() == [
        "None:4 False",
        "INVALID_ARGS True",
        "- at arguments.x: -1 is less than the minimum of 0",
    ]
