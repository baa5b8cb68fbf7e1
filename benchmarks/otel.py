"""Benchmark: what the ``otel`` plugin adds per tool step, against the same run without it.

Run: ``.venv/bin/python benchmarks/otel.py [--rounds N] [--backend asyncio|trio]``. Prints the
cost per tool step of each set-up and its ratio to the run without the plugin, measured in the
same process; asserts nothing. Every set-up's harness is open for the whole run and they take
turns in short slices (five turns of each kind, rotated), so the load of a shared machine hits
them alike; a round is eight slices of each, the ratio is taken within a round, and the median and
range over rounds are printed. A tool step is one model request (a chat span, three metric
points) and one tool call (an execute_tool span), against a zero-latency ScriptedModel and a trivial tool, so the figure is
the harness's own cost. Budget (issue 20): the SDK with a no-op exporter under 1.3x per tool step.

Times are the process's CPU time (``time.process_time``: every thread, so the batch processor's
worker counts), which the other work on a shared machine does not inflate as it does wall time.

Set-ups: ``sdk, batch`` is the production set-up (BatchSpanProcessor, whose exporter does
nothing here, and a MeterProvider whose reader is never collected); ``sdk, in-memory`` exports
every span synchronously to an InMemorySpanExporter (the tests' set-up); ``api no-op`` is the
plugin with no SDK configured (the ``global`` default in an application that set up nothing).

The floor: ``bare SDK calls from hooks`` is not the plugin but the least any plugin could do for
the same spans and points: a listener that makes exactly the SDK calls of a tool step, with
constant attributes (a span started with all of them and its times given, points recorded in an
explicit context), and around each tool call the one thing context propagation needs (the tool's
span made current, so a sub-agent nests under it), and nothing else.
``sdk, sampler drops every trace`` is the SDK with an ``ALWAYS_OFF`` sampler (no span records;
the metrics still do). Per streamed text chunk is printed too, for information (no budget).
``SDK calls alone`` times those same calls in a hot loop, with no harness at all: the SDK's own
cost per tool step. ``1 + alone/step`` is the lowest ratio any instrumentation emitting this span
set through the SDK can reach. ``--parts`` prints, instead, the hot-loop cost of each of those SDK
calls and of the SDK's steps inside them (the profile of the floor), and ``--in-loop`` the CPU
time of each of them made by the floor's listener from inside the loop, where they cost more.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio
from dsh_otel import OtelPlugin
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Histogram, NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracerProvider, SpanKind, set_span_in_context

from dsh_core import AgentOptions, Harness, SessionEvent, ToolExecution, ToolResult, hookimpl, tool
from dsh_core.llm import Usage
from dsh_core.testing import Reply, ScriptedModel

OPTIONS = AgentOptions(model="scripted/bench")
STEPS = 10
#: turns per slice (one agent each), and slices per round: a round is SLICES * PER_SLICE turns per kind
PER_SLICE = 5
SLICES = 8
HOT_LOOP = 2000
CHUNKS = 100

_POINTS = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted", "gen_ai.request.model": "bench"}
_INPUT_POINTS = {**_POINTS, "gen_ai.token.type": "input"}
_OUTPUT_POINTS = {**_POINTS, "gen_ai.token.type": "output"}
#: the context the plugin records its points in: no span (so no exemplar, and no lookup of the current one)
_NO_SPAN = set_span_in_context(trace.INVALID_SPAN, otel_context.Context())


def _chat_attributes(conversation: str) -> dict[str, Any]:
    """What the plugin puts on a tool step's chat span (7 attributes)."""
    return {
        **_POINTS,
        "gen_ai.conversation.id": conversation,
        "gen_ai.response.finish_reasons": ("tool_call",),
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 10,
    }


def _tool_attributes(call_id: str) -> dict[str, Any]:
    """What the plugin puts on an execute_tool span (4 attributes)."""
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "ping",
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


