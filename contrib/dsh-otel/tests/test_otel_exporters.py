"""The exporters: OTLP/HTTP to a real loopback receiver, the console, the process's global providers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from dsh_otel import OtelPlugin
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from dsh_core import ConfigError, Harness, tool
from dsh_core.llm import Usage
from dsh_core.testing import ScriptedModel

from .otel_kit import MODEL

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Receiver:
    """An OTLP/HTTP receiver on loopback: keeps every request's path, headers and body."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.requests.append((self.path, dict(self.headers.items()), body))
                reply = (
                    ExportTraceServiceResponse()
                    if self.path == "/v1/traces"
                    else ExportMetricsServiceResponse()
                ).SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def spans(self) -> list[tuple[dict[str, Any], ProtoSpan]]:
        """Every span received, with its resource's attributes."""
        found = []
        for path, _, body in self.requests:
            if path != "/v1/traces":
                continue
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    found.extend((resource, span) for span in scope_spans.spans)
        return found

    def histograms(self) -> dict[tuple[str, str | None], tuple[int, float]]:
        """(count, sum) of every histogram point received, by metric name and token type."""
        found: dict[tuple[str, str | None], tuple[int, float]] = {}
        for path, _, body in self.requests:
            if path != "/v1/metrics":
                continue
            request = ExportMetricsServiceRequest.FromString(body)
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        for point in metric.histogram.data_points:
                            token_type = _attributes(point.attributes).get("gen_ai.token.type")
                            found[metric.name, token_type] = (point.count, point.sum)
        return found

    def metric_names(self) -> set[str]:
        names = set()
        for path, _, body in self.requests:
            if path == "/v1/metrics":
                request = ExportMetricsServiceRequest.FromString(body)
                for resource_metrics in request.resource_metrics:
                    for scope_metrics in resource_metrics.scope_metrics:
                        names.update(metric.name for metric in scope_metrics.metrics)
        return names


