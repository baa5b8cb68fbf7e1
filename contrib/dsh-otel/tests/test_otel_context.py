"""Context propagation: the application's span, sub-agents under their task call, TRACEPARENT for bash."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from dsh_subagents import SubagentsPlugin
from dsh_workspace import COMMAND_ENV, WorkspacePlugin
from opentelemetry.trace import SpanKind, StatusCode, format_span_id, format_trace_id

from dsh_core import ToolExecution, ToolResult, ToolResultMessage, hookimpl
from dsh_core.session_log import ToolResultEvent
from dsh_core.testing import ScriptedModel

from .otel_kit import MODEL, Telemetry, parent_of, running, span_id, trace_id

pytestmark = pytest.mark.anyio


async def test_the_applications_current_span_at_send_time_is_the_turns_parent(telemetry: Telemetry) -> None:
    """run() inside an application span nests the turn under it, although the turn runs in the agent's task."""
    tracer = telemetry.tracer_provider.get_tracer("app")
    model = ScriptedModel([ScriptedModel.text("one"), ScriptedModel.text("two")])
    async with running(telemetry, model) as (ctx, _):
        async with await ctx.agents.create(
            "agent-1", agent_options=MODEL
        ) as handle:  # created outside the span
            with tracer.start_as_current_span("handle request") as app_span:
                await handle.agent.run("inside")
            await handle.agent.run("outside")
    app = telemetry.one("handle request")
    inside, outside = sorted(telemetry.named("invoke_agent agent-1"), key=lambda span: span.start_time or 0)
    assert app_span.get_span_context().span_id == span_id(app)
    assert parent_of(inside) == span_id(app)
    assert trace_id(inside) == trace_id(app)
    assert parent_of(outside) is None
    assert trace_id(outside) != trace_id(app)


async def test_a_send_from_inside_a_span_parents_the_turn_even_from_another_task(
    telemetry: Telemetry,
) -> None:
    """send() (not run) from a span in one task; the turn that takes it is that span's child."""
    tracer = telemetry.tracer_provider.get_tracer("app")
    model = ScriptedModel([ScriptedModel.text("done")])
    async with running(telemetry, model) as (ctx, _):
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            with tracer.start_as_current_span("enqueue"):
                handle.agent.send("queued from a span")
            await handle.agent.when_idle()
    assert parent_of(telemetry.one("invoke_agent agent-1")) == span_id(telemetry.one("enqueue"))


async def test_a_subagents_turn_nests_under_the_parents_task_tool_span(telemetry: Telemetry) -> None:
    """parent turn -> execute_tool task -> child's invoke_agent -> its chat: one trace."""
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("task", {"description": "count files", "prompt": "How many files?"}),
            ScriptedModel.text("There are 3 files."),  # the child
            ScriptedModel.text("The child says 3."),
        ]
    )
    async with running(telemetry, model, plugins=[SubagentsPlugin()]) as (ctx, _):
        async with await ctx.agents.create("parent", agent_options=MODEL) as handle:
            with anyio.fail_after(10):
                outcome = await handle.agent.run("count them")
    assert outcome.text == "The child says 3."
    parent_turn = telemetry.one("invoke_agent parent")
    task_span = telemetry.one("execute_tool task")
    (child_turn,) = [
        span
        for span in telemetry.finished()
        if span.name.startswith("invoke_agent ") and span is not parent_turn
    ]
    child_id = dict(child_turn.attributes or {})["gen_ai.agent.id"]
    assert child_id != "parent"
    assert child_turn.name == f"invoke_agent {child_id}"
    assert {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": child_id,
        "dsh.turn": 1,
        "dsh.turn.end_reason": "completed",
    }.items() <= dict(child_turn.attributes or {}).items()
    assert (parent_turn.kind, task_span.kind, child_turn.kind) == (SpanKind.INTERNAL,) * 3
    assert parent_of(task_span) == span_id(parent_turn)
    assert parent_of(child_turn) == span_id(task_span)
    assert task_span.status.status_code is StatusCode.UNSET
    # the child's turn runs inside the task call
    assert (task_span.start_time or 0) <= (child_turn.start_time or 0)
    assert (child_turn.end_time or 0) <= (task_span.end_time or 0)
    assert {trace_id(span) for span in telemetry.finished()} == {trace_id(parent_turn)}
    chats = telemetry.named("chat deepseek-v4-flash")
    assert len(chats) == 3
    child_chats = [
        chat for chat in chats if dict(chat.attributes or {})["gen_ai.conversation.id"] == child_id
    ]
    assert [parent_of(chat) for chat in child_chats] == [span_id(child_turn)]
    assert all(chat.kind is SpanKind.CLIENT for chat in chats)
    assert telemetry.still_open() == []


