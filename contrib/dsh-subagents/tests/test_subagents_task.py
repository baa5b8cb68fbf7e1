"""The task tool end to end: a child runs to completion, nests to the depth limit, fails, runs in parallel."""

from __future__ import annotations

import anyio
import pytest
from dsh_subagents import InProcessProvider, SubagentsConfig, SubagentsPlugin, task

import dsh_core
from dsh_core import ConfigError, Harness, ToolExecution, ToolResultMessage, tool
from dsh_core.testing import Reply, ScriptedModel

from .subagent_kit import (
    CWD,
    MODEL,
    BarrierModel,
    last_prompt,
    of_type,
    reason_of,
    result_text,
    running,
    task_call,
    task_reply,
    tool_message,
    trail,
)

pytestmark = pytest.mark.anyio


async def test_task_returns_the_childs_final_answer() -> None:
    """The child's answer is the tool result, and the parent's next request carries it."""
    model = ScriptedModel(
        [
            task_reply("count the files", "How many files are in src/?"),
            ScriptedModel.text("There are 3 files.", chunks=2),  # the child
            ScriptedModel.text("The child says 3."),
        ]
    )
    async with running({"scripted": model}) as (ctx, recorder):
        handle = await ctx.agents.create("p1", meta={"cwd": CWD}, agent_options=MODEL)
        async with handle:
            with anyio.fail_after(5):
                outcome = await handle.agent.run("count them")
            events = handle.agent.session.events
            (child,) = recorder.children_of("p1")
            assert ctx.agents.get(child.id) is None  # disposed once the call was over
    assert outcome.kind == "completed"
    assert outcome.text == "The child says 3."
    assert trail(events)[2:7] == [
        "step/start",
        "assistant/message",
        "tool/call",
        "subagent/start",
        "subagent/end",
    ]
    (start,) = of_type(events, "subagent/start")
    (end,) = of_type(events, "subagent/end")
    assert start.data == {
        "call_id": "call_1",
        "child_session_id": child.id,
        "description": "count the files",
        "depth": 1,
    }
    assert end.data == {
        "call_id": "call_1",
        "child_session_id": child.id,
        "stop_reason": "completed",
        "output_chars": len("There are 3 files."),
    }
    (result,) = of_type(events, "tool/result")
    assert result_text(result) == "There are 3 files."
    assert "error_code" not in result.data
    last = model.requests[2].messages[-1]
    assert isinstance(last, ToolResultMessage)
    assert last.text == "There are 3 files."
    # the child: its own session, naming the parent, inheriting cwd and model, with the prompt
    assert child.meta.parent_id == "p1"
    assert child.meta.cwd == CWD
    assert dict(child.meta.extra) == {"depth": 1}
    child_request = model.requests[1]
    assert child_request.session_id == child.id
    assert (child_request.provider, child_request.model) == ("scripted", "test")
    assert last_prompt(child_request) == "How many files are in src/?"
    assert child_request.system is not None
    assert "delegated this task to you: count the files." in child_request.system
    assert of_type(child.events, "turn/end")[0].data["reason"] == {"kind": "completed"}
    model.assert_consumed()


async def test_nested_tasks_reach_the_depth_limit_and_are_refused_beyond_it() -> None:
    """With max_depth 2 a grandchild runs, and its own task call is refused with a clear error."""
    model = ScriptedModel(
        [
            task_reply("level one", "go one deeper"),  # parent (depth 0)
            task_reply("level two", "go two deeper"),  # child (depth 1)
            task_reply("level three", "go three deeper"),  # grandchild (depth 2): refused
            ScriptedModel.text("deepest answer"),  # grandchild
            ScriptedModel.text("middle answer"),  # child
            ScriptedModel.text("top answer"),  # parent
        ]
    )
    async with (
        running({"scripted": model}) as (ctx, recorder),
        await ctx.agents.create("p1", agent_options=MODEL) as handle,
    ):
        with anyio.fail_after(5):
            outcome = await handle.agent.run("go deep")
        (child,) = recorder.children_of("p1")
        (grandchild,) = recorder.children_of(child.id)
        assert recorder.children_of(grandchild.id) == []
    assert outcome.text == "top answer"
    assert [child.meta.extra["depth"], grandchild.meta.extra["depth"]] == [1, 2]
    (refused,) = of_type(grandchild.events, "tool/result")
    assert refused.data["error_code"] == "DENIED"
    text = result_text(refused)
    assert "depth 3" in text
    assert "depth limit of 2" in text
    assert "plugins.subagents.max_depth" in text
    assert of_type(grandchild.events, "subagent/start") == []
    assert result_text(of_type(child.events, "tool/result")[0]) == "deepest answer"
    assert of_type(child.events, "subagent/start")[0].data["depth"] == 2
    assert result_text(of_type(handle.agent.session.events, "tool/result")[0]) == "middle answer"
    child_system, grandchild_system = model.requests[1].system, model.requests[2].system
    assert child_system is not None
    assert grandchild_system is not None
    assert "cannot hand tasks to further sub-agents" not in child_system
    assert "cannot hand tasks to further sub-agents" in grandchild_system
    model.assert_consumed()


