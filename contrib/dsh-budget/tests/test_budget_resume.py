"""Session totals come from the log: a process SIGKILLed mid-turn, resumed, still counts what it spent."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from dsh_budget import BudgetPlugin
from dsh_persistence_jsonl import PersistencePlugin

from dsh_core import Harness
from dsh_core.testing import ScriptedModel, kill_when_ready

from .budget_kit import MODEL, answer, usage_records

pytestmark = pytest.mark.anyio

#: turn 1 spends 600 tokens; turn 2 spends 300 in its first step, then hangs in a tool until killed
DOOMED = textwrap.dedent(
    """
    import sys
    import anyio
    from dsh_budget import BudgetPlugin
    from dsh_core import AgentOptions, Harness, ToolExecution, tool
    from dsh_core.llm import Usage
    from dsh_core.testing import ScriptedModel
    from dsh_persistence_jsonl import PersistencePlugin

    @tool
    async def hang(execution: ToolExecution) -> str:
        \"\"\"Hang until killed.\"\"\"
        await execution.ctx.sessions.flush(execution.ctx.agents.get(execution.agent_id).session)
        print("READY", flush=True)
        await anyio.sleep_forever()
        return "never"

    async def main(root: str) -> None:
        config = {"plugins": {"persistence-jsonl": {"root": root}, "budget": {"max_session_tokens": 1000}}}
        model = ScriptedModel([
            ScriptedModel.text("first", usage=Usage(500, 100)),
            ScriptedModel.tool_call("hang", usage=Usage(250, 50)),
        ])
        plugins = [PersistencePlugin(), BudgetPlugin()]
        async with Harness(config=config, plugins=plugins, autoload=False) as ctx:
            ctx.llm.register_adapter("scripted", model)
            ctx.tools.register(hang)
            handle = await ctx.agents.create("doomed", agent_options=AgentOptions(model="scripted/test"))
            await handle.agent.run("one")
            await handle.agent.run("two")

    anyio.run(main, sys.argv[1])
    """
)


async def test_session_totals_survive_a_sigkill_and_resume(tmp_path: Path) -> None:
    """900 tokens were spent before the kill: the resumed agent may spend 100 more, then is stopped and refused."""
    await kill_when_ready(DOOMED, str(tmp_path))
    config = {"plugins": {"persistence-jsonl": {"root": str(tmp_path)}, "budget": {"max_session_tokens": 1000}}}
    model = ScriptedModel([answer("resumed", 120, 30)])
    async with Harness(config=config, plugins=[PersistencePlugin(), BudgetPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.resume("doomed", agent_options=MODEL) as handle:
            agent = handle.agent
            ends = [e.data["reason"]["kind"] for e in agent.session.events if e.type == "turn/end"]
            assert ends == ["completed", "interrupted"]  # turn 2 was repaired on load
            stopped = await agent.run("three")
            refused = await agent.run("four")
            events = list(agent.session.events)
    assert model.requests[0].max_tokens == 100
    assert stopped.reason == {
        "kind": "stopped",
        "reason": "budget: max_session_tokens reached: 1050 tokens used by this session, the limit is 1000",
    }
    assert refused.reason == stopped.reason
    model.assert_consumed()
    # turn 1 logged its usage; turn 2 died before its end; turns 3 and 4 logged theirs
    assert [(r["turn"], r["tokens"]) for r in usage_records(events)] == [(1, 600), (3, 150), (4, 0)]
