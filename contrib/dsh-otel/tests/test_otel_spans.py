"""The spans and metrics of a turn: names, kinds, parentage, attributes and status, for every way a turn ends."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from dsh_retry import RetryPlugin
from opentelemetry.trace import SpanKind, StatusCode

from dsh_core import ToolExecution, hookimpl, tool
from dsh_core.llm import Usage
from dsh_core.testing import Reply, ScriptedModel

from .otel_kit import MODEL, Telemetry, parent_of, running, span_id, trace_id

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"cannot do {reason}")


async def test_tool_turn_has_a_turn_span_with_a_chat_and_a_tool_child_per_step(telemetry: Telemetry) -> None:
    """One invoke_agent span; chat spans (CLIENT) and the execute_tool span are its children, with the §9.5 attributes."""
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("add", {"a": 2, "b": 3}, usage=Usage(100, 7)),
            ScriptedModel.text("5", usage=Usage(130, 2)),
        ]
    )
    async with running(telemetry, model) as (ctx, _):
        ctx.tools.register(add)
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("What is 2 + 3?")
    assert outcome.kind == "completed"
    assert telemetry.still_open() == []
    turn = telemetry.one("invoke_agent agent-1")
    chats = telemetry.named("chat deepseek-v4-flash")
    tool_span = telemetry.one("execute_tool add")
    assert len(chats) == 2
    assert len(telemetry.finished()) == 4
    assert turn.kind is SpanKind.INTERNAL
    assert parent_of(turn) is None
    assert {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": "agent-1",
        "gen_ai.conversation.id": "agent-1",
        "dsh.turn": 1,
        "dsh.turn.end_reason": "completed",
    }.items() <= dict(turn.attributes or {}).items()
    assert turn.status.status_code is StatusCode.UNSET
    for chat in chats:
        assert chat.kind is SpanKind.CLIENT
        assert parent_of(chat) == span_id(turn)
        assert trace_id(chat) == trace_id(turn)
        assert chat.status.status_code is StatusCode.UNSET
    first, second = sorted(chats, key=lambda span: span.start_time or 0)
    assert {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "deepseek",
        "gen_ai.request.model": "deepseek-v4-flash",
        "gen_ai.response.finish_reasons": ("tool_call",),
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 7,
    }.items() <= dict(first.attributes or {}).items()
    assert dict(second.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)
    assert dict(second.attributes or {})["gen_ai.usage.input_tokens"] == 130
    assert tool_span.kind is SpanKind.INTERNAL
    assert parent_of(tool_span) == span_id(turn)
    assert {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_1",
    }.items() <= dict(tool_span.attributes or {}).items()
    assert tool_span.status.status_code is StatusCode.UNSET
    # the spans nest in time too: the tool ran after the first request and before the second
    assert (
        (first.end_time or 0)
        <= (tool_span.start_time or 0)
        <= (tool_span.end_time or 0)
        <= (second.start_time or 0)
    )
    assert (turn.start_time or 0) <= (first.start_time or 0)
    assert (second.end_time or 0) <= (turn.end_time or 0)


async def test_metrics_count_tokens_by_type_and_time_each_request(telemetry: Telemetry) -> None:
    """gen_ai.client.token.usage has an input and an output series; operation.duration one point per request."""
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("add", {"a": 1, "b": 1}, usage=Usage(100, 7)),
            ScriptedModel.text("2", usage=Usage(130, 2)),
        ]
    )
    async with running(telemetry, model) as (ctx, _):
        ctx.tools.register(add)
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            await handle.agent.run("1 + 1?")
    tokens = {
        point.attributes["gen_ai.token.type"]: point
        for point in telemetry.points("gen_ai.client.token.usage")
    }
    assert set(tokens) == {"input", "output"}
    assert (tokens["input"].sum, tokens["input"].count) == (230, 2)
    assert (tokens["output"].sum, tokens["output"].count) == (9, 2)
    assert {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "deepseek",
        "gen_ai.request.model": "deepseek-v4-flash",
    }.items() <= dict(tokens["input"].attributes).items()
    (duration,) = telemetry.points("gen_ai.client.operation.duration")
    assert duration.count == 2
    assert duration.sum > 0
    assert "error.type" not in duration.attributes


async def test_model_failure_sets_error_status_on_the_chat_and_the_turn(telemetry: Telemetry) -> None:
    """A failed request: chat span ERROR with error.type = the Failure code; the turn ends `error`, ERROR too."""
    model = ScriptedModel([ScriptedModel.failure("RATE_LIMIT", "slow down", status=429)])
    async with running(telemetry, model) as (ctx, _):
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("hello")
    assert outcome.kind == "error"
    assert telemetry.still_open() == []
    turn = telemetry.one("invoke_agent agent-1")
    chat = telemetry.one("chat deepseek-v4-flash")
    assert parent_of(chat) == span_id(turn)
    assert chat.status.status_code is StatusCode.ERROR
    assert dict(chat.attributes or {})["error.type"] == "RATE_LIMIT"
    assert dict(chat.attributes or {})["gen_ai.response.finish_reasons"] == ("error",)
    assert turn.status.status_code is StatusCode.ERROR
    assert dict(turn.attributes or {})["dsh.turn.end_reason"] == "error"
    assert dict(turn.attributes or {})["error.type"] == "RATE_LIMIT"
    assert turn.events == ()  # the failure is the request's, on its span: no exception event of the loop's
    (duration,) = telemetry.points("gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == "RATE_LIMIT"


async def test_a_retried_request_is_two_chat_spans(telemetry: Telemetry) -> None:
    """The retry plugin streams the step again: the failed attempt and the retry are separate chat spans."""
    model = ScriptedModel(
        [ScriptedModel.failure("SERVER", "overloaded", status=503), ScriptedModel.text("hi")]
    )
    config = {"plugins": {"retry": {"initial_delay": 0.0}}}
    async with running(telemetry, model, plugins=[RetryPlugin()], config=config) as (ctx, _):
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("hello")
    assert outcome.kind == "completed"
    failed, retried = sorted(telemetry.named("chat deepseek-v4-flash"), key=lambda span: span.start_time or 0)
    assert failed.status.status_code is StatusCode.ERROR
    assert dict(failed.attributes or {})["error.type"] == "SERVER"
    assert retried.status.status_code is StatusCode.UNSET
    assert "error.type" not in dict(retried.attributes or {})
    assert telemetry.one("invoke_agent agent-1").status.status_code is StatusCode.UNSET


async def test_tool_error_sets_error_status_on_the_tool_span_only(telemetry: Telemetry) -> None:
    """A raising tool and an unknown tool: their spans are ERROR with the result's code; the turn completes."""
    model = ScriptedModel(
        [
            Reply(ScriptedModel.call("explode", {"reason": "this"}), ScriptedModel.call("nope", {})),
            ScriptedModel.text("sorry"),
        ]
    )
    async with running(telemetry, model) as (ctx, _):
        ctx.tools.register(explode)
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("try it")
    assert outcome.kind == "completed"
    turn = telemetry.one("invoke_agent agent-1")
    exploded = telemetry.one("execute_tool explode")
    unknown = telemetry.one("execute_tool nope")
    for span, code in ((exploded, "TOOL_ERROR"), (unknown, "UNKNOWN_TOOL")):
        assert parent_of(span) == span_id(turn)
        assert span.status.status_code is StatusCode.ERROR
        assert dict(span.attributes or {})["error.type"] == code
    assert turn.status.status_code is StatusCode.UNSET
    assert dict(turn.attributes or {})["dsh.turn.end_reason"] == "completed"


