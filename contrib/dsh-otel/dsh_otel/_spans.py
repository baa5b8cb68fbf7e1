"""Session events as spans and metrics: a turn span, a chat span per model request, a tool span per call.

Everything is driven by what the loop already publishes: the session log (``session/event``), the
inbox (``agent/queued``) and the tool pipeline; the loop itself is not changed. Per session, the
tracker keeps the open turn and its open children, and closes them at ``turn/end`` — or, when the
log has no ``turn/end`` for them, when the agent or the session is disposed or the plugin stops.

Parentage: a turn's span is a child of the span that was current where its prompt was sent (the
context is taken at ``agent/queued``, in the sender's task, since the turn itself runs in the
agent's own task); a sub-agent's prompt is sent inside the parent's ``task`` tool call, whose
``execute_tool`` span is current there, so the child's turn nests under it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from dsh_core.session_log import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ContextMessageEvent,
    InboxClearedEvent,
    PromptBlockedEvent,
    RequestHeaderDeltaEvent,
    RequestHeaderEvent,
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

Handler = Callable[["_Session", Mapping[str, Any]], None]


@attrs.define(slots=True)
class _Chat:
    """One model request in flight. Its span is made when it ends, in one call with every attribute:
    nothing nests under a request (tool calls are the turn's children), and one call costs least."""

    start_ns: int
    name: str
    attributes: dict[str, Any]
    usage: Mapping[str, Any] | None = None
    finish: str | None = None
    error: str | None = None


@attrs.define(slots=True)
class _Turn:
    """The open turn of a session and its open children."""

    span: Span
    context: otel_context.Context
    number: int
    #: when the current step started (a chat span starts there), and whether it has had one yet
    step_ns: int = 0
    step_has_chat: bool = False
    chat: _Chat | None = None
    tools: dict[str, Span] = attrs.Factory(dict)
    model_noted: bool = False
    #: with content capture: the prompts of the turn and its last assistant message
    inputs: list[Mapping[str, Any]] = attrs.Factory(list)
    output: Mapping[str, Any] | None = None


@attrs.define(slots=True)
class _Session:
    """What the tracker knows of one session."""

    id: str
    #: the live session (``derive_messages()`` for content capture); None until an event is heard
    live: Any = None
    #: contexts current where each still-pending prompt was sent, by queued id, oldest first
    pending: dict[str, otel_context.Context] = attrs.Factory(dict)
    turn: _Turn | None = None
    #: the request header as last logged (provider, model, limits, system prompt, prefix)
    config: Mapping[str, Any] = attrs.Factory(dict)
    system: str | None = None
    prefix: tuple[Mapping[str, Any], ...] = ()


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
        self._point_attributes: dict[
            tuple[str, str], tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
        ] = {}
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

    def on_event(self, session: Any, event_type: str, data: Mapping[str, Any]) -> None:
        """An event was committed to ``session``'s log."""
        handler = self._handlers.get(event_type)
        if handler is None:
            return
        state = self._sessions.get(session.id)
        if state is None:
            state = self._sessions[session.id] = _Session(session.id, session)
        elif state.live is None:
            state.live = session
        handler(state, data)

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
        """A plugin or the model failed the turn: the exception goes on the turn's span."""
        state = self._sessions.get(session_id)
        if state is not None and state.turn is not None and state.turn.number == turn:
            state.turn.span.record_exception(error)

    def end_session(self, session_id: str, *, forget: bool) -> None:
        """Close what the log left open (a turn with no ``turn/end``) as ``disposed``."""
        state = self._sessions.pop(session_id, None) if forget else self._sessions.get(session_id)
        if state is not None and state.turn is not None:
            self._turn_end(state, {"turn": state.turn.number, "reason": {"kind": "disposed"}})

    def end_all(self) -> None:
        """Close every open span (the plugin is stopping)."""
        for session_id in list(self._sessions):
            self.end_session(session_id, forget=True)

    # ------------------------------------------------------------------ the inbox

    def _prompt(self, state: _Session, data: Mapping[str, Any]) -> None:
        self._consumed(state, data)
        if self._capture and state.turn is not None:
            state.turn.inputs.append(data["message"])

    def _consumed(self, state: _Session, data: Mapping[str, Any]) -> None:
        queued_id = data.get("queued_id")
        if queued_id is not None:
            state.pending.pop(queued_id, None)

    def _cleared(self, state: _Session, data: Mapping[str, Any]) -> None:
        for queued_id in data.get("ids", ()):
            state.pending.pop(queued_id, None)

    # ------------------------------------------------------------------ turns

    def _turn_start(self, state: _Session, data: Mapping[str, Any]) -> None:
        if state.turn is not None:  # a turn/end we never heard of: close it rather than leak it
            self.end_session(state.id, forget=False)
        number = data["turn"]
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
        state.turn = _Turn(span, trace.set_span_in_context(span), number)

    def _turn_end(self, state: _Session, data: Mapping[str, Any]) -> None:
        turn = state.turn
        if turn is None or data.get("turn") != turn.number:
            return  # crash repair closing a turn of an earlier process: there is no span to end
        state.turn = None
        reason: Mapping[str, Any] = data.get("reason") or {}
        kind = str(reason.get("kind", "completed"))
        cut = kind in _ENDINGS
        for span in turn.tools.values():  # the loop closes every call first; this is a safety net
            _fail(span, "ABORTED" if cut else "TOOL_ERROR", "the turn ended before the tool call")
            span.end()
        turn.tools.clear()
        if turn.chat is not None:
            self._end_chat(state, turn, "ABORTED" if cut else None)
        elif cut and turn.step_ns and not turn.step_has_chat and state.config:
            # Cancelled while waiting for the model's first chunk: the request was made all the same.
            self._open_chat(state, turn, turn.step_ns)
            self._end_chat(state, turn, "ABORTED")
        span = turn.span
        span.set_attribute("dsh.turn.end_reason", kind)
        if kind == "error":
            failure: Mapping[str, Any] = reason.get("failure") or {}
            code = str(failure.get("code", "UNKNOWN"))
            span.set_attribute("error.type", code)
            span.set_status(Status(StatusCode.ERROR, str(failure.get("message", code))))
        elif cut:
            span.set_status(Status(StatusCode.ERROR, _ENDINGS[kind]))
        if self._capture:
            if turn.inputs:
                span.set_attribute("gen_ai.input.messages", input_messages(turn.inputs))
            if turn.output is not None:
                span.set_attribute("gen_ai.output.messages", output_message(turn.output, None))
        span.end()

    # ------------------------------------------------------------------ model requests

    def _header(self, state: _Session, data: Mapping[str, Any]) -> None:
        config = data.get("config")
        if config is not None:
            state.config = config
        if "system" in data:
            state.system = data["system"]
        if "prefix" in data:
            state.prefix = tuple(data["prefix"])
        turn = state.turn
        if turn is not None and turn.chat is None and turn.step_ns and not turn.step_has_chat:
            self._open_chat(state, turn, turn.step_ns)

    def _step_start(self, state: _Session, data: Mapping[str, Any]) -> None:
        turn = state.turn
        if turn is None:
            return
        if turn.chat is not None:  # a step that logged no assistant message: not expected, but close it
            self._end_chat(state, turn, None)
        turn.step_ns = time.time_ns()
        turn.step_has_chat = False

    def _open_chat(self, state: _Session, turn: _Turn, start_ns: int) -> None:
        config = state.config
        provider = config.get("provider") or "unknown"
        model = config.get("model") or "unknown"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.conversation.id": state.id,
        }
        if config.get("max_tokens") is not None:
            attributes["gen_ai.request.max_tokens"] = config["max_tokens"]
        if config.get("temperature") is not None:
            attributes["gen_ai.request.temperature"] = config["temperature"]
        if self._capture:
            attributes.update(self._request_content(state))
        turn.chat = _Chat(start_ns, f"chat {model}", attributes)
        turn.step_has_chat = True
        if not turn.model_noted:
            turn.model_noted = True
            turn.span.set_attributes({"gen_ai.provider.name": provider, "gen_ai.request.model": model})

    def _request_content(self, state: _Session) -> dict[str, str]:
        """The system prompt and the messages this request sends (the prefix, then the history)."""
        content: dict[str, str] = {}
        if state.system:
            content["gen_ai.system_instructions"] = dumps([{"type": "text", "content": state.system}])
        live = state.live
        history = [message.to_json() for message in live.derive_messages()] if live is not None else []
        content["gen_ai.input.messages"] = input_messages([*state.prefix, *history])
        return content

    def _chunk(self, state: _Session, data: Mapping[str, Any]) -> None:
        turn = state.turn
        if turn is None:
            return
        chat = turn.chat
        if chat is None:
            # The first chunk of a request: a retry's attempt starts now, a first attempt at the step.
            self._open_chat(state, turn, time.time_ns() if turn.step_has_chat else turn.step_ns)
            chat = turn.chat
            assert chat is not None
        chunk = data["chunk"]
        kind = chunk["type"]
        if kind == "usage":
            chat.usage = chunk
        elif kind == "finish":
            reason = chunk["reason"]
            chat.finish = reason
            if reason == "error" or reason == "aborted":
                error = chunk.get("error") or {}
                chat.error = str(error.get("message", reason))
                self._end_chat(state, turn, str(error.get("code", "ABORTED")))

    def _assistant_message(self, state: _Session, data: Mapping[str, Any]) -> None:
        turn = state.turn
        if turn is None:
            return
        if self._capture:
            turn.output = data["message"]
        chat = turn.chat
        if chat is None:
            return
        if chat.usage is None:
            chat.usage = data.get("usage")
        if self._capture:
            chat.attributes["gen_ai.output.messages"] = output_message(data["message"], chat.finish)
        self._end_chat(state, turn, "ABORTED" if data.get("interrupted") else None)

    def _end_chat(self, state: _Session, turn: _Turn, error_type: str | None) -> None:
        chat = turn.chat
        if chat is None:
            return
        turn.chat = None
        attributes = chat.attributes
        points, input_points, output_points = self._points_for(attributes)
        if chat.finish is not None:
            attributes["gen_ai.response.finish_reasons"] = (FINISH_REASONS.get(chat.finish, chat.finish),)
        usage = chat.usage
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage["input_tokens"]
            attributes["gen_ai.usage.output_tokens"] = usage["output_tokens"]
            if usage.get("cache_read_tokens"):
                attributes["gen_ai.usage.cache_read.input_tokens"] = usage["cache_read_tokens"]
            if usage.get("cache_write_tokens"):
                attributes["gen_ai.usage.cache_creation.input_tokens"] = usage["cache_write_tokens"]
            self._tokens.record(usage["input_tokens"], input_points)
            self._tokens.record(usage["output_tokens"], output_points)
        if error_type is not None:
            attributes["error.type"] = error_type
            points = {**points, "error.type": error_type}
        span = self._tracer.start_span(
            chat.name,
            context=turn.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=chat.start_ns,
        )
        if error_type is not None:
            description = chat.error or (
                "the request was cancelled" if error_type == "ABORTED" else error_type
            )
            span.set_status(Status(StatusCode.ERROR, description))
        end_ns = time.time_ns()
        span.end(end_time=end_ns)
        self._duration.record((end_ns - chat.start_ns) / 1e9, points)

    def _points_for(
        self, attributes: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The metric attributes of a request to this provider and model (made once per pair)."""
        key = (attributes["gen_ai.provider.name"], attributes["gen_ai.request.model"])
        found = self._point_attributes.get(key)
        if found is None:
            base = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": key[0],
                "gen_ai.request.model": key[1],
            }
            found = (base, {**base, "gen_ai.token.type": "input"}, {**base, "gen_ai.token.type": "output"})
            self._point_attributes[key] = found
        return found

    # ------------------------------------------------------------------ tool calls

    def _tool_call(self, state: _Session, data: Mapping[str, Any]) -> None:
        turn = state.turn
        if turn is None:
            return
        name = data["name"]
        call_id = data["call_id"]
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if self._capture:
            arguments = parsed_arguments(data["arguments"])
            attributes["gen_ai.tool.call.arguments"] = (
                arguments if isinstance(arguments, str) else dumps(arguments)
            )
        turn.tools[call_id] = self._tracer.start_span(
            f"execute_tool {name}", context=turn.context, kind=SpanKind.INTERNAL, attributes=attributes
        )

    def _tool_result(self, state: _Session, data: Mapping[str, Any]) -> None:
        turn = state.turn
        if turn is None:
            return
        message = data["message"]
        span = turn.tools.pop(message["call_id"], None)
        if span is None:
            return
        code = data.get("error_code")
        if code is not None:
            _fail(span, code, code)
        if self._capture:
            span.set_attribute("gen_ai.tool.call.result", tool_response(message["content"]))
        span.end()


def _fail(span: Span, code: str, description: str) -> None:
    span.set_attribute("error.type", code)
    span.set_status(Status(StatusCode.ERROR, description))
