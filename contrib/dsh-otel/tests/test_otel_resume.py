"""A session resumed after a crash: the interrupted turn produces no span and leaves none open; turns go on."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from dsh_persistence_jsonl import PersistencePlugin

from dsh_core import Harness
from dsh_core.testing import ScriptedModel, kill_when_ready

from .otel_kit import MODEL, Telemetry, parent_of

pytestmark = pytest.mark.anyio

#: a process with the otel plugin whose agent hangs in a tool until it is SIGKILLed
DOOMED = textwrap.dedent(
    """
    import sys
    import anyio
    from dsh_core import AgentOptions, Harness, ToolExecution, tool
    from dsh_core.testing import ScriptedModel
    from dsh_otel import OtelPlugin
    from dsh_persistence_jsonl import PersistencePlugin

    @tool
    async def migrate(execution: ToolExecution) -> str:
        \"\"\"Hang until killed.\"\"\"
        await execution.ctx.sessions.flush(execution.ctx.agents.get(execution.agent_id).session)
        print("READY", flush=True)
        await anyio.sleep_forever()
        return "never"

    async def main(root: str) -> None:
        config = {"plugins": {"persistence-jsonl": {"root": root}, "otel": {"exporter": "console"}}}
        model = ScriptedModel([ScriptedModel.tool_call("migrate")])
        async with Harness(config=config, plugins=[PersistencePlugin(), OtelPlugin()], autoload=False) as ctx:
            ctx.llm.register_adapter("deepseek", model)
            ctx.tools.register(migrate)
            handle = await ctx.agents.create("doomed", agent_options=AgentOptions(model="deepseek/x"))
            await handle.agent.run("migrate")

    anyio.run(main, sys.argv[1])
    """
)


async def test_resume_after_a_crash_numbers_on_and_leaves_nothing_open(
    telemetry: Telemetry, tmp_path: Path
) -> None:
    """Crash repair's `interrupted` turn/end makes no span; the next turn is `invoke_agent` with dsh.turn 2."""
    await kill_when_ready(DOOMED, str(tmp_path))
    config = {"plugins": {"persistence-jsonl": {"root": str(tmp_path)}}}
    model = ScriptedModel([ScriptedModel.text("checking first")])
    plugins = [PersistencePlugin(), telemetry.plugin()]
    async with Harness(config=config, plugins=plugins, autoload=False) as ctx:
        ctx.llm.register_adapter("deepseek", model)
        async with await ctx.agents.resume("doomed", agent_options=MODEL) as handle:
            ends = [e.data["reason"]["kind"] for e in handle.agent.session.events if e.type == "turn/end"]
            assert ends == ["interrupted"]  # repaired on load
            outcome = await handle.agent.run("what is the state?")
    assert outcome.kind == "completed"
    assert telemetry.still_open() == []
    (turn,) = telemetry.named("invoke_agent doomed")
    assert dict(turn.attributes or {})["dsh.turn"] == 2
    assert dict(turn.attributes or {})["dsh.turn.end_reason"] == "completed"
    assert parent_of(turn) is None
    assert sorted(span.name for span in telemetry.finished()) == [
        "chat deepseek-v4-flash",
        "invoke_agent doomed",
    ]