async def test_max_depth_from_config_limits_nesting() -> None:
    """``max_depth = 1``: a child may not delegate at all."""
    model = ScriptedModel(
        [
            task_reply("level one", "delegate again"),
            task_reply("level two", "never runs"),
            ScriptedModel.text("did it myself"),
            ScriptedModel.text("done"),
        ]
    )
    config = {"plugins": {"subagents": {"max_depth": 1}}}
    async with (
        running({"scripted": model}, config) as (ctx, recorder),
        await ctx.agents.create("p1", agent_options=MODEL) as handle,
    ):
        with anyio.fail_after(5):
            await handle.agent.run("go")
        (child,) = recorder.children_of("p1")
    (refused,) = of_type(child.events, "tool/result")
    assert refused.data["error_code"] == "DENIED"
    assert "depth limit of 1" in result_text(refused)
    model.assert_consumed()


async def test_child_failure_becomes_an_error_result_with_its_failure() -> None:
    """A child whose turn ends in error gives the parent an error result carrying the failure."""
    model = ScriptedModel(
        [
            task_reply("fragile", "this will fail"),
            ScriptedModel.failure("SERVER", "the backend fell over", status=503),
            ScriptedModel.text("the child failed"),
        ]
    )
    async with (
        running({"scripted": model}) as (ctx, recorder),
        await ctx.agents.create("p1", agent_options=MODEL) as handle,
    ):
        with anyio.fail_after(5):
            outcome = await handle.agent.run("try")
        events = handle.agent.session.events
        (child,) = recorder.children_of("p1")
    assert outcome.kind == "completed"
    (result,) = of_type(events, "tool/result")
    assert result.data["error_code"] == "TOOL_ERROR"
    assert tool_message(result).is_error
    text = result_text(result)
    assert "the sub-agent failed: the backend fell over [SERVER]" in text
    (end,) = of_type(events, "subagent/end")
    assert end.data["stop_reason"] == "error"
    assert end.data["output_chars"] == 0
    assert reason_of(of_type(child.events, "turn/end")[0]) == "error"
    model.assert_consumed()


async def test_parallel_task_calls_overlap() -> None:
    """Two task calls in one step run side by side; each result goes back to its own call."""
    parent = ScriptedModel(
        [
            Reply(task_call("first", "alpha"), task_call("second", "beta")),
            ScriptedModel.text("both done"),
        ]
    )
    children = BarrierModel(parties=2)  # neither child answers until both are streaming
    config = {"plugins": {"subagents": {"model": "kids/any"}}}
    async with (
        running({"scripted": parent, "kids": children}, config) as (ctx, recorder),
        await ctx.agents.create("p1", agent_options=MODEL) as handle,
    ):
        with anyio.fail_after(5):
            outcome = await handle.agent.run("split the work")
        events = handle.agent.session.events
        assert len(recorder.children_of("p1")) == 2
    assert outcome.text == "both done"
    assert sorted(children.arrived) == ["alpha", "beta"]
    assert trail(events)[4:10] == [
        "tool/call",
        "tool/call",
        "subagent/start",
        "subagent/start",
        "subagent/end",
        "subagent/end",
    ]
    results = of_type(events, "tool/result")
    assert [tool_message(r).call_id for r in results] == ["call_1", "call_2"]
    assert [result_text(r) for r in results] == ["answer: alpha", "answer: beta"]
    parent.assert_consumed()


