"""The ``otel`` plugin: its hooks, and the providers it reports to from start to stop."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace

from dsh_core import ToolExecution, ToolResult, hookimpl

from ._carrier import TraceContextEnv
from ._config import OtelConfig
from ._providers import Providers, providers_for
from ._spans import INSTRUMENTATION_NAME, SpanTracker

if TYPE_CHECKING:
    from dsh_core import Context, Session, SessionEvent

__all__ = ["OtelPlugin"]

#: how long stopping may wait for the plugin's own exporters to flush (an unreachable collector)
SHUTDOWN_TIMEOUT = 15.0
#: the conventions' schema the attribute names follow
_SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"


def _command_env_var() -> ContextVar[Mapping[str, str] | None] | None:
    """``dsh_workspace.COMMAND_ENV`` when the workspace tools are installed (then ``bash`` gets TRACEPARENT)."""
    try:
        from dsh_workspace import COMMAND_ENV
    except ImportError:
        return None
    return COMMAND_ENV


def _version() -> str:
    try:
        return importlib.metadata.version("dsh-harness-otel")
    except importlib.metadata.PackageNotFoundError:
        return "0"


class OtelPlugin:
    """Entry point ``otel``: OpenTelemetry spans and metrics for every agent, per the GenAI conventions.

    Configured by ``[plugins.otel]`` (``exporter``, ``endpoint``, ``headers``, ``capture_content``,
    ``service_name``). ``tracer_provider`` / ``meter_provider`` given here take precedence over
    ``exporter`` (for tests, or an application that keeps its providers out of the globals); the
    plugin never shuts down providers it did not make.
    """

    name = "otel"
    Config = OtelConfig

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._given = (tracer_provider, meter_provider)
        self._config = OtelConfig()
        self._providers: Providers | None = None
        self._tracker: SpanTracker | None = None
        self._command_env = _command_env_var()

    @property
    def config(self) -> OtelConfig:
        """The configuration in force (the defaults until started)."""
        return self._config

    def start(self, ctx: Context) -> None:
        config = ctx.config if isinstance(ctx.config, OtelConfig) else OtelConfig()
        self._config = config
        given_tracer, given_meter = self._given
        if given_tracer is not None and given_meter is not None:
            providers = Providers(given_tracer, given_meter)
        else:
            made = providers_for(config)
            providers = Providers(
                given_tracer or made.tracer_provider, given_meter or made.meter_provider, made.shutdown
            )
        self._providers = providers
        version = _version()
        tracer = providers.tracer_provider.get_tracer(INSTRUMENTATION_NAME, version, schema_url=_SCHEMA_URL)
        meter = providers.meter_provider.get_meter(INSTRUMENTATION_NAME, version, schema_url=_SCHEMA_URL)
        self._tracker = SpanTracker(tracer, meter, capture=config.capture_content)

    async def stop(self) -> None:
        """End every span still open (as ``disposed``), then flush and close the plugin's own exporters."""
        tracker, providers = self._tracker, self._providers
        self._tracker = None
        if tracker is not None:
            tracker.end_all()
        if providers is not None:
            self._providers = None
            with anyio.move_on_after(SHUTDOWN_TIMEOUT, shield=True):
                await anyio.to_thread.run_sync(providers.shutdown, abandon_on_cancel=True)

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def dsh_session_event(self, session: Session, event: SessionEvent) -> None:
        tracker = self._tracker
        if tracker is not None:
            tracker.on_event(session, event)

    @hookimpl
    def dsh_agent_queued(self, agent: Any, message: Any) -> None:
        """Runs in the sender's task: the context current there becomes the turn's parent."""
        tracker = self._tracker
        if tracker is not None:
            tracker.on_queued(agent.id, message.id, message.kind)

    @hookimpl
    def dsh_agent_error(self, agent: Any, turn: int, error: BaseException) -> None:
        tracker = self._tracker
        if tracker is not None:
            tracker.on_error(agent.id, turn, error)

    @hookimpl
    def dsh_agent_disposed(self, agent: Any) -> None:
        """A turn the log left open (its ``turn/end`` never came) ends with its agent."""
        tracker = self._tracker
        if tracker is not None:
            tracker.end_session(agent.id, forget=False)

    @hookimpl
    def dsh_session_disposed(self, session: Session) -> None:
        tracker = self._tracker
        if tracker is not None:
            tracker.end_session(session.id, forget=True)

    @hookimpl(tryfirst=True)
    def dsh_tools_execute(
        self, execution: ToolExecution, call_next: Callable[[], Awaitable[ToolResult]]
    ) -> Awaitable[ToolResult]:
        """Run the call with its ``execute_tool`` span current, and hand ``bash`` its TRACEPARENT.

        What the tool starts (a sub-agent, a traced library call) nests under the span. A plain
        ``def``: when there is no trace to carry (no span, or the API's no-op span with no valid
        context), it hands back ``call_next()`` itself and costs no coroutine of its own.
        """
        tracker = self._tracker
        span = tracker.tool_span(execution.session_id, execution.call_id) if tracker is not None else None
        if span is None:
            return call_next()
        span_context = span.get_span_context()
        if not span_context.is_valid:
            return call_next()
        return self._in_span(span, span_context, call_next)

    async def _in_span(
        self,
        span: trace.Span,
        span_context: trace.SpanContext,
        call_next: Callable[[], Awaitable[ToolResult]],
    ) -> ToolResult:
        token = otel_context.attach(trace.set_span_in_context(span))
        env_var = self._command_env
        env_token = None
        try:
            if env_var is not None:
                env_token = env_var.set(TraceContextEnv(env_var.get(), span_context))
            return await call_next()
        finally:
            if env_token is not None and env_var is not None:
                env_var.reset(env_token)
            otel_context.detach(token)
