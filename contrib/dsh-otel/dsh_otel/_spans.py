"""Session events as spans and metrics: a turn span, a chat span per model request, a tool span per call.

Everything is driven by what the loop already publishes: the session log (``session/event``), the
inbox (``agent/queued``) and the tool pipeline; the loop itself is not changed. Per session, the
tracker keeps the open turn and its open children, and closes them at ``turn/end`` — or, when the
log has no ``turn/end`` for them, when the agent or the session is disposed or the plugin stops.

Parentage: a turn's span is a child of the span that was current where its prompt was sent (the
context is taken at ``agent/queued``, in the sender's task, since the turn itself runs in the
agent's own task); a sub-agent's prompt is sent inside the parent's ``task`` tool call, whose
``execute_tool`` span is current there, so the child's turn nests under it.

Cost: the tracker reads each event's typed payload (never ``event.data``, which would build the
event's JSON for nothing), builds a request's constant attributes and metric attribute sets once
per model configuration, and makes one SDK call per span (a chat span is started and ended when
its request ends, with every attribute at once and the times it already has); parents are given as
an explicit context and the points are recorded in one with no span. Content is only rendered for a
turn that records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from dsh_core import AssistantMessage, Message, UserMessage
from dsh_core.llm import Failure, Finish, LlmCallConfig, Usage
from dsh_core.session_log import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ContextMessageEvent,
    InboxClearedEvent,
    PromptBlockedEvent,
    RequestHeaderDeltaEvent,
    RequestHeaderEvent,
    Session,
    SessionEvent,
    SteeringMessageEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
)

from ._messages import FINISH_REASONS, dumps, input_messages, output_message, parsed_arguments, tool_response

__all__ = ["INSTRUMENTATION_NAME", "SpanTracker"]

#: the instrumentation scope of every span and instrument
INSTRUMENTATION_NAME: Final = "dsh_otel"

#: bucket boundaries the conventions advise for the two histograms
_TOKEN_BUCKETS: Final = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
_DURATION_BUCKETS: Final = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)

#: how a turn that did not complete is described in its span's status
_ENDINGS: Final[Mapping[str, str]] = {
    "aborted": "the turn was cancelled",
    "disposed": "the agent was disposed during the turn",
    "interrupted": "the turn was interrupted (closed by crash repair)",
}

#: ``gen_ai.response.finish_reasons`` for each dsh finish reason, built once
_FINISH_TUPLES: Final[Mapping[str, tuple[str]]] = {reason: (word,) for reason, word in FINISH_REASONS.items()}

_NO_CONFIG: Final = LlmCallConfig(provider="unknown", model="unknown")

#: the context every metric point is recorded in: no span. The agent's task inherits the span that
#: was current where the agent was made (an application's, a parent agent's tool call), and the
#: SDK's default trace-based exemplar filter would link the point to that unrelated span, at the
#: cost of an exemplar. (Not an empty Context: the SDK takes a falsy one for "none given".)
_NO_SPAN: Final = trace.set_span_in_context(trace.INVALID_SPAN, otel_context.Context())

Handler = Callable[["_Session", Any], None]


@attrs.define(slots=True, eq=False)
class _Request:
    """What every request made with one model configuration carries: built once per configuration."""

    #: the span name, ``chat <model>``
    name: str
    #: the constant attributes of its chat span (copied, then completed, when a request ends)
    attributes: dict[str, Any]
    #: metric attributes: the duration's, and the token usage's by token type
    points: dict[str, Any]
    input_points: dict[str, Any]
    output_points: dict[str, Any]
    #: the duration's attributes of a failed request, by error type (made when first needed)
    failed_points: dict[str, dict[str, Any]] = attrs.Factory(dict)


@attrs.define(slots=True, eq=False)
class _Chat:
    """One model request in flight. Its span is made when it ends, in one call with every attribute:
    nothing nests under a request (tool calls are the turn's children), and one call costs least."""

    start_ns: int
    request: _Request
    usage: Usage | None = None
    finish: str | None = None
    error: str | None = None
    #: with content capture, on a recording turn: the messages and instructions it sent
    content: dict[str, str] | None = None


@attrs.define(slots=True, eq=False)
class _Turn:
    """The open turn of a session and its open children."""

    span: Span
    context: otel_context.Context
    number: int
    #: whether the turn's span records (sampled in): content is only rendered for one that does
    recording: bool
    #: whether it has a valid context at all. Not: the API's no-op tracer (no SDK set up, nothing
    #: current), whose children could be nothing else, so only the metrics are made for the turn
    traced: bool
    #: when the current step started (a chat span starts there), and whether it has had one yet
    step_ns: int = 0
    step_has_chat: bool = False
    chat: _Chat | None = None
    tools: dict[str, Span] = attrs.Factory(dict)
    model_noted: bool = False
    #: with content capture: the prompts of the turn and its last assistant message
    inputs: list[UserMessage] = attrs.Factory(list)
    output: AssistantMessage | None = None


@attrs.define(slots=True, eq=False)
class _Session:
    """What the tracker knows of one session."""

    id: str
    #: the live session (``derive_messages()`` for content capture); None until an event is heard
    live: Session | None = None
    #: contexts current where each still-pending prompt was sent, by queued id, oldest first
    pending: dict[str, otel_context.Context] = attrs.Factory(dict)
    turn: _Turn | None = None
    #: the request header as last logged: model configuration, system prompt, prefix
    config: LlmCallConfig | None = None
    request: _Request | None = None
    system: str | None = None
    prefix: tuple[Message, ...] = ()


class SpanTracker:
    """Turns one harness's session events into spans and metric points.

    ``capture`` records message content (prompts, completions, tool arguments and results); off,
    no attribute or event carries any of it. Every method is cheap and never raises into the
    loop on well-formed events (the hooks contain what a malformed one might do).
    """

    def __init__(self, tracer: trace.Tracer, meter: metrics.Meter, *, capture: bool) -> None:
        self._tracer = tracer
        self._capture = capture
        self._sessions: dict[str, _Session] = {}
        #: the metric attribute sets by provider and model, shared by every session that uses them
        self._points: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._handlers: dict[str, Handler] = {
            AssistantChunkEvent.type: self._chunk,
            TurnStartEvent.type: self._turn_start,
            TurnEndEvent.type: self._turn_end,
            StepStartEvent.type: self._step_start,
            RequestHeaderEvent.type: self._header,
            RequestHeaderDeltaEvent.type: self._header,
            AssistantMessageEvent.type: self._assistant_message,
            ToolCallEvent.type: self._tool_call,
            ToolResultEvent.type: self._tool_result,
            UserMessageEvent.type: self._prompt,
            PromptBlockedEvent.type: self._consumed,
            SteeringMessageEvent.type: self._consumed,
            ContextMessageEvent.type: self._consumed,
            InboxClearedEvent.type: self._cleared,
        }

    # ------------------------------------------------------------------ entry points

    def on_event(self, session: Session, event: SessionEvent) -> None:
        """An event was committed to ``session``'s log."""
        handler = self._handlers.get(event.type)
        if handler is None:
            return
        state = self._sessions.get(session.id)
        if state is None:
            state = self._sessions[session.id] = _Session(session.id, session)
        elif state.live is None:
            state.live = session
        handler(state, event.payload)

    def on_queued(self, session_id: str, queued_id: str, kind: str) -> None:
        """A prompt was accepted: remember the context it was sent from (its turn's parent)."""
        if kind == "inject":
            return
        state = self._sessions.get(session_id)
        if state is None:
            state = self._sessions[session_id] = _Session(session_id)
        state.pending[queued_id] = otel_context.get_current()

    def tool_span(self, session_id: str | None, call_id: str) -> Span | None:
        """The open span of tool call ``call_id``, if the tracker follows it."""
        state = self._sessions.get(session_id) if session_id is not None else None
        if state is None or state.turn is None:
            return None
        return state.turn.tools.get(call_id)

    def on_error(self, session_id: str, turn: int, error: BaseException) -> None:
        """A plugin failed the turn: the exception goes on the turn's span.

        An exception that carries a ``Failure`` is the loop's report of a failed model request:
        the request's span already says it (status and ``error.type``) and ``turn/end`` carries
        the failure, so it is not recorded a second time with the loop's own traceback.
        """
        if isinstance(getattr(error, "failure", None), Failure):
            return
        state = self._sessions.get(session_id)
        if state is not None and state.turn is not None and state.turn.number == turn:
            state.turn.span.record_exception(error)

    def end_session(self, session_id: str, *, forget: bool) -> None:
        """Close what the log left open (a turn with no ``turn/end``) as ``disposed``."""
        state = self._sessions.pop(session_id, None) if forget else self._sessions.get(session_id)
        if state is not None and state.turn is not None:
            self._close_turn(state, "disposed", None)

    def end_all(self) -> None:
        """Close every open span (the plugin is stopping)."""
        for session_id in list(self._sessions):
            self.end_session(session_id, forget=True)

    # ------------------------------------------------------------------ the inbox

    def _prompt(self, state: _Session, payload: UserMessageEvent) -> None:
        self._consumed(state, payload)
        turn = state.turn
        if self._capture and turn is not None and turn.recording:
            turn.inputs.append(payload.message)

    def _consumed(
        self, state: _Session, payload: UserMessageEvent | PromptBlockedEvent | SteeringMessageEvent | ContextMessageEvent
    ) -> None:
        queued_id = payload.queued_id
        if queued_id is not None:
            state.pending.pop(queued_id, None)

    def _cleared(self, state: _Session, payload: InboxClearedEvent) -> None:
        for queued_id in payload.ids:
            state.pending.pop(queued_id, None)

    # ------------------------------------------------------------------ turns

    def _turn_start(self, state: _Session, payload: TurnStartEvent) -> None:
        if state.turn is not None:  # a turn/end we never heard of: close it rather than leak it
            self._close_turn(state, "disposed", None)
        number = payload.turn
        # The prompts this turn takes were all queued before it started; the oldest one's sender
        # is the parent. None (a resumed agent's restored prompt): the agent task's own context.
        parent = next(iter(state.pending.values()), None)
        span = self._tracer.start_span(
            f"invoke_agent {state.id}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.id": state.id,
                "gen_ai.conversation.id": state.id,
                "dsh.turn": number,
            },
        )
        traced = span.get_span_context().is_valid
        state.turn = _Turn(span, trace.set_span_in_context(span), number, span.is_recording(), traced)

    def _turn_end(self, state: _Session, payload: TurnEndEvent) -> None:
        turn = state.turn
        if turn is None or payload.turn != turn.number:
            return  # crash repair closing a turn of an earlier process: there is no span to end
        reason = payload.reason
        if reason is None:
            self._close_turn(state, "completed", None)
        else:
            self._close_turn(state, reason.kind, reason.failure)

    def _close_turn(self, state: _Session, kind: str, failure: Failure | None) -> None:
        turn = state.turn
        if turn is None:
            return
        state.turn = None
        cut = kind in _ENDINGS
        for span in turn.tools.values():  # the loop closes every call first; this is a safety net
            _fail(span, "ABORTED" if cut else "TOOL_ERROR", "the turn ended before the tool call")
            span.end()
        turn.tools.clear()
        if turn.chat is not None:
            self._end_chat(turn, "ABORTED" if cut else None)
        elif cut and turn.step_ns and not turn.step_has_chat and state.config is not None:
            # Cancelled while waiting for the model's first chunk: the request was made all the same.
            self._open_chat(state, turn, turn.step_ns)
            self._end_chat(turn, "ABORTED")
        span = turn.span
        span.set_attribute("dsh.turn.end_reason", kind)
        if kind == "error":
            code = failure.code if failure is not None else "UNKNOWN"
            span.set_attribute("error.type", code)
            span.set_status(Status(StatusCode.ERROR, failure.message if failure is not None else code))
        elif cut:
            span.set_status(Status(StatusCode.ERROR, _ENDINGS[kind]))
        if self._capture and turn.recording:
            if turn.inputs:
                span.set_attribute("gen_ai.input.messages", input_messages(turn.inputs))
            if turn.output is not None:
                span.set_attribute("gen_ai.output.messages", output_message(turn.output, None))
        span.end()

    # ------------------------------------------------------------------ model requests

    def _header(self, state: _Session, payload: RequestHeaderEvent | RequestHeaderDeltaEvent) -> None:
        config = payload.config
        if config is not None and config != state.config:
            state.config = config
            state.request = None  # made again, from the new configuration, at the next request
        if payload.system is not None:
            state.system = payload.system
        if payload.prefix is not None:
            state.prefix = payload.prefix
        turn = state.turn
        if turn is not None and turn.chat is None and turn.step_ns and not turn.step_has_chat:
            self._open_chat(state, turn, turn.step_ns)

    def _step_start(self, state: _Session, payload: StepStartEvent) -> None:
        turn = state.turn
        if turn is None:
            return
        if turn.chat is not None:  # a step that logged no assistant message: not expected, but close it
            self._end_chat(turn, None)
        turn.step_ns = time.time_ns()
        turn.step_has_chat = False

    def _request_for(self, state: _Session) -> _Request:
        """The constant attributes of this session's requests, for its configuration as last logged."""
        config = state.config or _NO_CONFIG
        provider = config.provider or "unknown"
        model = config.model or "unknown"
        shared = self._points.get((provider, model))
        if shared is None:
            points = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider, "gen_ai.request.model": model}
            shared = self._points[provider, model] = (
                points,
                {**points, "gen_ai.token.type": "input"},
                {**points, "gen_ai.token.type": "output"},
            )
        points, input_points, output_points = shared
        attributes: dict[str, Any] = {**points, "gen_ai.conversation.id": state.id}
        if config.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = config.max_tokens
        if config.temperature is not None:
            attributes["gen_ai.request.temperature"] = config.temperature
        request = state.request = _Request(f"chat {model}", attributes, points, input_points, output_points)
        return request

    def _open_chat(self, state: _Session, turn: _Turn, start_ns: int) -> _Chat:
        request = state.request or self._request_for(state)
        chat = turn.chat = _Chat(start_ns, request)
        if self._capture and turn.recording:
            chat.content = self._request_content(state)
        turn.step_has_chat = True
        if not turn.model_noted and turn.traced:
            turn.model_noted = True
            turn.span.set_attributes(
                {
                    "gen_ai.provider.name": request.points["gen_ai.provider.name"],
                    "gen_ai.request.model": request.points["gen_ai.request.model"],
                }
            )
        return chat

    def _request_content(self, state: _Session) -> dict[str, str]:
        """The system prompt and the messages this request sends (the prefix, then the history)."""
        content: dict[str, str] = {}
        if state.system:
            content["gen_ai.system_instructions"] = dumps([{"type": "text", "content": state.system}])
        history = state.live.derive_messages() if state.live is not None else ()
        content["gen_ai.input.messages"] = input_messages((*state.prefix, *history))
        return content

    def _chunk(self, state: _Session, payload: AssistantChunkEvent) -> None:
        turn = state.turn
        if turn is None:
            return
        chat = turn.chat
        if chat is None:
            # The first chunk of a request: a retry's attempt starts now, a first attempt at the step.
            chat = self._open_chat(state, turn, time.time_ns() if turn.step_has_chat else turn.step_ns)
        chunk = payload.chunk
        if type(chunk) is Usage:
            chat.usage = chunk
        elif type(chunk) is Finish:
            reason = chunk.reason
            chat.finish = reason
            if reason == "error" or reason == "aborted":
                error = chunk.error
                chat.error = error.message if error is not None else reason
                self._end_chat(turn, error.code if error is not None else "ABORTED")

    def _assistant_message(self, state: _Session, payload: AssistantMessageEvent) -> None:
        turn = state.turn
        if turn is None:
            return
        if self._capture and turn.recording:
            turn.output = payload.message
        chat = turn.chat
        if chat is None:
            return
        if chat.usage is None:
            chat.usage = payload.usage
        if chat.content is not None:
            chat.content["gen_ai.output.messages"] = output_message(payload.message, chat.finish)
        self._end_chat(turn, "ABORTED" if payload.interrupted else None)

    def _end_chat(self, turn: _Turn, error_type: str | None) -> None:
        chat = turn.chat
        if chat is None:
            return
        turn.chat = None
        request = chat.request
        end_ns = self._chat_span(turn, chat, error_type) if turn.traced else time.time_ns()
        usage = chat.usage
        if usage is not None:
            self._tokens.record(usage.input_tokens, request.input_points, _NO_SPAN)
            self._tokens.record(usage.output_tokens, request.output_points, _NO_SPAN)
        points = request.points
        if error_type is not None:
            failed = request.failed_points.get(error_type)
            if failed is None:
                failed = request.failed_points[error_type] = {**points, "error.type": error_type}
            points = failed
        self._duration.record((end_ns - chat.start_ns) / 1e9, points, _NO_SPAN)

    def _chat_span(self, turn: _Turn, chat: _Chat, error_type: str | None) -> int:
        """Start and end the request's span in one go, with every attribute; returns its end time."""
        request = chat.request
        attributes = request.attributes.copy()
        if chat.finish is not None:
            attributes["gen_ai.response.finish_reasons"] = _FINISH_TUPLES.get(chat.finish) or (chat.finish,)
        usage = chat.usage
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            if usage.cache_read_tokens:
                attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
            if usage.cache_write_tokens:
                attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
        if error_type is not None:
            attributes["error.type"] = error_type
        if chat.content is not None:
            attributes.update(chat.content)
        span = self._tracer.start_span(
            request.name,
            context=turn.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=chat.start_ns,
        )
        if error_type is not None:
            description = chat.error or ("the request was cancelled" if error_type == "ABORTED" else error_type)
            span.set_status(Status(StatusCode.ERROR, description))
        end_ns = time.time_ns()
        span.end(end_time=end_ns)
        return end_ns

    # ------------------------------------------------------------------ tool calls

    def _tool_call(self, state: _Session, payload: ToolCallEvent) -> None:
        turn = state.turn
        if turn is None or not turn.traced:
            return
        name = payload.name
        call_id = payload.call_id
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if self._capture and turn.recording:
            arguments = parsed_arguments(payload.arguments)
            attributes["gen_ai.tool.call.arguments"] = arguments if isinstance(arguments, str) else dumps(arguments)
        turn.tools[call_id] = self._tracer.start_span(
            f"execute_tool {name}", context=turn.context, kind=SpanKind.INTERNAL, attributes=attributes
        )

    def _tool_result(self, state: _Session, payload: ToolResultEvent) -> None:
        turn = state.turn
        if turn is None:
            return
        message = payload.message
        span = turn.tools.pop(message.call_id, None)
        if span is None:
            return
        code = payload.error_code
        if code is not None:
            _fail(span, code, code)
        if self._capture and turn.recording:
            span.set_attribute("gen_ai.tool.call.result", tool_response(message.content))
        span.end()


def _fail(span: Span, code: str, description: str) -> None:
    span.set_attribute("error.type", code)
    span.set_status(Status(StatusCode.ERROR, description))

