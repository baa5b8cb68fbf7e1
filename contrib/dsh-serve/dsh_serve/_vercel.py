"""The Vercel AI SDK UI message stream v1 (``POST /api/chat``, ``GET /api/chat/{id}/stream``), SPEC §10.2.

The chat id is the session. A POST sends the last user message when the session has not seen its
id (the chat re-sends the conversation), or answers the approvals its last assistant message
carries (tool parts in state ``approval-responded``), then streams that turn as UI message chunks:
``start`` (``messageId`` stable for the turn, across approvals and resume), steps, text, reasoning,
tool input and output, ``tool-approval-request`` (then the response ends; the turn stays parked),
``finish`` or ``error``/``abort``, and ``[DONE]``. The GET replays the running turn from its
``turn/start`` out of the log, then tails it; 204 when no turn runs. No Redis: the log is the buffer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from dsh_core import ApprovalNotPendingError
from dsh_core.session_log import (
    ApprovalRequestedEvent,
    AssistantChunkEvent,
    AssistantMessageEvent,
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

__all__ = ["STREAM_HEADER", "vercel_routes"]

#: The header that tells the AI SDK's transport the body is a UI message stream.
STREAM_HEADER: Final = {"x-vercel-ai-ui-message-stream": "v1"}


def message_id(session_id: str, turn: int) -> str:
    """The assistant message of a turn, as the chat knows it (stable across approvals and resume)."""
    return f"{session_id}:turn-{turn}"


def _chunk(value: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


class _Projection:
    """One turn's log events as UI message chunks."""

    def __init__(self) -> None:
        self.step_open = False
        self.open: dict[tuple[int, int], tuple[str, str, str]] = {}  # (step, index) -> (kind, id, tool name)
        self.finished = False

    def _end_step(self) -> Iterator[dict[str, Any]]:
        if self.step_open:
            self.step_open = False
            yield {"type": "finish-step"}

    def map(self, event: SessionEvent) -> Iterator[dict[str, Any]]:
        data: Any = event.data
        kind = event.type
        for extra in extras_of(event):  # steering, the inbox, compaction: data parts of dsh's own
            yield {"type": f"data-dsh-{extra.name}", "id": extra.id, "data": dict(extra.value)}
        if kind == StepStartEvent.type:
            yield from self._end_step()
            self.step_open = True
            yield {"type": "start-step"}
        elif kind == AssistantChunkEvent.type:
            yield from self._delta(data["turn"], data["step"], data["chunk"])
        elif kind == AssistantMessageEvent.type:
            yield from self._message(data["turn"], data["step"], data["message"])
        elif kind == ToolResultEvent.type:
            message = data["message"]
            text = "".join(block.get("text", "") for block in message["content"] if block.get("type") == "text")
            code = data.get("error_code")
            if code == "DENIED":
                yield {"type": "tool-output-denied", "toolCallId": message["call_id"]}
            elif code or message.get("is_error"):
                yield {"type": "tool-output-error", "toolCallId": message["call_id"], "errorText": text or str(code)}
            else:
                yield {"type": "tool-output-available", "toolCallId": message["call_id"], "output": text}
        elif kind == ApprovalRequestedEvent.type:
            yield {"type": "tool-approval-request", "approvalId": data["call_id"], "toolCallId": data["call_id"], "reason": data["reason"]}
            yield from self._end_step()
            self.finished = True
            yield {"type": "finish", "finishReason": "tool-calls"}
        elif kind == TurnEndEvent.type:
            yield from self._end_step()
            reason = data["reason"]
            self.finished = True
            if reason["kind"] == "error":
                failure = reason.get("failure") or {}
                yield {"type": "error", "errorText": str(failure.get("message", "the turn failed"))}
            elif reason["kind"] in ("aborted", "disposed"):
                yield {"type": "abort", "reason": reason["kind"]}
            else:
                finish = {"completed": "stop", "max-tokens": "length"}.get(reason["kind"], "other")
                yield {"type": "finish", "finishReason": finish}

    def _delta(self, turn: int, step: int, chunk: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        key = (step, int(chunk.get("index", 0)))
        kind = chunk.get("type")
        if kind in ("text-delta", "reasoning-delta"):
            part = "text" if kind == "text-delta" else "reasoning"
            ident = f"{turn}.{step}.{key[1]}"
            if key not in self.open:
                self.open[key] = (part, ident, "")
                yield {"type": f"{part}-start", "id": ident}
            if chunk["text"]:
                yield {"type": f"{part}-delta", "id": ident, "delta": chunk["text"]}
        elif kind == "tool-call-delta":
            if key not in self.open:
                if not chunk.get("id"):
                    return
                self.open[key] = ("tool", str(chunk["id"]), str(chunk.get("name") or ""))
                yield {"type": "tool-input-start", "toolCallId": chunk["id"], "toolName": chunk.get("name") or ""}
            if chunk.get("arguments"):
                yield {"type": "tool-input-delta", "toolCallId": self.open[key][1], "inputTextDelta": chunk["arguments"]}

    def _message(self, turn: int, step: int, message: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        for index, block in enumerate(message["content"]):
            part = self.open.pop((step, index), None)
            kind = block.get("type")
            if kind in ("text", "reasoning"):
                ident = part[1] if part else f"{turn}.{step}.{index}"
                if part is None:
                    if not block["text"]:
                        continue
                    yield {"type": f"{kind}-start", "id": ident}
                    yield {"type": f"{kind}-delta", "id": ident, "delta": block["text"]}
                yield {"type": f"{kind}-end", "id": ident}
            elif kind == "tool-call":
                if part is None:
                    yield {"type": "tool-input-start", "toolCallId": block["id"], "toolName": block["name"]}
                yield {
                    "type": "tool-input-available",
                    "toolCallId": block["id"],
                    "toolName": block["name"],
                    "input": _parsed(block["arguments"]),
                }
        for key in [key for key in self.open if key[0] == step]:  # streamed, then not kept
            kind, ident, _name = self.open.pop(key)
            if kind in ("text", "reasoning"):
                yield {"type": f"{kind}-end", "id": ident}



def _text_of(message: Mapping[str, Any]) -> str:
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise ApiError(422, "messages[-1].parts: expected a list of parts")
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and p.get("type") == "text")


def _approval_answers(message: Mapping[str, Any]) -> list[tuple[str, bool, str | None]]:
    """``(approval id, approved, reason)`` of each tool part answered in the chat and not yet sent."""
    answers = []
    for part in message.get("parts") or ():
        if not isinstance(part, Mapping) or not str(part.get("type", "")).startswith(("tool-", "dynamic-tool")):
            continue
        approval = part.get("approval")
        if part.get("state") == "approval-responded" and isinstance(approval, Mapping):
            approved = approval.get("approved")
            reason = approval.get("reason")
            if not isinstance(approved, bool) or not isinstance(approval.get("id"), str):
                raise ApiError(422, "messages[-1].parts[].approval: expected {id, approved, reason?}")
            answers.append((approval["id"], approved, reason if isinstance(reason, str) else None))
    return answers


def vercel_routes(desk: SessionDesk, tails: LogTails, config: ServeConfig) -> list[Route]:
    """``POST /api/chat`` and ``GET /api/chat/{id}/stream``."""

    def respond(agent: Agent, start: int, turn: int | None, queued: str | None, *, replay: bool) -> Response:
        session = agent.session
        tail = tails.of(session)
        projection = _Projection()

        async def stream() -> AsyncIterator[bytes]:
            current = turn
            opened = session.open_turn
            started = False
            if current is not None:
                started = True
                yield _chunk({"type": "start", "messageId": message_id(session.id, current)})
            async with aclosing(tail.events(start - 1)) as batches:
                async for batch in batches:
                    out: list[bytes] = []
                    for event in batch:
                        data: Any = event.data
                        if event.type == TurnStartEvent.type:
                            opened = data["turn"]
                            if replay and current == opened:
                                continue
                        if current is None and event.type == UserMessageEvent.type and data.get("queued_id") == queued:
                            current = opened
                        if current is None:
                            continue
                        if not started:
                            started = True
                            out.append(_chunk({"type": "start", "messageId": message_id(session.id, current)}))
                        if event.type == TurnStartEvent.type or data.get("turn", current) != current:
                            continue
                        out.extend(_chunk(c) for c in projection.map(event))
                        if projection.finished:
                            out.append(b"data: [DONE]\n\n")
                            break
                    if out:
                        yield b"".join(out)
                    if projection.finished:
                        return

        return FollowerStream(
            stream(), ping=config.heartbeat, send_timeout=config.send_timeout, sep="\n", headers=STREAM_HEADER
        )

    async def chat(request: Request) -> Response:
        body = await read_object(request)
        ident = body.get("id")
        messages = body.get("messages")
        if not isinstance(ident, str) or not ident.strip():
            raise ApiError(422, "id: expected the chat id (a non-empty string)")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, Mapping) for m in messages):
            raise ApiError(422, "messages: expected a non-empty list of UI messages")
        agent = await desk.agent_or_new(ident)
        session = agent.session
        start = len(session.events)
        last = messages[-1]
        if last.get("role") == "assistant":
            answers = _approval_answers(last)
            if not answers:
                raise ApiError(422, "messages[-1]: an assistant message must carry an answered approval")
            for approval_id, approved, reason in answers:
                try:
                    await agent.resolve_approval(
                        approval_id, "once" if approved else "deny", reason=reason, by="serve"
                    )
                except ApprovalNotPendingError:
                    continue  # answered before (a retried request): the stream shows what followed
            turn = session.open_turn
            if turn is None:  # the turn has ended since: nothing to stream but its end
                return Response(status_code=204)
            return respond(agent, start, turn, None, replay=False)
        if last.get("role") != "user" or not isinstance(last.get("id"), str):
            raise ApiError(422, "messages[-1]: expected a user message with an id, or an assistant message with answered approvals")
        if knows_message(agent, last["id"]):
            turn = session.open_turn
            if turn is None:
                return Response(status_code=204)
            return respond(agent, start, turn, None, replay=False)
        text = _text_of(last)
        if not text.strip():
            raise ApiError(422, "messages[-1]: the user message has no text")
        if agent.pending_approvals():
            raise ApiError(409, "the chat has approvals waiting for an answer; answer them first")
        queued = agent.send(text, id=last["id"])
        return respond(agent, start, None, queued, replay=False)

    async def resume_stream(request: Request) -> Response:
        agent = await desk.agent(request.path_params["id"])
        session = agent.session
        turn = session.open_turn
        if turn is None:
            return Response(status_code=204)
        begin = next(
            (e.seq for e in reversed(session.events) if e.type == TurnStartEvent.type and e.data["turn"] == turn), 0
        )
        return respond(agent, begin, turn, None, replay=True)

    return [
        Route("/api/chat", chat, methods=["POST"]),
        Route("/api/chat/{id}/stream", resume_stream, methods=["GET"]),
    ]
