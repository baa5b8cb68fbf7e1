"""The tool call's trace context for the programs ``bash`` runs: TRACEPARENT and TRACESTATE (W3C Trace Context).

The OpenTelemetry convention for environment variables as carriers: a traced program the command
runs continues the trace under the tool call's span. The plugin sets ``dsh_workspace.COMMAND_ENV``
around every tool call, but only ``bash`` reads it, so the variables are formatted when first
read, not for every call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from opentelemetry.trace import SpanContext

__all__ = ["TraceContextEnv", "trace_context_env"]


def trace_context_env(span_context: SpanContext) -> dict[str, str]:
    """TRACEPARENT (and TRACESTATE when there is one) naming ``span_context``; empty when it is not valid.

    An invalid context (the API's no-op span, no SDK set up) has no trace to join. A valid one
    that the sampler dropped is carried with its sampled flag off, so the program drops it too.
    """
    if not span_context.is_valid:
        return {}
    flags = int(span_context.trace_flags)
    env = {"TRACEPARENT": f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{flags:02x}"}
    if span_context.trace_state:
        env["TRACESTATE"] = span_context.trace_state.to_header()
    return env


class TraceContextEnv(Mapping[str, str]):
    """``base`` (what was set for the call before) plus the trace context of ``span_context``, made when first read."""

    __slots__ = ("_base", "_env", "_span_context")

    def __init__(self, base: Mapping[str, str] | None, span_context: SpanContext) -> None:
        self._base = base
        self._span_context = span_context
        self._env: dict[str, str] | None = None

    def _resolved(self) -> dict[str, str]:
        env = self._env
        if env is None:
            carried = trace_context_env(self._span_context)
            env = self._env = {**self._base, **carried} if self._base else carried
        return env

    def __getitem__(self, key: str) -> str:
        return self._resolved()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._resolved())

    def __len__(self) -> int:
        return len(self._resolved())

    def __repr__(self) -> str:
        return f"TraceContextEnv({self._resolved()!r})"
