"""Where the telemetry goes: the tracer and meter providers for each ``exporter`` setting.

``global`` uses the process's providers (an application's own OpenTelemetry set-up, or the API's
no-op ones), so only ``opentelemetry-api`` is needed. ``otlp`` and ``console`` build SDK providers
of their own, with the configured ``service_name``, which the plugin shuts down (flushing what is
left) when it stops; they need the ``otlp`` / ``console`` extras.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import attrs
from opentelemetry import metrics, trace

from dsh_core import ConfigError

from ._config import OtelConfig

__all__ = ["Providers", "providers_for"]


@attrs.frozen
class Providers:
    """The providers the plugin reports to, and how to flush and close the ones it made."""

    tracer_provider: trace.TracerProvider
    meter_provider: metrics.MeterProvider
    #: flushes and closes the providers the plugin made itself; nothing for given or global ones
    shutdown: Callable[[], None] = attrs.field(default=lambda: None)


def providers_for(config: OtelConfig) -> Providers:
    """The providers ``config.exporter`` names. :raises ConfigError: when the SDK is not installed."""
    if config.exporter == "global":
        return Providers(trace.get_tracer_provider(), metrics.get_meter_provider())
    try:
        return _sdk_providers(config)
    except ImportError as exc:
        extra = "otlp" if config.exporter == "otlp" else "console"
        msg = (
            f"plugins.otel.exporter: {config.exporter!r} needs the OpenTelemetry SDK and exporters, "
            f"which are not installed ({exc.name or exc}); install them with: pip install 'dsh-harness-otel[{extra}]'"
        )
        raise ConfigError(msg, path="plugins.otel.exporter") from exc


def _sdk_providers(config: OtelConfig) -> Providers:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

    span_exporter: SpanExporter
    metric_exporter: MetricExporter
    if config.exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        headers = dict(config.headers) or None
        if config.endpoint is None:  # the exporters' defaults and OTEL_EXPORTER_OTLP_* variables
            span_exporter = OTLPSpanExporter(headers=headers)
            metric_exporter = OTLPMetricExporter(headers=headers)
        else:
            base = config.endpoint.rstrip("/")
            span_exporter = OTLPSpanExporter(endpoint=f"{base}/v1/traces", headers=headers)
            metric_exporter = OTLPMetricExporter(endpoint=f"{base}/v1/metrics", headers=headers)
    else:
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        # sys.stdout as it is now, not as it was when the SDK was imported (its default)
        span_exporter = ConsoleSpanExporter(out=sys.stdout)
        metric_exporter = ConsoleMetricExporter(out=sys.stdout)
    resource = Resource.create({SERVICE_NAME: config.service_name})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    reader = PeriodicExportingMetricReader(metric_exporter)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])

    def shutdown() -> None:
        tracer_provider.shutdown()  # ends with a flush of the batch
        meter_provider.shutdown()  # collects and exports once more

    return Providers(tracer_provider, meter_provider, shutdown)
