"""Benchmark: the per-call cost of an MCP tool over stdio, against calling the same server with the SDK.

Run: ``.venv/bin/python benchmarks/mcp.py``. Prints microseconds per call and the ratio; asserts
nothing. One server script (an ``echo`` tool built with the SDK's ``MCPServer``) is started twice
in the same run: once for the SDK's ``Client`` alone (the baseline), once by the ``mcp`` plugin,
whose tool is called through the whole tool pipeline (``ctx.tools.execute``, with a cancel signal,
as the agent loop calls it). Rounds alternate between the two; the median round of each counts
(the machine is shared, so single rounds are noisy), and the best is shown beside it.
Target: the plugin's call costs under 1.3x the SDK's.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and this file would shadow the SDK.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

import anyio  # noqa: E402
import sniffio  # noqa: E402
from dsh_mcp import McpPlugin  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from dsh_core import CancelSignal, Context, Harness, ToolExecution  # noqa: E402

CALLS = 300
ROUNDS = 9
SERVER = '''
from mcp.server.mcpserver import MCPServer
server = MCPServer("bench")

@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text

server.run()
'''


async def sdk_round(client: Client) -> float:
    start = time.perf_counter()
    for i in range(CALLS):
        await client.call_tool("echo", {"text": f"hello {i}"})
    return (time.perf_counter() - start) / CALLS


async def plugin_round(ctx: Context) -> float:
    executions = [
        ToolExecution(
            call_id=f"c{i}",
            name="mcp__bench__echo",
            arguments=f'{{"text": "hello {i}"}}',
            agent_id="a1",
            signal=CancelSignal(),
        )
        for i in range(CALLS)
    ]
    start = time.perf_counter()
    for execution in executions:
        result = await ctx.tools.execute(execution)
        if result.is_error:
            raise RuntimeError(result)
    return (time.perf_counter() - start) / CALLS


async def main(script: Path) -> None:
    command = [sys.executable, str(script)]
    config = {"plugins": {"mcp": {"servers": {"bench": {"command": command[0], "args": command[1:]}}}}}
    params = StdioServerParameters(command=command[0], args=command[1:])
    sdk: list[float] = []
    plugin: list[float] = []
    async with (
        Client(params, cache=None) as client,
        Harness(config=config, plugins=[McpPlugin()], autoload=False) as ctx,
    ):
        await sdk_round(client)  # warm both up
        await plugin_round(ctx)
        for _ in range(ROUNDS):
            sdk.append(await sdk_round(client))
            plugin.append(await plugin_round(ctx))
    sdk_median, plugin_median = statistics.median(sdk), statistics.median(plugin)
    print(
        f"mcp stdio call ({sniffio.current_async_library()}), median of {ROUNDS} rounds (best): "
        f"SDK Client {sdk_median * 1e6:5.0f} us ({min(sdk) * 1e6:.0f})   "
        f"dsh tool through the mcp plugin {plugin_median * 1e6:5.0f} us ({min(plugin) * 1e6:.0f})   "
        f"ratio {plugin_median / sdk_median:.2f}x (target < 1.3x)"
    )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "bench_server.py"
        script.write_text(SERVER)
        for backend in ("asyncio", "trio"):
            anyio.run(main, script, backend=backend)
