"""A real process killed with SIGKILL in the middle of a slow tool, on every backend: the log is repaired
and the agent resumes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import anyio
import pytest

from dsh_core import ToolResultMessage, UserMessage
from dsh_core.testing import ScriptedModel
from dsh_core.vocabulary import AssistantMessage

from .backends import MODEL, Backend

pytestmark = pytest.mark.anyio

#: the doomed process: its agent calls a slow tool, which queues a second prompt, makes the log
#: durable (as a checkpoint policy would before a tool body), says READY and waits to be killed
DOOMED = textwrap.dedent(
    """
    import importlib, json, sys
    import anyio
    from dsh_core import AgentOptions, Harness, ToolExecution, tool
    from dsh_core.testing import ScriptedModel

    @tool
    async def migrate(execution: ToolExecution, table: str) -> str:
        \"\"\"Migrate a table (slow).\"\"\"
        ctx = execution.ctx
        agent = ctx.agents.get(execution.agent_id)
        agent.send("second: and then report")
        await ctx.sessions.flush(agent.session)
        print("READY", flush=True)
        await anyio.sleep_forever()
        return "never"

    async def main(plugin_path: str, name: str, table: str) -> None:
        module, _, cls = plugin_path.partition(":")
        plugin = getattr(importlib.import_module(module), cls)()
        config = {"plugins": {name: json.loads(table)}}
        model = ScriptedModel([ScriptedModel.tool_call("migrate", {"table": "users"}, text="migrating")])
        async with Harness(config=config, plugins=[plugin], autoload=False) as ctx:
            ctx.llm.register_adapter("scripted", model)
            ctx.tools.register(migrate)
            handle = await ctx.agents.create("doomed", agent_options=AgentOptions(model="scripted/test"))
            await handle.agent.run("first: migrate the users table")

    anyio.run(main, *sys.argv[1:])
    """
)


async def run_until_killed(backend: Backend) -> None:
    """Start the doomed process, wait for READY, SIGKILL it."""
    command = [sys.executable, "-c", DOOMED, backend.plugin_path, backend.name, json.dumps(backend.table())]
    async with await anyio.open_process(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None
        seen = b""
        with anyio.fail_after(30):
            async for chunk in process.stdout:
                seen += chunk
                if b"READY\n" in seen:
                    break
        assert b"READY\n" in seen, seen
        process.kill()
        assert await process.wait() == -9
    with anyio.fail_after(20):
        await backend.wait_released("doomed")


async def test_sigkill_mid_tool_then_resume(backend: Backend) -> None:
    """After SIGKILL: the queued prompt is stored, the open call is closed as outcome-unknown, the turn as
    interrupted; the resumed agent keeps the prompt pending until the next send, and its request is valid."""
    await run_until_killed(backend)
    stored = backend.stored("doomed")
    assert [e.type for e in stored if e.type in ("inbox/queued", "tool/call")] == [
        "inbox/queued",
        "tool/call",
        "inbox/queued",
    ]
    assert stored[-1].type == "inbox/queued"  # the prompt queued mid-turn survived the kill
    assert stored[-1].to_json()["data"]["message"]["content"][0]["text"] == "second: and then report"

    model = ScriptedModel([ScriptedModel.text("the migration may have run; checking first")])
    async with backend.harness(model) as ctx:
        loaded = await ctx.session_persistence.load("doomed")
        assert [(e.type, e.data.get("error_code")) for e in loaded.repaired] == [
            ("tool/result", "TOOL_OUTCOME_UNKNOWN"),
            ("turn/end", None),
        ]
        assert loaded.repaired[-1].data["reason"] == {"kind": "interrupted"}
        async with await ctx.agents.resume("doomed", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                await agent.when_idle()
            assert model.requests == []  # the restored prompt waits for the next send
            outcome = await agent.run("third: what is the state?")
            events = list(agent.session.events)
    assert outcome.kind == "completed"
    assert [e.data["turn"] for e in events if e.type == "turn/start"] == [1, 2]
    messages = list(model.requests[0].messages)
    assert [type(m).__name__ for m in messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "UserMessage",
        "UserMessage",
    ]
    first, call, result, second, third = messages
    assert isinstance(first, UserMessage)
    assert first.text == "first: migrate the users table"
    assert isinstance(call, AssistantMessage)
    assert isinstance(result, ToolResultMessage)
    assert result.call_id == call.tool_calls[0].id
    assert result.is_error
    assert "outcome of the tool call migrate" in result.text
    assert "retry it only if the call is idempotent" in result.text
    assert isinstance(second, UserMessage)
    assert isinstance(third, UserMessage)
    assert [second.text, third.text] == ["second: and then report", "third: what is the state?"]
    assert backend.stored("doomed") == events
