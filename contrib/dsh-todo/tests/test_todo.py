"""todo_write: the list logged as todo/updated, offered in the prompt while open, restored after a SIGKILL."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from dsh_persistence_jsonl import PersistencePlugin
from dsh_todo import TodoItem, TodoPlugin, TodoUpdated, todos_of

from dsh_core import AgentOptions, Harness
from dsh_core.testing import ScriptedModel, kill_when_ready
from dsh_core.vocabulary import thaw_json

pytestmark = pytest.mark.anyio

MODEL = AgentOptions(model="scripted/x")
PLAN = [
    {"id": "read", "content": "Read the failing test", "status": "completed"},
    {"id": "fix", "content": "Fix the parser", "status": "in_progress"},
    {"id": "docs", "content": "Update the docs", "status": "pending"},
]


def _results(events: Any) -> list[Any]:
    return [event for event in events if event.type == "tool/result"]


def _text(event: Any) -> str:
    return "".join(block["text"] for block in event.data["message"]["content"])


async def test_todo_write_logs_the_list_and_offers_it_in_the_prompt() -> None:
    """The list is logged whole; the next request's system prompt shows it while an item is open."""
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("todo_write", {"todos": PLAN}),
            ScriptedModel.text("working on it"),
        ]
    )
    async with Harness(plugins=[TodoPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("plan", agent_options=MODEL) as handle:
            await handle.agent.run("fix the parser")
            events = handle.agent.session.events
            (updated,) = [event for event in events if event.type == "todo/updated"]
            assert thaw_json(updated.data) == {"todos": PLAN}  # self-describing: every item whole, in order
            assert todos_of(handle.agent.session) == tuple(TodoItem(**item) for item in PLAN)
            (result,) = _results(events)
            assert "error_code" not in result.data
            assert _text(result).endswith("[x] Read the failing test\n[~] Fix the parser\n[ ] Update the docs")
    first, second = model.requests
    assert "todo list" not in (first.system or "")
    assert (second.system or "").endswith(
        "Your todo list (keep it current with todo_write; [~] is in progress, [x] completed):\n"
        "[x] Read the failing test\n[~] Fix the parser\n[ ] Update the docs"
    )


async def test_a_finished_list_leaves_the_prompt() -> None:
    """Once every item is completed, the list is no longer offered to the model."""
    done = [{**item, "status": "completed"} for item in PLAN]
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("todo_write", {"todos": PLAN}),
            ScriptedModel.tool_call("todo_write", {"todos": done}),
            ScriptedModel.text("all done"),
        ]
    )
    async with Harness(plugins=[TodoPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("plan", agent_options=MODEL) as handle:
            await handle.agent.run("fix it")
            assert [item.status for item in todos_of(handle.agent.session)] == ["completed"] * 3
    assert "[~] Fix the parser" in (model.requests[1].system or "")
    assert "todo list" not in (model.requests[2].system or "")


@pytest.mark.parametrize(
    ("todos", "code", "words"),
    [
        ([{"id": "a", "content": "x", "status": "pending"}] * 2, "TOOL_ERROR", "todos[1].id 'a' is used twice"),
        ([{"id": " ", "content": "x", "status": "pending"}], "TOOL_ERROR", "todos[0].id is empty"),
        ([{"id": "a", "content": "", "status": "pending"}], "TOOL_ERROR", "todos[0].content is empty"),
        ([{"id": "a", "content": "x", "status": "done"}], "INVALID_ARGS", "status"),
        ([{"id": "a", "content": "x"}], "INVALID_ARGS", "status"),
    ],
)
async def test_a_malformed_list_is_refused_and_the_old_one_kept(todos: Any, code: str, words: str) -> None:
    """A bad list is an error the model can act on; nothing is logged and the turn goes on."""
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("todo_write", {"todos": PLAN[:1]}),
            ScriptedModel.tool_call("todo_write", {"todos": todos}),
            ScriptedModel.text("ok"),
        ]
    )
    async with Harness(plugins=[TodoPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("plan", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("plan")
            assert outcome.kind == "completed"
            events = handle.agent.session.events
            assert len([event for event in events if event.type == TodoUpdated.type]) == 1
            bad = _results(events)[1]
            assert bad.data["error_code"] == code
            assert words in _text(bad)
            assert todos_of(handle.agent.session) == (TodoItem(**PLAN[0]),)


async def test_the_cap_on_items_comes_from_config() -> None:
    """``max_items`` bounds one list."""
    model = ScriptedModel([ScriptedModel.tool_call("todo_write", {"todos": PLAN}), ScriptedModel.text("ok")])
    config = {"plugins": {"todo": {"max_items": 2}}}
    async with Harness(config=config, plugins=[TodoPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("plan", agent_options=MODEL) as handle:
            await handle.agent.run("plan")
            (result,) = _results(handle.agent.session.events)
            assert "holds at most 2 items, got 3" in _text(result)


#: a process that writes a todo list, then hangs in a tool until it is SIGKILLed
DOOMED = textwrap.dedent(
    """
    import json, sys
    import anyio
    from dsh_core import AgentOptions, Harness, ToolExecution, tool
    from dsh_core.testing import ScriptedModel
    from dsh_persistence_jsonl import PersistencePlugin
    from dsh_todo import TodoPlugin

    @tool
    async def hang(execution: ToolExecution) -> str:
        \"\"\"Hang until killed.\"\"\"
        await execution.ctx.sessions.flush(execution.ctx.sessions.get(execution.session_id))
        print("READY", flush=True)
        await anyio.sleep_forever()
        return "never"

    async def main(root: str, plan: str) -> None:
        config = {"plugins": {"persistence-jsonl": {"root": root}}}
        model = ScriptedModel([ScriptedModel.tool_call("todo_write", {"todos": json.loads(plan)}),
                               ScriptedModel.tool_call("hang")])
        async with Harness(config=config, plugins=[PersistencePlugin(), TodoPlugin()], autoload=False) as ctx:
            ctx.llm.register_adapter("scripted", model)
            ctx.tools.register(hang)
            handle = await ctx.agents.create("doomed", agent_options=AgentOptions(model="scripted/x"))
            await handle.agent.run("plan, then hang")

    anyio.run(main, sys.argv[1], sys.argv[2])
    """
)


async def test_the_list_survives_a_sigkill_and_resume(tmp_path: Path) -> None:
    """After a SIGKILL mid-turn, the resumed session has the list and offers it to the model."""
    import json

    await kill_when_ready(DOOMED, str(tmp_path), json.dumps(PLAN))
    model = ScriptedModel([ScriptedModel.text("resuming the plan")])
    config = {"plugins": {"persistence-jsonl": {"root": str(tmp_path)}}}
    async with Harness(config=config, plugins=[PersistencePlugin(), TodoPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.resume("doomed", agent_options=MODEL) as handle:
            assert todos_of(handle.agent.session) == tuple(TodoItem(**item) for item in PLAN)
            await handle.agent.run("where were we?")
    assert "[~] Fix the parser\n[ ] Update the docs" in (model.requests[0].system or "")
