"""200 agents running turns at once, without cross-talk (issue 5: done when).

Each agent has its own scripted model (its own provider), streams with a checkpoint before every
chunk so that the drivers interleave, calls a shared tool, and runs two turns. Every request,
every session log and every tool execution must hold only that agent's own data.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dsh_core import AgentOptions, ToolExecution, hookimpl, tool
from dsh_core.testing import ScriptedModel

from .loop_kit import assert_tool_calls_answered, running, trail

pytestmark = pytest.mark.anyio

AGENTS = 200


async def test_200_agents_run_turns_concurrently_without_cross_talk() -> None:
    executions: list[tuple[str | None, str]] = []

    @tool(parallel_safe=True)
    async def echo(owner: str, execution: ToolExecution) -> str:
        """Echo who asked."""
        executions.append((execution.agent_id, owner))
        await anyio.lowlevel.checkpoint()
        return f"echo for {owner}"

    statuses: dict[str, list[str]] = {}

    class Watch:
        @hookimpl
        def dsh_agent_status(self, agent: Any, status: str) -> None:
            statuses.setdefault(agent.id, []).append(status)

    models = {
        f"agent-{i}": ScriptedModel(
            [
                ScriptedModel.tool_call("echo", {"owner": f"agent-{i}"}, text=f"calling for agent-{i}", chunks=3),
                ScriptedModel.text(f"answer 1 of agent-{i}", chunks=4),
                ScriptedModel.text(f"answer 2 of agent-{i}", chunks=4),
            ],
            provider=f"p{i}",
            checkpoints=True,
        )
        for i in range(AGENTS)
    }
    outcomes: dict[str, list[Any]] = {}
    async with running(ScriptedModel(), plugins=[Watch()]) as ctx:
        ctx.tools.register(echo)
        handles = []
        for i, (ident, model) in enumerate(models.items()):
            ctx.llm.register_adapter(model.provider, model)
            handles.append(await ctx.agents.create(ident, agent_options=AgentOptions(model=f"p{i}/m")))

        async def converse(agent: Any) -> None:
            first = await agent.run(f"prompt 1 from {agent.id}")
            second = await agent.run(f"prompt 2 from {agent.id}")
            outcomes[agent.id] = [first, second]

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for handle in handles:
                    tg.start_soon(converse, handle.agent)
        logs = {handle.agent.id: list(handle.agent.session.events) for handle in handles}
        histories = {handle.agent.id: list(handle.agent.session.derive_messages()) for handle in handles}
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for handle in handles:
                    tg.start_soon(handle.dispose)
        assert ctx.agents.list() == ()
        assert ctx.sessions.list() == ()

    assert len(outcomes) == AGENTS
    assert sorted(executions) == sorted((ident, ident) for ident in models)
    for ident, model in models.items():
        first, second = outcomes[ident]
        assert (first.kind, first.text) == ("completed", f"answer 1 of {ident}")
        assert (second.kind, second.text) == ("completed", f"answer 2 of {ident}")
        model.assert_consumed()
        assert {request.session_id for request in model.requests} == {ident}
        for request in model.requests:
            for message in request.messages:
                assert ident in message.text, f"{ident}'s request carries {message.text!r}"
        events = logs[ident]
        assert trail(events) == [
            "inbox/queued", "turn/start", "user/message",
            "step/start", "assistant/message", "tool/call", "tool/result",
            "step/start", "assistant/message", "turn/end",
            "inbox/queued", "turn/start", "user/message",
            "step/start", "assistant/message", "turn/end",
        ]
        assert [e.data["turn"] for e in events if e.type == "turn/start"] == [1, 2]
        for event in events:
            if "message" in event.data:
                text = "".join(block.get("text", "") for block in event.data["message"]["content"])
                arguments = "".join(block.get("arguments", "") for block in event.data["message"]["content"])
                assert ident in text + arguments, f"{ident}'s log has {event.type} {dict(event.data)!r}"
        assert_tool_calls_answered(histories[ident])
        assert (statuses[ident][0], statuses[ident][-1]) == ("running", "disposed")