def _attributes(pairs: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    pair: KeyValue
    for pair in pairs:
        kind = pair.value.WhichOneof("value")
        if kind == "array_value":
            values[pair.key] = [
                getattr(item, item.WhichOneof("value")) for item in pair.value.array_value.values
            ]
        else:
            values[pair.key] = getattr(pair.value, kind) if kind else None
    return values


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    collector = Receiver()
    collector.thread.start()
    try:
        yield collector
    finally:
        collector.server.shutdown()
        collector.server.server_close()
        collector.thread.join(timeout=5)


async def test_otlp_exporter_sends_protobuf_to_the_receiver(receiver: Receiver) -> None:
    """exporter = "otlp": the spans (with service.name) and both histograms reach /v1/traces and /v1/metrics."""
    config = {
        "plugins": {
            "otel": {
                "exporter": "otlp",
                "endpoint": receiver.url,
                "service_name": "checkout-agent",
                "headers": {"x-api-key": "k-123"},
            }
        }
    }
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("add", {"a": 1, "b": 2}, usage=Usage(50, 5)),
            ScriptedModel.text("3", usage=Usage(60, 1)),
        ]
    )
    async with Harness(config=config, plugins=[OtelPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("deepseek", model)
        ctx.tools.register(add)
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            await handle.agent.run("1 + 2?")
    # Stopping the harness flushed the plugin's exporters: everything has arrived.
    received = receiver.spans()
    names = sorted(span.name for _, span in received)
    assert names == [
        "chat deepseek-v4-flash",
        "chat deepseek-v4-flash",
        "execute_tool add",
        "invoke_agent agent-1",
    ]
    assert {resource["service.name"] for resource, _ in received} == {"checkout-agent"}
    by_name = {span.name: span for _, span in received}
    turn = by_name["invoke_agent agent-1"]
    assert _attributes(turn.attributes)["dsh.turn.end_reason"] == "completed"
    assert _attributes(turn.attributes)["dsh.turn"] == 1
    chat = by_name["chat deepseek-v4-flash"]
    assert chat.kind == ProtoSpan.SpanKind.SPAN_KIND_CLIENT
    assert chat.parent_span_id == turn.span_id
    assert by_name["execute_tool add"].parent_span_id == turn.span_id
    assert _attributes(by_name["execute_tool add"].attributes)["gen_ai.tool.name"] == "add"
    assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"} <= receiver.metric_names()
    histograms = receiver.histograms()  # cumulative: the last export holds every point
    assert histograms["gen_ai.client.token.usage", "input"] == (2, 110)
    assert histograms["gen_ai.client.token.usage", "output"] == (2, 6)
    assert histograms["gen_ai.client.operation.duration", None][0] == 2
    headers = [headers for path, headers, _ in receiver.requests if path == "/v1/traces"]
    assert headers
    assert all(h.get("x-api-key") == "k-123" for h in headers)
    assert all(h.get("content-type", h.get("Content-Type")) == "application/x-protobuf" for h in headers), (
        headers
    )


async def test_console_exporter_prints_the_spans(capsys: pytest.CaptureFixture[str]) -> None:
    """exporter = "console": the spans are printed as JSON when the harness stops."""
    config = {"plugins": {"otel": {"exporter": "console", "service_name": "cli"}}}
    async with Harness(config=config, plugins=[OtelPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("deepseek", ScriptedModel([ScriptedModel.text("hi")]))
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            await handle.agent.run("hello")
    out = capsys.readouterr().out
    assert '"name": "invoke_agent agent-1"' in out
    assert '"name": "chat deepseek-v4-flash"' in out
    assert '"service.name": "cli"' in out


def test_global_mode_reports_to_the_applications_providers() -> None:
    """exporter = "global" (the default): an application's own SDK set-up receives dsh's spans and metrics.

    Run in a fresh interpreter: the global providers can be set only once per process.
    """
    script = textwrap.dedent(
        """
        import json
        import anyio
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from dsh_core import AgentOptions, Harness
        from dsh_core.llm import Usage
        from dsh_core.testing import ScriptedModel
        from dsh_otel import OtelPlugin

        spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(provider)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

        async def main():
            tracer = trace.get_tracer("app")
            async with Harness(plugins=[OtelPlugin()], autoload=False) as ctx:
                model = ScriptedModel([ScriptedModel.text("hi", usage=Usage(10, 2))])
                ctx.llm.register_adapter("deepseek", model)
                options = AgentOptions(model="deepseek/deepseek-v4-flash")
                async with await ctx.agents.create("agent-1", agent_options=options) as handle:
                    with tracer.start_as_current_span("app request"):
                        await handle.agent.run("hello")
            names = {}
            for span in spans.get_finished_spans():
                names[span.name] = span.parent.span_id if span.parent else None
            app = [s for s in spans.get_finished_spans() if s.name == "app request"][0]
            metric_names = sorted(
                m.name
                for rm in reader.get_metrics_data().resource_metrics
                for sm in rm.scope_metrics
                for m in sm.metrics
            )
            print(json.dumps({
                "turn_parent_is_app": names["invoke_agent agent-1"] == app.context.span_id,
                "names": sorted(names),
                "metrics": metric_names,
            }))

        anyio.run(main)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {
        "turn_parent_is_app": True,
        "names": ["app request", "chat deepseek-v4-flash", "invoke_agent agent-1"],
        "metrics": ["gen_ai.client.operation.duration", "gen_ai.client.token.usage"],
    }


@pytest.mark.parametrize(
    ("table", "path", "words"),
    [
        ({"exporter": "zipkin"}, "plugins.otel.exporter", "zipkin"),
        ({"endpoint": "localhost:4318"}, "plugins.otel", "http:// or https://"),
        ({"service_name": " "}, "plugins.otel", "service_name"),
        ({"capture_content": "yes"}, "plugins.otel.capture_content", "bool"),
        ({"verbose": True}, "plugins.otel", "verbose"),
    ],
)
async def test_bad_configuration_is_refused_at_start(table: dict[str, Any], path: str, words: str) -> None:
    """A wrong [plugins.otel] value is a ConfigError naming the key, raised when the harness starts."""
    with pytest.raises(ConfigError) as caught:
        async with Harness(config={"plugins": {"otel": table}}, plugins=[OtelPlugin()], autoload=False):
            pass
    assert caught.value.path.startswith(path)
    assert words in str(caught.value)
