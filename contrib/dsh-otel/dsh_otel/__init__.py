"""dsh plugin that reports every agent's turns, model requests and tool calls to OpenTelemetry.

Load the ``otel`` plugin (entry point) and tune it in ``[plugins.otel]``. Spans and metrics follow
the OpenTelemetry GenAI semantic conventions; only ``opentelemetry-api`` is required (the
``otlp`` and ``console`` exporters come with the extras of the same names).
"""

from ._config import OtelConfig as OtelConfig
from ._plugin import OtelPlugin as OtelPlugin

__all__ = ["OtelConfig", "OtelPlugin"]
