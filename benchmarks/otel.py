"""Benchmark: what the ``otel`` plugin adds per tool step, against the same run without it.

Run: ``.venv/bin/python benchmarks/otel.py``. Prints us per tool step and the ratio to the run
without the plugin, measured in the same process; asserts nothing. A tool step here is one model
request (a chat span, two metric points) and one tool call (an execute_tool span), against a
zero-latency ScriptedModel and a trivial tool, so the figure is the harness's own cost. Budget: the
SDK with a no-op exporter costs under 1.3x per tool step.

Times are the process's CPU time (``time.process_time``: every thread, so the batch processor's
worker counts), which the other work on a shared machine does not inflate as it does wall time.

Configurations: ``sdk, batch`` is the production set-up (BatchSpanProcessor, whose exporter
does nothing here, and a MeterProvider whose reader is never collected); ``sdk, in-memory`` exports
every span synchronously to an InMemorySpanExporter (the tests' set-up); ``api no-op`` is the
plugin with no SDK configured (the ``global`` default in an application that set up nothing).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence

import anyio
from dsh_otel import OtelPlugin
from opentelemetry.metrics import NoOpMeterProvider
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
from opentelemetry.trace import NoOpTracerProvider, set_span_in_context

from dsh_core import AgentOptions, Harness, tool
from dsh_core.llm import Usage
from dsh_core.testing import Reply, ScriptedModel

OPTIONS = AgentOptions(model="scripted/bench")
STEPS = 10
TURNS = 100
PER_AGENT = 25
REPEATS = 7


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


class NoOpExporter(SpanExporter):
    """Takes every batch and drops it."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def sdk_batch() -> tuple[list[object], Callable[[], None]]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(NoOpExporter()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

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


def api_noop() -> tuple[list[object], Callable[[], None]]:
    return [
        OtelPlugin(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())
    ], lambda: None


def without() -> tuple[list[object], Callable[[], None]]:
    return [], lambda: None


SETUPS: dict[str, Callable[[], tuple[list[object], Callable[[], None]]]] = {
    "without the plugin": without,
    "sdk, batch, no-op exporter": sdk_batch,
    "sdk, in-memory exporter": sdk_in_memory,
    "api no-op (no sdk)": api_noop,
}


async def per_turn(replies: list[Reply], plugins: list[object]) -> float:
    """Seconds per turn playing ``replies`` (GC paused while timing), over TURNS turns."""
    model = ScriptedModel()
    elapsed = 0.0
    async with Harness(autoload=False, plugins=plugins) as ctx:
        ctx.llm.register_adapter("scripted", model)
        ctx.tools.register(ping)
        for batch in range(TURNS // PER_AGENT):
            async with await ctx.agents.create(f"bench-{batch}", agent_options=OPTIONS) as handle:
                model.add(*(replies * PER_AGENT))
                gc.disable()
                start = time.process_time()
                for _ in range(PER_AGENT):
                    await handle.agent.run("go")
                elapsed += time.process_time() - start
                gc.enable()
    return elapsed / TURNS


def sdk_calls_alone() -> float:
    """CPU seconds of the SDK calls one tool step makes (two spans, three points), in a hot loop."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(NoOpExporter()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    tracer = tracer_provider.get_tracer("bench")
    meter = meter_provider.get_meter("bench")
    tokens = meter.create_histogram("gen_ai.client.token.usage")
    duration = meter.create_histogram("gen_ai.client.operation.duration")
    turn = tracer.start_span("invoke_agent bench")
    parent = set_span_in_context(turn)
    base = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "bench",
    }
    inputs, outputs = {**base, "gen_ai.token.type": "input"}, {**base, "gen_ai.token.type": "output"}
    best = float("inf")
    for _ in range(REPEATS):
        start = time.process_time()
        for _ in range(2000):
            now = time.time_ns()
            chat = {
                **base,
                "gen_ai.conversation.id": "bench-0",
                "gen_ai.response.finish_reasons": ("tool_call",),
                "gen_ai.usage.input_tokens": 100,
                "gen_ai.usage.output_tokens": 10,
            }
            tracer.start_span("chat bench", context=parent, attributes=chat, start_time=now).end()
            tokens.record(100, inputs)
            tokens.record(10, outputs)
            duration.record(0.001, base)
            tool_attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "ping",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.type": "function",
            }
            tracer.start_span("execute_tool ping", context=parent, attributes=tool_attributes).end()
        best = min(best, (time.process_time() - start) / 2000)
    turn.end()
    tracer_provider.shutdown()
    meter_provider.shutdown()
    return best


async def main() -> None:
    usage = Usage(100, 10)
    text_turn = [ScriptedModel.text("done", usage=usage)]
    tool_turn = [ScriptedModel.tool_call("ping", usage=usage)] * (STEPS - 1) + text_turn
    best: dict[str, float] = dict.fromkeys(SETUPS, float("inf"))
    for _ in range(REPEATS):  # interleaved, so load on the machine hits every set-up alike
        for name, setup in SETUPS.items():
            plugins, close = setup()
            try:
                text = await per_turn(text_turn, plugins)
                tools = await per_turn(tool_turn, plugins)
            finally:
                close()
            best[name] = min(best[name], (tools - text) / (STEPS - 1))
    base = best["without the plugin"]
    print(f"{'set-up':28} {'per tool step':>14} {'ratio':>7}   (budget: sdk < 1.3x)")
    for name, cost in best.items():
        print(f"{name:28} {cost * 1e6:11.1f} us {cost / base:6.2f}x")
    alone = sdk_calls_alone()
    print(
        f"the SDK calls of one tool step alone, in a hot loop: {alone * 1e6:.1f} us ({alone / base:.2f}x of a step)"
    )


if __name__ == "__main__":
    for backend in ("asyncio", "trio"):
        print(f"--- {backend}")
        anyio.run(main, backend=backend)