async def test_bash_sees_the_tool_spans_traceparent(telemetry: Telemetry, tmp_path: Path) -> None:
    """A real bash command gets TRACEPARENT naming the trace and its own execute_tool span (W3C format)."""
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("bash", {"command": 'printf "tp=%s" "$TRACEPARENT"'}),
            ScriptedModel.text("ok"),
        ]
    )
    async with running(telemetry, model, plugins=[WorkspacePlugin()]) as (ctx, _):
        handle = await ctx.agents.create("agent-1", meta={"cwd": str(tmp_path)}, agent_options=MODEL)
        async with handle:
            await handle.agent.run("show me")
            (result,) = [
                ToolResultMessage.from_json(event.data["message"])
                for event in handle.agent.session.events
                if event.type == "tool/result"
            ]
    bash_span = telemetry.one("execute_tool bash")
    found = re.search(r"tp=(\S*)", result.text)
    assert found is not None, result.text
    assert bash_span.context is not None
    assert bash_span.context.trace_flags.sampled
    flags = f"{int(bash_span.context.trace_flags):02x}"
    expected = f"00-{format_trace_id(trace_id(bash_span))}-{format_span_id(span_id(bash_span))}-{flags}"
    assert found.group(1) == expected
    assert COMMAND_ENV.get() is None  # set for the call only


async def test_no_traceparent_when_the_span_is_not_recorded(tmp_path: Path) -> None:
    """With the API's no-op providers (no SDK set up), bash gets no TRACEPARENT at all."""
    from dsh_otel import OtelPlugin
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.trace import NoOpTracerProvider

    from dsh_core import Harness

    model = ScriptedModel(
        [ScriptedModel.tool_call("bash", {"command": 'printf "tp=[%s]" "$TRACEPARENT"'}), "ok"]
    )
    plugin = OtelPlugin(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())
    async with Harness(plugins=[plugin, WorkspacePlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("deepseek", model)
        handle = await ctx.agents.create("agent-1", meta={"cwd": str(tmp_path)}, agent_options=MODEL)
        async with handle:
            await handle.agent.run("show me")
            (result,) = [e for e in handle.agent.session.events if e.type == "tool/result"]
    assert "tp=[]" in ToolResultMessage.from_json(result.data["message"]).text


class SetsItsOwnVariable:
    """Another plugin that hands bash a variable of its own, through the same COMMAND_ENV."""

    @hookimpl
    async def dsh_tools_execute(
        self, execution: ToolExecution, call_next: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        token = COMMAND_ENV.set({**(COMMAND_ENV.get() or {}), "REQUEST_ID": "r-42"})
        try:
            return await call_next()
        finally:
            COMMAND_ENV.reset(token)


async def test_traceparent_and_another_plugins_variable_both_reach_bash(telemetry: Telemetry, tmp_path: Path) -> None:
    """A plugin that adds to COMMAND_ENV inside the otel listener keeps TRACEPARENT; bash sees both."""
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("bash", {"command": 'printf "tp=%s id=%s" "$TRACEPARENT" "$REQUEST_ID"'}),
            ScriptedModel.text("ok"),
        ]
    )
    async with running(telemetry, model, plugins=[WorkspacePlugin(), SetsItsOwnVariable()]) as (ctx, _):
        handle = await ctx.agents.create("agent-1", meta={"cwd": str(tmp_path)}, agent_options=MODEL)
        async with handle:
            await handle.agent.run("show me")
            (result,) = [
                event.payload.message
                for event in handle.agent.session.events
                if isinstance(event.payload, ToolResultEvent)
            ]
    bash_span = telemetry.one("execute_tool bash")
    found = re.search(r"tp=00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2} id=(\S*)", result.text)
    assert found is not None, result.text
    assert found.groups() == (format_trace_id(trace_id(bash_span)), format_span_id(span_id(bash_span)), "r-42")
