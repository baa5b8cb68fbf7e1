"""Configuration of the ``otel`` plugin: the ``[plugins.otel]`` table (SPEC §9.5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs

__all__ = ["Exporter", "OtelConfig"]

#: where the spans and metrics go: the process's global providers, an OTLP/HTTP receiver, stdout
Exporter: TypeAlias = Literal["global", "otlp", "console"]


def _endpoint(instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and not value.startswith(("http://", "https://")):
        msg = f"endpoint must be an http:// or https:// URL (like 'http://localhost:4318'), got {value!r}"
        raise ValueError(msg)


def _service_name(instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value.strip():
        msg = "service_name must be a non-empty string (the service.name of the spans' resource)"
        raise ValueError(msg)


def _frozen_headers(value: Mapping[str, str]) -> Mapping[str, str]:
    return dict(value)


@attrs.frozen(kw_only=True)
class OtelConfig:
    """The ``[plugins.otel]`` table."""

    #: ``global`` (the application's own providers), ``otlp`` (OTLP over HTTP/protobuf) or ``console``
    exporter: Exporter = "global"
    #: the OTLP/HTTP receiver's base URL; ``/v1/traces`` and ``/v1/metrics`` are appended. Unset:
    #: the exporter's own default (``OTEL_EXPORTER_OTLP_ENDPOINT``, else ``http://localhost:4318``)
    endpoint: str | None = attrs.field(default=None, validator=_endpoint)
    #: extra HTTP headers for the OTLP receiver (an API key, say)
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_headers)
    #: record prompts, completions, tool arguments and results on the spans (off: none of them)
    capture_content: bool = False
    #: the ``service.name`` of the resource, for the ``otlp`` and ``console`` exporters
    service_name: str = attrs.field(default="dsh", validator=_service_name)