async def test_cancel_while_streaming_ends_every_span_aborted(telemetry: Telemetry) -> None:
    """cancel() mid-stream: the chat span ends ERROR (ABORTED), the turn span ERROR with end_reason aborted."""
    model = ScriptedModel([ScriptedModel.hang("partial answer")], checkpoints=True)
    async with running(telemetry, model) as (ctx, recorder):
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            async with anyio.create_task_group() as tg:
                outcome: list[str] = []

                async def run() -> None:
                    outcome.append((await handle.agent.run("go")).kind)

                tg.start_soon(run)
                await recorder.wait_for("assistant/chunk")
                assert telemetry.finished() == []  # nothing ends before the cancel
                handle.agent.cancel()
    assert outcome == ["aborted"]
    assert telemetry.still_open() == []
    turn = telemetry.one("invoke_agent agent-1")
    chat = telemetry.one("chat deepseek-v4-flash")
    assert parent_of(chat) == span_id(turn)
    assert chat.status.status_code is StatusCode.ERROR
    assert dict(chat.attributes or {})["error.type"] == "ABORTED"
    assert turn.status.status_code is StatusCode.ERROR
    assert dict(turn.attributes or {})["dsh.turn.end_reason"] == "aborted"


async def test_cancel_during_a_tool_call_ends_the_tool_span_aborted(telemetry: Telemetry) -> None:
    """cancel() while a tool runs: its span ends ERROR with error.type ABORTED, then the turn's."""
    started = anyio.Event()

    @tool
    async def wait_forever(execution: ToolExecution) -> str:
        """Never returns on its own."""
        started.set()
        await anyio.sleep_forever()
        return "unreachable"

    model = ScriptedModel([ScriptedModel.tool_call("wait_forever")])
    async with running(telemetry, model) as (ctx, _):
        ctx.tools.register(wait_forever)
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            async with anyio.create_task_group() as tg:
                tg.start_soon(handle.agent.run, "go")
                await started.wait()
                handle.agent.cancel()
            await handle.agent.when_idle()
            assert telemetry.still_open() == []  # ended with the turn, not by the harness's stop
    turn = telemetry.one("invoke_agent agent-1")
    waited = telemetry.one("execute_tool wait_forever")
    assert parent_of(waited) == span_id(turn)
    assert waited.status.status_code is StatusCode.ERROR
    assert dict(waited.attributes or {})["error.type"] == "ABORTED"
    assert dict(turn.attributes or {})["dsh.turn.end_reason"] == "aborted"
    assert turn.status.status_code is StatusCode.ERROR


