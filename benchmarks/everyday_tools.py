"""Benchmark: what the everyday-tools plugins add to a tool call (spill's wrapper) and to a step (todo, skills).

Run: ``.venv/bin/python benchmarks/everyday_tools.py``. Prints microseconds per call and the ratio
against the same call without the plugin, measured in the same run (best of 5); asserts nothing.

* spill wraps every tool call (``tools/execute``): a small result, a result just under the limit
  (the byte count is taken), and a spilled one (stored in the log, previewed);
* todo and skills add a system-prompt section computed for each step: ``assemble`` with each.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import anyio
from dsh_skills import SkillsPlugin
from dsh_spill import SpillPlugin
from dsh_todo import TodoPlugin

from dsh_core import Harness, ToolExecution, tool

ROUNDS = 5
CALLS = 5_000


@tool
def echo(size: int) -> str:
    """Return ``size`` characters."""
    return "é" * size


async def _calls(plugins: list[Any], size: int, calls: int) -> float:
    async with Harness(plugins=plugins, autoload=False) as ctx:
        ctx.tools.register(echo)
        session = await ctx.sessions.create("bench")
        arguments = json.dumps({"size": size})
        best = float("inf")
        for _ in range(ROUNDS):
            started = time.perf_counter()
            for number in range(calls):
                execution = ToolExecution(call_id=f"c{number}", name="echo", arguments=arguments, session_id=session.id)
                await ctx.tools.execute(execution)
            best = min(best, (time.perf_counter() - started) / calls)
        return best * 1e6


async def _assembly(plugins: list[Any], cwd: str) -> float:
    async with Harness(plugins=plugins, autoload=False) as ctx:
        from dsh_core.services import AssemblyContext

        context = AssemblyContext(cwd=cwd)
        best = float("inf")
        for _ in range(ROUNDS):
            started = time.perf_counter()
            for _ in range(500):
                await ctx.system_prompt.assemble(context)
            best = min(best, (time.perf_counter() - started) / 500)
        return best * 1e6


async def main() -> None:
    for label, size, calls in (("small result (100 chars)", 100, CALLS), ("16k chars (just under 32 KiB)", 16_000, CALLS), ("spilled (40k chars)", 40_000, 500)):
        plain = await _calls([], size, calls)
        spilled = await _calls([SpillPlugin()], size, calls)
        print(f"tool call, {label}: {plain:.1f} us plain, {spilled:.1f} us with spill (x{spilled / plain:.2f})")
    with TemporaryDirectory() as workspace:
        for number in range(20):
            folder = Path(workspace) / ".agents" / "skills" / f"skill-{number}"
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(f"---\nname: skill-{number}\ndescription: Does task {number}.\n---\nSteps.\n")
        plain = await _assembly([], workspace)
        todo = await _assembly([TodoPlugin()], workspace)
        skills = await _assembly([SkillsPlugin()], workspace)
        print(f"system prompt assembly: {plain:.1f} us plain, {todo:.1f} us with todo (x{todo / plain:.2f}), "
              f"{skills:.1f} us with skills, 20 skills on disk (x{skills / plain:.2f})")


if __name__ == "__main__":
    anyio.run(main)