class NoOpExporter(SpanExporter):
    """Takes every batch and drops it."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _batch_providers() -> tuple[TracerProvider, MeterProvider]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(NoOpExporter()))
    return tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()])


class BareSdk:
    """Not the plugin: exactly the SDK calls of its spans and points, from the same hooks, and nothing else."""

    def __init__(self, tracer_provider: TracerProvider, meter_provider: MeterProvider) -> None:
        self.tracer = tracer_provider.get_tracer("bench")
        meter = meter_provider.get_meter("bench")
        self.tokens: Histogram = meter.create_histogram("gen_ai.client.token.usage")
        self.duration: Histogram = meter.create_histogram("gen_ai.client.operation.duration")
        self.turn: trace.Span | None = None
        self.parent: Any = None
        self.step_ns = 0
        self.tool: trace.Span | None = None

    @hookimpl
    def dsh_session_event(self, session: Any, event: SessionEvent) -> None:
        kind = event.type
        if kind == "step/start":
            self.step_ns = time.time_ns()
        elif kind == "assistant/message":
            end_ns = self.chat_span(session.id)
            self.points(end_ns)
        elif kind == "tool/call":
            self.tool = self.tool_span()
        elif kind == "tool/result":
            if self.tool is not None:
                self.end_tool(self.tool)
        elif kind == "turn/start":
            self.turn = self.tracer.start_span(f"invoke_agent {session.id}")
            self.parent = set_span_in_context(self.turn)
        elif kind == "turn/end" and self.turn is not None:
            self.turn.end()

    def chat_span(self, conversation: str) -> int:
        """The request's span, started and ended at once with its times; returns its end time."""
        span = self.tracer.start_span(
            "chat bench",
            context=self.parent,
            kind=SpanKind.CLIENT,
            attributes=_chat_attributes(conversation),
            start_time=self.step_ns,
        )
        end_ns = time.time_ns()
        span.end(end_time=end_ns)
        return end_ns

    def points(self, end_ns: int) -> None:
        """The request's three metric points: input and output tokens, duration."""
        self.tokens.record(100, _INPUT_POINTS, _NO_SPAN)
        self.tokens.record(10, _OUTPUT_POINTS, _NO_SPAN)
        self.duration.record((end_ns - self.step_ns) / 1e9, _POINTS, _NO_SPAN)

    def tool_span(self) -> trace.Span:
        """The tool call's span, started when the call is logged (it is current while the tool runs)."""
        attributes = _tool_attributes("call_1")
        return self.tracer.start_span("execute_tool ping", context=self.parent, attributes=attributes)

    def end_tool(self, span: trace.Span) -> None:
        """The tool call's span ends with its result."""
        span.end()

    @hookimpl(tryfirst=True)
    def dsh_tools_execute(
        self, execution: ToolExecution, call_next: Callable[[], Awaitable[ToolResult]]
    ) -> Awaitable[ToolResult]:
        """The tool's span is current while it runs: what it starts (a sub-agent) nests under it."""
        return self._in_span(call_next)

    async def _in_span(self, call_next: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
        token = otel_context.attach(set_span_in_context(self.tool or trace.INVALID_SPAN))
        try:
            return await call_next()
        finally:
            otel_context.detach(token)


#: what TimedBareSdk times, call by call
IN_LOOP = (
    "chat span: start_span + end",
    "the three histogram records",
    "tool span: start_span",
    "tool span: end",
    "tool span current: attach",
    "tool span current: detach",
)


class TimedBareSdk(BareSdk):
    """The floor with the thread's CPU time of each of its SDK calls added up: what they cost in the loop."""

    def __init__(self, tracer_provider: TracerProvider, meter_provider: MeterProvider) -> None:
        super().__init__(tracer_provider, meter_provider)
        self.totals = dict.fromkeys(IN_LOOP, 0)
        self.counts = dict.fromkeys(IN_LOOP, 0)

    def chat_span(self, conversation: str) -> int:
        start = time.thread_time_ns()
        end_ns = super().chat_span(conversation)
        self.add("chat span: start_span + end", start)
        return end_ns

    def points(self, end_ns: int) -> None:
        start = time.thread_time_ns()
        super().points(end_ns)
        self.add("the three histogram records", start)

    def tool_span(self) -> trace.Span:
        start = time.thread_time_ns()
        span = super().tool_span()
        self.add("tool span: start_span", start)
        return span

    def end_tool(self, span: trace.Span) -> None:
        start = time.thread_time_ns()
        super().end_tool(span)
        self.add("tool span: end", start)

    async def _in_span(self, call_next: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
        start = time.thread_time_ns()
        token = otel_context.attach(set_span_in_context(self.tool or trace.INVALID_SPAN))
        self.add("tool span current: attach", start)
        try:
            return await call_next()
        finally:
            start = time.thread_time_ns()
            otel_context.detach(token)
            self.add("tool span current: detach", start)

    def add(self, name: str, start: int) -> None:
        self.totals[name] += time.thread_time_ns() - start
        self.counts[name] += 1

    def reset(self) -> None:
        self.totals = dict.fromkeys(IN_LOOP, 0)
        self.counts = dict.fromkeys(IN_LOOP, 0)

    def per_call(self) -> dict[str, float]:
        """Nanoseconds per call of each timed call since the last reset."""
        return {name: total / max(self.counts[name], 1) for name, total in self.totals.items()}


Setup = Callable[[], tuple[list[object], Callable[[], None]]]


def sdk_batch() -> tuple[list[object], Callable[[], None]]:
    tracer_provider, meter_provider = _batch_providers()

    def close() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return [OtelPlugin(tracer_provider=tracer_provider, meter_provider=meter_provider)], close


def sdk_in_memory() -> tuple[list[object], Callable[[], None]]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

    def close() -> None:
        exporter.clear()
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return [OtelPlugin(tracer_provider=tracer_provider, meter_provider=meter_provider)], close


def sdk_dropped() -> tuple[list[object], Callable[[], None]]:
    tracer_provider = TracerProvider(sampler=ALWAYS_OFF)
    tracer_provider.add_span_processor(BatchSpanProcessor(NoOpExporter()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

    def close() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return [OtelPlugin(tracer_provider=tracer_provider, meter_provider=meter_provider)], close


def api_noop() -> tuple[list[object], Callable[[], None]]:
    return [OtelPlugin(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())], lambda: None


def bare_sdk() -> tuple[list[object], Callable[[], None]]:
    tracer_provider, meter_provider = _batch_providers()

    def close() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return [BareSdk(tracer_provider, meter_provider)], close


def without() -> tuple[list[object], Callable[[], None]]:
    return [], lambda: None


BASE = "without the plugin"
SETUPS: dict[str, Setup] = {
    BASE: without,
    "sdk, batch, no-op exporter": sdk_batch,
    "sdk, in-memory exporter": sdk_in_memory,
    "sdk, sampler drops every trace": sdk_dropped,
    "api no-op (no sdk)": api_noop,
    "floor: bare SDK calls from hooks": bare_sdk,
}


class Runner:
    """One set-up's harness, open for the whole run, that plays slices of turns on demand."""

    def __init__(self, ctx: Any, model: ScriptedModel) -> None:
        self.ctx = ctx
        self.model = model
        self.agents = 0

    async def seconds(self, replies: list[Reply], turns: int) -> float:
        """CPU seconds of ``turns`` turns playing ``replies`` on a fresh agent (GC paused while timing)."""
        self.agents += 1
        async with await self.ctx.agents.create(f"bench-{self.agents}", agent_options=OPTIONS) as handle:
            self.model.add(*(replies * turns))
            gc.disable()
            start = time.process_time()
            for _ in range(turns):
                await handle.agent.run("go")
            elapsed = time.process_time() - start
            gc.enable()
        return elapsed


def _instruments(
    tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> tuple[trace.Tracer, Histogram, Histogram, trace.Span, otel_context.Context]:
    """A tracer, the two histograms, and an open turn span with its context: what the hot loops call."""
    tracer = tracer_provider.get_tracer("bench")
    meter = meter_provider.get_meter("bench")
    tokens = meter.create_histogram("gen_ai.client.token.usage")
    duration = meter.create_histogram("gen_ai.client.operation.duration")
    turn = tracer.start_span("invoke_agent bench")
    return tracer, tokens, duration, turn, set_span_in_context(turn)


def sdk_calls_alone() -> float:
    """CPU seconds of the SDK calls one tool step makes (two spans, three points), in a hot loop."""
    tracer_provider, meter_provider = _batch_providers()
    tracer, tokens, duration, turn, parent = _instruments(tracer_provider, meter_provider)
    gc.disable()
    start = time.process_time()
    for _ in range(HOT_LOOP):
        start_ns = time.time_ns()
        span = tracer.start_span(
            "chat bench",
            context=parent,
            kind=SpanKind.CLIENT,
            attributes=_chat_attributes("bench-0"),
            start_time=start_ns,
        )
        end_ns = time.time_ns()
        span.end(end_time=end_ns)
        tokens.record(100, _INPUT_POINTS, _NO_SPAN)
        tokens.record(10, _OUTPUT_POINTS, _NO_SPAN)
        duration.record((end_ns - start_ns) / 1e9, _POINTS, _NO_SPAN)
        tool = tracer.start_span("execute_tool ping", context=parent, attributes=_tool_attributes("call_1"))
        otel_context.detach(otel_context.attach(set_span_in_context(tool)))
        tool.end()
    elapsed = (time.process_time() - start) / HOT_LOOP
    gc.enable()
    turn.end()
    tracer_provider.shutdown()
    meter_provider.shutdown()
    return elapsed


async def sdk_calls_in_loop(rounds: int = 9, turns: int = 30) -> None:
    """Print the CPU time of each SDK call of the floor made from inside the loop, and in a hot loop.

    Both are timed by the same wrapper (a clock reading on each side, included in both), in
    alternating slices: ``turns`` tool turns, then as many tool steps back to back, per round; the
    ratio is taken within a round and the medians printed. The same calls cost more between the
    loop's own work than back to back.
    """
    tracer_provider, meter_provider = _batch_providers()
    timed = TimedBareSdk(tracer_provider, meter_provider)
    usage = Usage(100, 10)
    tool_turn = [ScriptedModel.tool_call("ping", usage=usage)] * (STEPS - 1) + [ScriptedModel.text("done", usage=usage)]
    turn = tracer_provider.get_tracer("bench").start_span("invoke_agent bench")
    hot_parent = set_span_in_context(turn)
    costs: dict[str, list[tuple[float, float]]] = {name: [] for name in IN_LOOP}
    async with Harness(autoload=False, plugins=[timed]) as ctx:
        model = ScriptedModel()
        ctx.llm.register_adapter("scripted", model)
        ctx.tools.register(ping)
        runner = Runner(ctx, model)
        await runner.seconds(tool_turn, PER_SLICE * 2)  # warm-up
        for _ in range(rounds):
            timed.reset()
            for _ in range(turns // PER_SLICE):
                await runner.seconds(tool_turn, PER_SLICE)
            in_loop = timed.per_call()
            timed.reset()
            timed.parent = hot_parent
            gc.disable()
            for _ in range(turns * STEPS):
                timed.step_ns = time.time_ns()
                timed.points(timed.chat_span("bench-0"))
                timed.tool = timed.tool_span()
                start = time.thread_time_ns()
                token = otel_context.attach(set_span_in_context(timed.tool))
                timed.add("tool span current: attach", start)
                start = time.thread_time_ns()
                otel_context.detach(token)
                timed.add("tool span current: detach", start)
                timed.end_tool(timed.tool)
            gc.enable()
            for name, hot in timed.per_call().items():
                costs[name].append((in_loop[name], hot))
    turn.end()
    tracer_provider.shutdown()
    meter_provider.shutdown()
    print(f"{'SDK call of the floor (us per call)':40} {'in the loop':>12} {'hot loop':>10} {'ratio':>7}")
    for name, pairs in costs.items():
        loop_us = statistics.median(pair[0] for pair in pairs) / 1e3
        hot_us = statistics.median(pair[1] for pair in pairs) / 1e3
        ratio = statistics.median(pair[0] / pair[1] for pair in pairs)
        print(f"{name:40} {loop_us:12.2f} {hot_us:10.2f} {ratio:6.2f}x")


def sdk_parts(rounds: int = 5, calls: int = 20000) -> None:
    """Print the hot-loop CPU cost of each SDK call of a tool step, and of the SDK's steps inside them.

    The parts are timed through the SDK's own (private) pieces, as a profile would attribute them:
    for reading where the floor's time goes, not a contract.
    """
    from opentelemetry.attributes import BoundedAttributes
    from opentelemetry.sdk.metrics._internal._view_instrument_match import _hash_attributes
    from opentelemetry.sdk.metrics._internal.measurement import Measurement

    tracer_provider, meter_provider = _batch_providers()
    tracer, tokens, duration, turn, parent = _instruments(tracer_provider, meter_provider)
    chat, tool_ = _chat_attributes("bench-0"), _tool_attributes("call_1")
    sampler, ids = tracer_provider.sampler, tracer_provider.id_generator

    def attach_detach() -> None:
        otel_context.detach(otel_context.attach(set_span_in_context(turn)))

    parts: dict[str, Callable[[], object]] = {
        "chat span: start_span(7 attributes, start_time) + end(end_time)": lambda: tracer.start_span(
            "chat bench", context=parent, kind=SpanKind.CLIENT, attributes=chat, start_time=1
        ).end(end_time=2),
        "tool span: start_span(4 attributes) + end": lambda: tracer.start_span(
            "execute_tool ping", context=parent, attributes=tool_
        ).end(),
        "  a span with no attribute: start_span + end": lambda: tracer.start_span("x", context=parent).end(),
        "  a span with no attribute: start_span only": lambda: tracer.start_span("x", context=parent),
        "  attribute validation, 7 attributes (BoundedAttributes)": lambda: BoundedAttributes(
            128, chat, immutable=False
        ),
        "  attribute validation, 4 attributes (BoundedAttributes)": lambda: BoundedAttributes(
            128, tool_, immutable=False
        ),
        "  the sampler (ParentBased(ALWAYS_ON).should_sample)": lambda: sampler.should_sample(
            parent, 1, "x", SpanKind.INTERNAL, chat, ()
        ),
        "  a span id (RandomIdGenerator)": ids.generate_span_id,
        "histogram record, 4 attributes": lambda: tokens.record(100, _INPUT_POINTS, _NO_SPAN),
        "histogram record, 3 attributes": lambda: duration.record(0.5, _POINTS, _NO_SPAN),
        "  Measurement(...): attributes cleaned": lambda: Measurement(100, 1, tokens, _NO_SPAN, _INPUT_POINTS),
        "  the aggregation key (_hash_attributes, 4 attributes)": lambda: _hash_attributes(_INPUT_POINTS),
        "context attach + detach (the tool span current)": attach_detach,
    }
    costs: dict[str, list[float]] = {name: [] for name in parts}
    for _ in range(rounds):
        for name, call in parts.items():
            for _ in range(calls // 20):  # warm
                call()
            gc.disable()
            start = time.process_time()
            for _ in range(calls):
                call()
            costs[name].append((time.process_time() - start) / calls)
            gc.enable()
    turn.end()
    tracer_provider.shutdown()
    meter_provider.shutdown()
    print(f"{'SDK call (hot loop; indented: steps inside the call above)':66} {'us / call':>10}")
    for name, values in costs.items():
        print(f"{name:66} {statistics.median(values) * 1e6:10.2f}")


async def main(rounds: int) -> None:
    usage = Usage(100, 10)
    text_turn = [ScriptedModel.text("done", usage=usage)]
    tool_turn = [ScriptedModel.tool_call("ping", usage=usage)] * (STEPS - 1) + text_turn
    long_turn = [ScriptedModel.text("a" * CHUNKS, chunks=CHUNKS, usage=usage)]
    names = list(SETUPS)
    costs: dict[str, list[float]] = {name: [] for name in [*names, "SDK calls alone"]}
    chunks: dict[str, list[float]] = {name: [] for name in names}
    async with AsyncExitStack() as stack:
        runners: dict[str, Runner] = {}
        for name, setup in SETUPS.items():  # every set-up open at once, so their slices can alternate
            plugins, close = setup()
            stack.callback(close)
            ctx = await stack.enter_async_context(Harness(autoload=False, plugins=plugins))
            model = ScriptedModel()
            ctx.llm.register_adapter("scripted", model)
            ctx.tools.register(ping)
            runners[name] = Runner(ctx, model)
        for _ in range(2):  # warm-up: the first turns of a harness pay for caches and first imports
            for runner in runners.values():
                await runner.seconds(tool_turn, PER_SLICE)
        for index in range(rounds):
            gc.collect()  # between rounds, never while timing
            sums = {name: [0.0, 0.0, 0.0] for name in names}  # text, tool, long turns
            for slice_ in range(SLICES):  # short slices, alternated and rotated: load hits every set-up alike
                shift = (index * SLICES + slice_) % len(names)
                for name in names[shift:] + names[:shift]:
                    runner, total = runners[name], sums[name]
                    total[0] += await runner.seconds(text_turn, PER_SLICE)
                    total[1] += await runner.seconds(tool_turn, PER_SLICE)
                    total[2] += await runner.seconds(long_turn, PER_SLICE)
            turns = SLICES * PER_SLICE
            for name, (text, tools, long) in sums.items():
                costs[name].append((tools - text) / turns / (STEPS - 1))
                chunks[name].append((long - text) / turns / (CHUNKS - 1))
            costs["SDK calls alone"].append(sdk_calls_alone())
    base = costs[BASE]
    print(f"{'set-up':34} {'per tool step':>14} {'ratio (median, range)':>24}   budget: sdk < 1.3x")
    for name, values in costs.items():
        ratios = [value / base[round_] for round_, value in enumerate(values)]
        median = statistics.median(ratios)
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
        label = f"{'+' if name == 'SDK calls alone' else ''}{median:.2f}x ({spread})"
        print(f"{name:34} {statistics.median(values) * 1e6:11.1f} us {label:>24}")
    print(f"per streamed text chunk (a {CHUNKS}-chunk answer against a 1-chunk one; not budgeted):")
    for name, values in chunks.items():
        ratios = [value / chunks[BASE][round_] for round_, value in enumerate(values)]
        print(f"  {name:32} {statistics.median(values) * 1e6:9.2f} us {statistics.median(ratios):6.2f}x")
    floors = [1 + alone / step for alone, step in zip(costs["SDK calls alone"], base, strict=True)]
    print(
        f"floor for this span set through the SDK: 1 + alone/step = {statistics.median(floors):.2f}x "
        f"({min(floors):.2f}-{max(floors):.2f})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=15, help="rounds (default 15)")
    parser.add_argument("--backend", choices=("asyncio", "trio"), action="append", help="default: both")
    parser.add_argument("--parts", action="store_true", help="print the SDK calls' cost, part by part, only")
    parser.add_argument("--in-loop", action="store_true", help="print the floor's SDK calls' cost in the loop, only")
    args = parser.parse_args()
    if args.parts:
        sdk_parts()
        raise SystemExit
    if args.in_loop:
        for backend in args.backend or ("asyncio", "trio"):
            print(f"--- {backend}")
            anyio.run(sdk_calls_in_loop, backend=backend)
        raise SystemExit
    for backend in args.backend or ("asyncio", "trio"):
        print(f"--- {backend}")
        anyio.run(main, args.rounds, backend=backend)