async def test_cancel_before_the_first_chunk_still_reports_the_request(telemetry: Telemetry) -> None:
    """A request cancelled before the model sent anything is a chat span too, ended ABORTED."""
    model = ScriptedModel([ScriptedModel.hang()], checkpoints=True)
    async with running(telemetry, model) as (ctx, recorder):
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            async with anyio.create_task_group() as tg:
                tg.start_soon(handle.agent.run, "go")
                await recorder.wait_for("request/header")
                handle.agent.cancel()
    chat = telemetry.one("chat deepseek-v4-flash")
    assert dict(chat.attributes or {})["error.type"] == "ABORTED"
    assert parent_of(chat) == span_id(telemetry.one("invoke_agent agent-1"))


async def test_disposal_mid_turn_ends_the_spans_disposed(telemetry: Telemetry) -> None:
    """Disposing the agent while its model streams ends the turn span (end_reason disposed, ERROR)."""
    model = ScriptedModel([ScriptedModel.hang("partial")], checkpoints=True)
    async with running(telemetry, model) as (ctx, recorder):
        handle = await ctx.agents.create("agent-1", agent_options=MODEL)
        handle.agent.send("go")
        await recorder.wait_for("assistant/chunk")
        await handle.dispose()
        assert telemetry.still_open() == []  # ended by the disposal, not the harness's stop
        turn = telemetry.one("invoke_agent agent-1")
    assert dict(turn.attributes or {})["dsh.turn.end_reason"] == "disposed"
    assert turn.status.status_code is StatusCode.ERROR
    assert dict(telemetry.one("chat deepseek-v4-flash").attributes or {})["error.type"] == "ABORTED"


async def test_harness_stop_mid_turn_leaves_no_span_open(telemetry: Telemetry) -> None:
    """Leaving the harness while a turn runs ends the turn and its request: nothing is left unexported."""
    model = ScriptedModel([ScriptedModel.hang("partial")], checkpoints=True)
    async with running(telemetry, model) as (ctx, recorder):
        handle = await ctx.agents.create("agent-1", agent_options=MODEL)
        handle.agent.send("go")
        await recorder.wait_for("assistant/chunk")
        assert telemetry.still_open() == ["invoke_agent agent-1"]
    assert telemetry.still_open() == []
    names = sorted(span.name for span in telemetry.finished())
    assert names == ["chat deepseek-v4-flash", "invoke_agent agent-1"]
    assert dict(telemetry.one("invoke_agent agent-1").attributes or {})["dsh.turn.end_reason"] == "disposed"


