"""The AG-UI projection (``POST /ag-ui``, ``ag-ui-protocol`` 1.0): one run is one dsh turn, or the
part of it up to a pending approval (SPEC §10.2).

A run's input is checked and acted on before the stream starts, so a bad input is an HTTP error:
the thread is the session (created when unknown); the last user message is sent when the session
has not seen its id (``HttpAgent`` re-sends the whole conversation), steered into the running turn
when ``forwardedProps.dsh.deliver == "steer"``, else queued like ``send``; a run with ``resume``
answers pending approvals and sends nothing. The stream then projects that turn's log events onto
AG-UI events, and ends with ``RUN_FINISHED`` (success, cancelled, or an interrupt for each approval
that waits) or ``RUN_ERROR``. The turn itself never depends on the stream: a client that leaves
only stops reading.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Final

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import (
    RunFinishedCancelledOutcome,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from dsh_core import ApprovalNotPendingError
from dsh_core.session_log import (
    ApprovalRequestedEvent,
    AssistantChunkEvent,
    AssistantMessageEvent,
    SteeringMessageEvent,
    StepStartEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
)

from ._api import FollowerStream, read_object
from ._config import ServeConfig
from ._desk import SessionDesk, knows_message
from ._errors import ApiError
from ._extras import extras_of
from ._tail import LogTails

if TYPE_CHECKING:
    from dsh_core import SessionEvent
    from dsh_core.vocabulary import Agent

__all__ = ["RESPONSE_SCHEMA", "agui_routes", "decision_of"]

#: What an interrupt's answer may carry: AG-UI's own payload, or dsh's (both accepted).
RESPONSE_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "oneOf": [
        {
            "properties": {
                "approved": {"type": "boolean"},
                "reason": {"type": "string"},
                "editedArgs": {"type": "object"},
            },
            "required": ["approved"],
        },
        {
            "properties": {
                "decision": {"enum": ["once", "always", "deny", "cancelled"]},
                "reason": {"type": "string"},
                "arguments": {"type": "object"},
            },
            "required": ["decision"],
        },
    ],
}


def decision_of(status: str, payload: object) -> tuple[str, str | None, Any]:
    """``(decision, reason, arguments)`` of a resume entry. :raises ApiError: 422 for a payload of neither shape."""
    if status == "cancelled":
        return "cancelled", None, None
    if not isinstance(payload, Mapping):
        raise ApiError(422, f"resume[].payload: expected {{approved, reason?, editedArgs?}} or {{decision, ...}}, got {payload!r:.80}")
    reason = payload.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ApiError(422, f"resume[].payload.reason: expected a string, got {reason!r:.80}")
    if "decision" in payload:
        return str(payload["decision"]), reason, payload.get("arguments")
    approved = payload.get("approved")
    if not isinstance(approved, bool):
        raise ApiError(422, f"resume[].payload.approved: expected true or false, got {approved!r:.80}")
    return ("once" if approved else "deny"), reason, payload.get("editedArgs")


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(getattr(part, "text", "") or "" for part in content if getattr(part, "type", None) == "text")
    return ""



class _Projection:
    """Turns one turn's log events into AG-UI events, remembering what is open."""

    def __init__(self, thread_id: str, run_id: str, agent: Agent) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.agent = agent
        self.step: str | None = None
        #: open streamed parts by (step, index): ("text" | "reasoning" | "tool", id)
        self.open: dict[tuple[int, int], tuple[str, str]] = {}
        self.finished = False

    def _close_step(self) -> Iterator[BaseEvent]:
        if self.step is not None:
            yield StepFinishedEvent(step_name=self.step)
            self.step = None

    def map(self, event: SessionEvent) -> Iterator[BaseEvent]:
        data: Any = event.data
        kind = event.type
        for extra in extras_of(event):  # steering, the inbox, compaction: dsh's own CUSTOM events
            yield CustomEvent(name=f"dsh.{extra.name}", value={"id": extra.id, **extra.value})
        if kind == StepStartEvent.type:
            yield from self._close_step()
            self.step = f"step {data['step']}"
            yield StepStartedEvent(step_name=self.step)
        elif kind == AssistantChunkEvent.type:
            yield from self._chunk(data["turn"], data["step"], data["chunk"])
        elif kind == AssistantMessageEvent.type:
            yield from self._message(data["turn"], data["step"], data["message"])
        elif kind == ToolResultEvent.type:
            message = data["message"]
            text = "".join(block.get("text", "") for block in message["content"] if block.get("type") == "text")
            yield ToolCallResultEvent(message_id=message["id"], tool_call_id=message["call_id"], content=text, role="tool")
        elif kind == ApprovalRequestedEvent.type:
            pending = self.agent.pending_approvals()
            interrupts = [
                Interrupt(
                    id=p.call_id,
                    reason="tool_call",
                    message=p.reason,
                    tool_call_id=p.call_id,
                    response_schema=dict(RESPONSE_SCHEMA),
                )
                for p in pending
            ] or [
                Interrupt(id=data["call_id"], reason="tool_call", message=data["reason"], tool_call_id=data["call_id"])
            ]
            yield from self._close_step()
            yield self._finished(RunFinishedInterruptOutcome(interrupts=interrupts))
        elif kind == TurnEndEvent.type:
            yield from self._close_step()
            reason = data["reason"]
            if reason["kind"] == "error":
                failure = reason.get("failure") or {}
                self.finished = True
                yield RunErrorEvent(message=str(failure.get("message", "the turn failed")), code=failure.get("code"))
            elif reason["kind"] in ("aborted", "disposed"):
                yield self._finished(RunFinishedCancelledOutcome())
            else:
                yield self._finished(RunFinishedSuccessOutcome(), result={"dsh": {"reason": reason}})

    def _finished(self, outcome: Any, result: Any = None) -> RunFinishedEvent:
        self.finished = True
        return RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome, result=result)

    def _chunk(self, turn: int, step: int, chunk: Mapping[str, Any]) -> Iterator[BaseEvent]:
        key = (step, int(chunk.get("index", 0)))
        kind = chunk.get("type")
        if kind == "text-delta":
            ident = f"{turn}.{step}.{key[1]}"
            if key not in self.open:
                self.open[key] = ("text", ident)
                yield TextMessageStartEvent(message_id=ident, role="assistant")
            if chunk["text"]:
                yield TextMessageContentEvent(message_id=ident, delta=chunk["text"])
        elif kind == "reasoning-delta":
            ident = f"{turn}.{step}.{key[1]}.reasoning"
            if key not in self.open:
                self.open[key] = ("reasoning", ident)
                yield ReasoningStartEvent(message_id=ident)
                yield ReasoningMessageStartEvent(message_id=ident)
            if chunk["text"]:
                yield ReasoningMessageContentEvent(message_id=ident, delta=chunk["text"])
        elif kind == "tool-call-delta":
            if key not in self.open:
                if not chunk.get("id"):
                    return
                self.open[key] = ("tool", str(chunk["id"]))
                yield ToolCallStartEvent(tool_call_id=str(chunk["id"]), tool_call_name=str(chunk.get("name") or ""))
            _, ident = self.open[key]
            if chunk.get("arguments"):
                yield ToolCallArgsEvent(tool_call_id=ident, delta=chunk["arguments"])

    def _message(self, turn: int, step: int, message: Mapping[str, Any]) -> Iterator[BaseEvent]:
        """Close what streamed; a block that never streamed (an interrupted step) is sent whole."""
        for index, block in enumerate(message["content"]):
            part = self.open.pop((step, index), None)
            kind = block.get("type")
            if kind == "text":
                ident = part[1] if part else f"{turn}.{step}.{index}"
                if part is None and block["text"]:
                    yield TextMessageStartEvent(message_id=ident, role="assistant")
                    yield TextMessageContentEvent(message_id=ident, delta=block["text"])
                if part is not None or block["text"]:
                    yield TextMessageEndEvent(message_id=ident)
            elif kind == "reasoning":
                ident = part[1] if part else f"{turn}.{step}.{index}.reasoning"
                if part is None:
                    if not block["text"]:
                        continue
                    yield ReasoningStartEvent(message_id=ident)
                    yield ReasoningMessageStartEvent(message_id=ident)
                    yield ReasoningMessageContentEvent(message_id=ident, delta=block["text"])
                yield ReasoningMessageEndEvent(message_id=ident)
                yield ReasoningEndEvent(message_id=ident)
            elif kind == "tool-call":
                if part is None:
                    yield ToolCallStartEvent(tool_call_id=block["id"], tool_call_name=block["name"])
                    if block["arguments"]:
                        yield ToolCallArgsEvent(tool_call_id=block["id"], delta=block["arguments"])
                yield ToolCallEndEvent(tool_call_id=block["id"])
        for key in [key for key in self.open if key[0] == step]:  # streamed, then dropped from the message
            kind, ident = self.open.pop(key)
            if kind == "text":
                yield TextMessageEndEvent(message_id=ident)
            elif kind == "reasoning":
                yield ReasoningMessageEndEvent(message_id=ident)
                yield ReasoningEndEvent(message_id=ident)
            else:
                yield ToolCallEndEvent(tool_call_id=ident)


