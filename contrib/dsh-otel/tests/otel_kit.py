"""Helpers for the otel tests: fresh in-memory providers per test, a harness with the plugin, an event recorder."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs
from dsh_otel import OtelPlugin
from opentelemetry import context as otel_context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

from dsh_core import AgentOptions, Context, Harness, SessionEvent, hookimpl

MODEL = AgentOptions(model="deepseek/deepseek-v4-flash")


class OpenSpans(SpanProcessor):
    """Remembers the spans started and not yet ended: a span left open is never exported."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        self.open[span_id(span)] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        self.open.pop(span_id(span), None)


@attrs.define
class Telemetry:
    """Providers of this test only (never the process's globals) and what they collected."""

    tracer_provider: TracerProvider
    spans: InMemorySpanExporter
    meter_provider: MeterProvider
    metrics: InMemoryMetricReader
    started: OpenSpans

    @classmethod
    def fresh(cls, sampler: Sampler | None = None) -> Telemetry:
        spans = InMemorySpanExporter()
        started = OpenSpans()
        tracer_provider = TracerProvider(sampler=sampler)
        tracer_provider.add_span_processor(started)
        tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
        reader = InMemoryMetricReader()
        return cls(tracer_provider, spans, MeterProvider(metric_readers=[reader]), reader, started)

    def still_open(self) -> list[str]:
        """The names of the spans started and never ended."""
        return sorted(self.started.open.values())

    def plugin(self) -> OtelPlugin:
        return OtelPlugin(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.finished() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.finished()]}"
        return found[0]

    def points(self, metric: str) -> list[Any]:
        """The data points of ``metric`` collected so far."""
        data = self.metrics.get_metrics_data()
        found: list[Any] = []
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for item in scope.metrics:
                    if item.name == metric:
                        found.extend(item.data.data_points)
        return found

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan | Span) -> int:
    assert span.context is not None
    return span.context.span_id


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


class Recorder:
    """Hears every session event; a test waits on it instead of sleeping."""

    def __init__(self) -> None:
        self.events: list[tuple[str, SessionEvent]] = []
        self._changed = anyio.Event()

    @hookimpl
    def dsh_session_event(self, session: Any, event: SessionEvent) -> None:
        self.events.append((session.id, event))
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def wait_for(
        self, event_type: str, match: Callable[[SessionEvent], bool] = lambda _: True
    ) -> SessionEvent:
        seen = 0
        while True:
            changed = self._changed
            for _, event in self.events[seen:]:
                if event.type == event_type and match(event):
                    return event
            seen = len(self.events)
            await changed.wait()


@asynccontextmanager
async def running(
    telemetry: Telemetry,
    adapter: Any,
    *,
    plugins: Sequence[object] = (),
    config: Mapping[str, Any] | None = None,
) -> AsyncIterator[tuple[Context, Recorder]]:
    """A harness with the otel plugin reporting to ``telemetry`` and ``adapter`` as provider ``deepseek``."""
    recorder = Recorder()
    async with Harness(
        config=config, plugins=[telemetry.plugin(), recorder, *plugins], autoload=False
    ) as ctx:
        ctx.llm.register_adapter("deepseek", adapter)
        yield ctx, recorder
