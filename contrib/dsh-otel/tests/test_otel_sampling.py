"""Traces not recorded: the sampler drops them (the decision carried to sub-agents and bash) or no tracer is set up; metrics still count."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import anyio
import pytest
from dsh_otel import OtelPlugin
from dsh_subagents import SubagentsPlugin
from dsh_workspace import WorkspacePlugin
from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import Link, NoOpTracerProvider, SpanKind, TraceState, format_trace_id
from opentelemetry.util.types import Attributes

from dsh_core import Harness, tool
from dsh_core.llm import Usage
from dsh_core.session_log import ToolResultEvent
from dsh_core.testing import ScriptedModel

from .otel_kit import MODEL, Telemetry, running

pytestmark = pytest.mark.anyio


class DropsTheApplicationsRoot(Sampler):
    """Samples every root span but the application's ``app request``; children follow their parent."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        decision = Decision.DROP if name == "app request" else Decision.RECORD_AND_SAMPLE
        return SamplingResult(decision, attributes if decision.is_sampled() else None, trace_state)

    def get_description(self) -> str:
        return "DropsTheApplicationsRoot"


@pytest.fixture
def dropped() -> Iterator[Telemetry]:
    """Providers whose sampler drops the application's request, and so (parent-based) all under it."""
    collected = Telemetry.fresh(ParentBased(root=DropsTheApplicationsRoot()))
    yield collected
    collected.close()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_a_dropped_turn_exports_no_span_but_its_metrics(dropped: Telemetry) -> None:
    """A turn under a dropped span: no span of it is exported or left open; token usage and durations still count."""
    tracer = dropped.tracer_provider.get_tracer("app")
    model = ScriptedModel(
        [ScriptedModel.tool_call("add", {"a": 1, "b": 2}, usage=Usage(40, 4)), ScriptedModel.text("3", usage=Usage(50, 1))]
    )
    async with running(dropped, model, config={"plugins": {"otel": {"capture_content": True}}}) as (ctx, _):
        ctx.tools.register(add)
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            with tracer.start_as_current_span("app request"):
                outcome = await handle.agent.run("1 + 2?")
    assert outcome.text == "3"
    assert dropped.finished() == []
    assert dropped.still_open() == []
    tokens = {point.attributes["gen_ai.token.type"]: point.sum for point in dropped.points("gen_ai.client.token.usage")}
    assert tokens == {"input": 90, "output": 5}
    (duration,) = dropped.points("gen_ai.client.operation.duration")
    assert duration.count == 2


async def test_a_subagent_of_a_dropped_trace_is_dropped_too(dropped: Telemetry) -> None:
    """The task call's span is not recorded but still current: the child's turn joins the dropped trace, not a new one."""
    tracer = dropped.tracer_provider.get_tracer("app")
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("task", {"description": "count files", "prompt": "How many files?"}),
            ScriptedModel.text("There are 3 files."),  # the child
            ScriptedModel.text("The child says 3."),
            ScriptedModel.text("Still 3."),
        ]
    )
    async with running(dropped, model, plugins=[SubagentsPlugin()]) as (ctx, recorder):
        async with await ctx.agents.create("parent", agent_options=MODEL) as handle:
            with tracer.start_as_current_span("app request"), anyio.fail_after(10):
                outcome = await handle.agent.run("count them")
            await handle.agent.run("and now?")  # outside the application's span: a root, sampled
    assert outcome.text == "The child says 3."
    children = {session for session, event in recorder.events if event.type == "turn/start"} - {"parent"}
    assert len(children) == 1  # the child did run a turn
    assert [span.name for span in dropped.finished() if span.name.startswith("invoke_agent")] == [
        "invoke_agent parent"
    ]
    (turn,) = dropped.named("invoke_agent parent")
    assert dict(turn.attributes or {})["dsh.turn"] == 2


async def test_bash_gets_the_dropped_traces_context_unsampled(dropped: Telemetry, tmp_path: Path) -> None:
    """TRACEPARENT carries the application's trace with the sampled flag off, so a traced program drops it too."""
    tracer = dropped.tracer_provider.get_tracer("app")
    model = ScriptedModel(
        [ScriptedModel.tool_call("bash", {"command": 'printf "tp=%s" "$TRACEPARENT"'}), ScriptedModel.text("ok")]
    )
    async with running(dropped, model, plugins=[WorkspacePlugin()]) as (ctx, _):
        handle = await ctx.agents.create("agent-1", meta={"cwd": str(tmp_path)}, agent_options=MODEL)
        async with handle:
            with tracer.start_as_current_span("app request") as app_span:
                await handle.agent.run("show me")
            (result,) = [
                event.payload.message
                for event in handle.agent.session.events
                if isinstance(event.payload, ToolResultEvent)
            ]
    found = re.search(r"tp=00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})\b", result.text)
    assert found is not None, result.text
    trace_hex, span_hex, flags = found.groups()
    assert trace_hex == format_trace_id(app_span.get_span_context().trace_id)
    assert span_hex != f"{app_span.get_span_context().span_id:016x}"  # the tool call's own (unrecorded) span
    assert int(flags, 16) & 0x01 == 0  # not sampled
    assert dropped.finished() == []


async def test_with_no_tracer_set_up_the_metrics_are_still_recorded(telemetry: Telemetry) -> None:
    """The API's no-op tracer (no SDK for traces) with an SDK meter: no span is made, every point still is."""
    model = ScriptedModel(
        [ScriptedModel.tool_call("add", {"a": 1, "b": 2}, usage=Usage(40, 4)), ScriptedModel.text("3", usage=Usage(50, 1))]
    )
    plugin = OtelPlugin(tracer_provider=NoOpTracerProvider(), meter_provider=telemetry.meter_provider)
    async with Harness(plugins=[plugin], autoload=False) as ctx:
        ctx.llm.register_adapter("deepseek", model)
        ctx.tools.register(add)
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("1 + 2?")
    assert outcome.text == "3"
    assert telemetry.finished() == []
    tokens = {point.attributes["gen_ai.token.type"]: point.sum for point in telemetry.points("gen_ai.client.token.usage")}
    assert tokens == {"input": 90, "output": 5}
    (duration,) = telemetry.points("gen_ai.client.operation.duration")
    assert duration.count == 2
    assert duration.attributes["gen_ai.request.model"] == "deepseek-v4-flash"