def _encode(event: BaseEvent) -> bytes:
    return f"data: {event.model_dump_json(by_alias=True)}\n\n".encode()


def agui_routes(desk: SessionDesk, tails: LogTails, config: ServeConfig) -> list[Route]:
    """``POST /ag-ui``."""

    async def run(request: Request) -> Response:
        body = await read_object(request)
        try:
            run_input = RunAgentInput.model_validate(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ApiError(422, f"RunAgentInput.{where}: {first['msg']}") from None
        thread = run_input.thread_id
        if not thread.strip():
            raise ApiError(422, "RunAgentInput.threadId: must not be empty")
        agent = await desk.agent_or_new(thread)
        session = agent.session
        start = len(session.events)
        #: the turn this run follows: known now (resume, steer, a turn in progress) or at the
        #: user/message that consumes the queued id
        turn: int | None = None
        queued: str | None = None
        if run_input.resume:
            for entry in run_input.resume:
                decision, reason, arguments = decision_of(entry.status, entry.payload)
                try:
                    await agent.resolve_approval(
                        entry.interrupt_id, decision, reason=reason, arguments=arguments, by="serve"
                    )
                except ApprovalNotPendingError as exc:
                    raise ApiError(409, f"resume: interrupt {entry.interrupt_id!r} is not pending: {exc}") from exc
                except (TypeError, ValueError) as exc:
                    raise ApiError(422, f"resume: interrupt {entry.interrupt_id!r} stays pending: {exc}") from exc
            turn = session.open_turn
        else:
            users = [m for m in run_input.messages if getattr(m, "role", None) == "user"]
            last = users[-1] if users else None
            if last is not None and not knows_message(agent, last.id):
                if agent.pending_approvals():
                    raise ApiError(
                        409,
                        "the thread has interrupts waiting for an answer: send a run with resume[] first "
                        "(GET /api/sessions/{id}/approvals lists them)",
                    )
                text = _text(last.content)
                if not text.strip():
                    raise ApiError(422, "RunAgentInput.messages: the last user message has no text")
                props: Any = run_input.forwarded_props if isinstance(run_input.forwarded_props, Mapping) else {}
                dsh_props: Any = props.get("dsh") if isinstance(props.get("dsh"), Mapping) else {}
                running = session.open_turn
                if running is not None and dsh_props.get("deliver") == "steer":
                    agent.steer(text, id=last.id)
                    turn = running
                else:
                    queued = agent.send(text, id=last.id)
            else:
                turn = session.open_turn  # nothing new: follow the turn in progress, if any
        projection = _Projection(thread, run_input.run_id, agent)
        tail = tails.of(session)

        async def stream() -> AsyncIterator[bytes]:
            yield _encode(RunStartedEvent(thread_id=thread, run_id=run_input.run_id))
            if turn is None and queued is None:
                yield _encode(RunFinishedEvent(thread_id=thread, run_id=run_input.run_id, outcome=RunFinishedSuccessOutcome()))
                return
            current = turn
            opened = session.open_turn
            async with aclosing(tail.events(start - 1)) as batches:
                async for batch in batches:
                    out: list[bytes] = []
                    for event in batch:
                        data: Any = event.data
                        if event.type == TurnStartEvent.type:
                            opened = data["turn"]
                        elif current is None and (
                            (event.type == UserMessageEvent.type and data.get("queued_id") == queued)
                            or (event.type == SteeringMessageEvent.type and data.get("queued_id") == queued)
                        ):
                            current = opened
                        if current is None or event.type == TurnStartEvent.type:
                            continue
                        if data.get("turn", current) != current:
                            continue
                        out.extend(_encode(e) for e in projection.map(event))
                        if projection.finished:
                            break
                    if out:
                        yield b"".join(out)
                    if projection.finished:
                        return

        return FollowerStream(stream(), ping=config.heartbeat, send_timeout=config.send_timeout, sep="\n")

    return [Route("/ag-ui", run, methods=["POST"])]