async def test_turns_are_numbered_and_each_is_its_own_trace(telemetry: Telemetry) -> None:
    """Two runs, two turn spans (dsh.turn 1 and 2), each a root of its own trace when no span is current."""
    model = ScriptedModel([ScriptedModel.text("one"), ScriptedModel.text("two")])
    async with running(telemetry, model) as (ctx, _):
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            await handle.agent.run("first")
            await handle.agent.run("second")
    turns = sorted(telemetry.named("invoke_agent agent-1"), key=lambda span: span.start_time or 0)
    assert [dict(span.attributes or {})["dsh.turn"] for span in turns] == [1, 2]
    assert trace_id(turns[0]) != trace_id(turns[1])
    assert all(parent_of(span) is None for span in turns)


async def test_a_stream_that_ends_without_a_finish_is_a_failed_request(telemetry: Telemetry) -> None:
    """A stream with no Finish (the runtime reports it as TRANSPORT): the request span and the turn carry that code."""
    model = ScriptedModel([ScriptedModel.no_finish("half an answer")])
    async with running(telemetry, model) as (ctx, _):
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("hello")
    assert outcome.kind == "error"
    chat = telemetry.one("chat deepseek-v4-flash")
    turn = telemetry.one("invoke_agent agent-1")
    assert dict(turn.attributes or {})["error.type"] == "TRANSPORT"
    assert dict(chat.attributes or {})["error.type"] == "TRANSPORT"
    assert chat.status.status_code is StatusCode.ERROR
    assert telemetry.still_open() == []


class FailsTheSecondStep:
    """A plugin whose bug ends the turn: it raises before the second step."""

    @hookimpl
    def dsh_agent_pre_step(self, agent: Any, turn: int, step: int, prefix: Any, signal: Any) -> None:
        if step == 2:
            raise RuntimeError("budget exceeded")


async def test_a_plugin_error_is_an_exception_event_on_the_turn(telemetry: Telemetry) -> None:
    """agent/error: the turn span ends ERROR (UNKNOWN) with the exception recorded; the first step's spans are intact."""
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 1, "b": 1}), ScriptedModel.text("never sent")])
    async with running(telemetry, model, plugins=[FailsTheSecondStep()]) as (ctx, _):
        ctx.tools.register(add)
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("go")
    assert outcome.kind == "error"
    assert telemetry.still_open() == []
    turn = telemetry.one("invoke_agent agent-1")
    assert turn.status.status_code is StatusCode.ERROR
    assert "RuntimeError: budget exceeded" in (turn.status.description or "")
    assert dict(turn.attributes or {})["error.type"] == "UNKNOWN"
    assert dict(turn.attributes or {})["dsh.turn.end_reason"] == "error"
    (event,) = turn.events
    assert event.name == "exception"
    assert dict(event.attributes or {})["exception.type"] == "RuntimeError"
    assert dict(event.attributes or {})["exception.message"] == "budget exceeded"
    chat = telemetry.one("chat deepseek-v4-flash")  # the second request was never made
    assert chat.status.status_code is StatusCode.UNSET
    assert telemetry.one("execute_tool add").status.status_code is StatusCode.UNSET


async def test_points_carry_no_exemplar_even_for_an_agent_made_inside_a_span(telemetry: Telemetry) -> None:
    """The agent's task inherits the span current where it was made; its points are not linked to that span.

    The SDK's default exemplar filter keeps an exemplar for a point recorded where a sampled span is
    current: the points are recorded in no span's context, so none points at an unrelated span.
    """
    tracer = telemetry.tracer_provider.get_tracer("app")
    model = ScriptedModel([ScriptedModel.text("done", usage=Usage(10, 2))])
    async with running(telemetry, model) as (ctx, _):
        with tracer.start_as_current_span("make the agent"):
            async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
                await handle.agent.run("hello")
    points = [
        *telemetry.points("gen_ai.client.token.usage"),
        *telemetry.points("gen_ai.client.operation.duration"),
    ]
    assert len(points) == 3
    assert [point.exemplars for point in points] == [[], [], []]