async def test_tool_subset_limits_what_the_child_may_call() -> None:
    """A child given ``tools`` may call those; any other call is denied, and it is told which it has."""

    @tool(parallel_safe=True)
    def read_note(name: str) -> str:
        """Read a note."""
        return f"note {name}"

    @tool
    def delete_everything() -> str:
        """Delete everything."""
        return "deleted"  # pragma: no cover - hidden from the child, never runs

    model = ScriptedModel(
        [
            task_reply("read", "read note a", tools=["read_note"]),
            ScriptedModel.tool_call("delete_everything"),  # child: not among its tools
            ScriptedModel.tool_call("read_note", {"name": "a"}),  # child: allowed
            ScriptedModel.text("note a says hi"),  # child
            ScriptedModel.text("done"),
        ]
    )
    async with running({"scripted": model}) as (ctx, recorder):
        ctx.tools.register(read_note)
        ctx.tools.register(delete_everything)
        async with await ctx.agents.create("p1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                await handle.agent.run("go")
            (child,) = recorder.children_of("p1")
    denied, allowed = of_type(child.events, "tool/result")
    assert denied.data["error_code"] == "UNKNOWN_TOOL"
    assert "delete_everything" in result_text(denied)
    assert result_text(allowed) == "note a"
    child_tools = [schema["name"] for schema in model.requests[1].tools]
    assert "delete_everything" not in child_tools
    assert "read_note" in child_tools
    assert dict(child.meta.extra) == {"depth": 1, "tools": ("read_note",)}
    system = model.requests[1].system
    assert system is not None
    assert "You may use only these tools: read_note." in system
    model.assert_consumed()


async def test_unknown_tool_in_subset_is_refused_before_a_child_exists() -> None:
    """Asking for a tool nobody registered is refused with the list to choose from."""
    model = ScriptedModel([task_reply("x", "y", tools=["no_such_tool"]), ScriptedModel.text("ok")])
    async with (
        running({"scripted": model}) as (ctx, recorder),
        await ctx.agents.create("p1", agent_options=MODEL) as handle,
    ):
        with anyio.fail_after(5):
            await handle.agent.run("go")
        events = handle.agent.session.events
        assert recorder.children_of("p1") == []
    (result,) = of_type(events, "tool/result")
    assert result.data["error_code"] == "DENIED"
    assert "no_such_tool" in result_text(result)
    assert "choose from: task" in result_text(result)
    assert of_type(events, "subagent/start") == []
    model.assert_consumed()


async def test_a_grandchild_inherits_its_parents_tool_restriction() -> None:
    """A restricted child cannot give its own child tools it was not given."""

    @tool
    def read_note(name: str) -> str:
        """Read a note."""
        return name  # pragma: no cover - never called

    model = ScriptedModel(
        [
            task_reply("one", "delegate", tools=["task"]),
            task_reply("two", "read", tools=["read_note"]),  # child: refused, read_note was not given
            ScriptedModel.text("cannot"),
            ScriptedModel.text("done"),
        ]
    )
    async with running({"scripted": model}) as (ctx, recorder):
        ctx.tools.register(read_note)
        async with await ctx.agents.create("p1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                await handle.agent.run("go")
            (child,) = recorder.children_of("p1")
    (refused,) = of_type(child.events, "tool/result")
    assert refused.data["error_code"] == "DENIED"
    assert "read_note" in result_text(refused)
    assert "choose from: task" in result_text(refused)
    model.assert_consumed()


async def test_task_outside_an_agent_is_an_error_result() -> None:
    """Called without an agent (no execution ctx), the tool answers with an error instead of raising."""
    async with running({}) as (ctx, _recorder):
        execution = ToolExecution(call_id="c1", name="task", arguments='{"description": "d", "prompt": "p"}')
        result = await ctx.tools.execute(execution)
    assert result.is_error
    assert result.error_code == "TOOL_ERROR"
    assert "only be called by a live agent" in result.content[0].text


async def test_config_is_checked() -> None:
    """A negative max_depth or a model without a provider is a config error naming the key."""
    plugins = [SubagentsPlugin()]
    with pytest.raises(ConfigError, match=r"plugins\.subagents: max_depth must be >= 0"):
        async with Harness(
            config={"plugins": {"subagents": {"max_depth": -1}}}, plugins=plugins, autoload=False
        ):
            pass  # pragma: no cover
    with pytest.raises(ConfigError, match="provider/model"):
        async with Harness(
            config={"plugins": {"subagents": {"model": "gpt"}}}, plugins=plugins, autoload=False
        ):
            pass  # pragma: no cover
    assert SubagentsConfig() == SubagentsConfig(max_depth=2, model=None)


def test_front_is_exact() -> None:
    """The package exports the plugin, its config, the provider and the tool, and nothing else."""
    import dsh_subagents

    assert dsh_subagents.__all__ == [
        "PROVIDER_NAME",
        "InProcessProvider",
        "InProcessRun",
        "SubagentsConfig",
        "SubagentsPlugin",
        "task",
    ]
    assert set(dsh_subagents.__all__) == {n for n in vars(dsh_subagents) if not n.startswith("_")}
    assert task.parallel_safe is True
    assert task.name == "task"
    assert task.parameters["required"] == ("description", "prompt")
    assert set(task.parameters["properties"]) == {"description", "prompt", "tools"}
    assert InProcessProvider().config.max_depth == 2
    assert dsh_core.Harness is Harness


async def test_with_delegation_off_the_task_tool_is_not_offered() -> None:
    """max_depth = 0: no task tool in anyone's schemas, so the model is never invited to delegate."""
    from dsh_core import Harness

    config = {"plugins": {"subagents": {"max_depth": 0}}}
    async with Harness(config, plugins=[SubagentsPlugin()], autoload=False) as ctx:
        assert "task" not in ctx.tools.names()
        assert ctx.subagents.get("in-process") is not None
