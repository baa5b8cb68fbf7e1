"""The native API (SPEC §10.2): sessions, prompts, cancel, approvals, questions (``ask_user``, SPEC
§10.6), and the live log over SSE.

Every route reads its input at the boundary: a body that is not a JSON object is a 400, a field of
the wrong type or value a 422 naming the field; nothing is queued or logged for a refused request.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from dsh_core import ApprovalNotPendingError, QuestionNotPendingError
from dsh_core.session_log import ApprovalRequestedEvent, QuestionAskedEvent

from ._config import ServeConfig
from ._desk import SessionDesk, content_of
from ._errors import ApiError
from ._tail import LogTails

if TYPE_CHECKING:
    from dsh_core.vocabulary import Agent

__all__ = ["api_routes", "read_object"]

logger = logging.getLogger("dsh_serve")

#: The verbs that queue a message, and what each calls on the agent.
_DELIVERIES: Final = ("send", "steer", "inject")


async def read_object(request: Request) -> dict[str, Any]:
    """The request's JSON object body. :raises ApiError: 400 for anything else."""
    body = await request.body()
    if not body.strip():
        raise ApiError(400, "the request needs a JSON object body")
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ApiError(400, f"the body must be a JSON object, got {type(value).__name__}")
    return value


def _optional_str(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ApiError(422, f"{key}: expected a non-empty string, got {value!r:.80}")
    return value


def _unknown_keys(body: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    extra = sorted(set(body) - set(allowed))
    if extra:
        raise ApiError(422, f"unknown field(s) {', '.join(map(repr, extra))}; this endpoint takes {', '.join(allowed)}")


def _seq(raw: str, where: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(422, f"{where}: expected a seq (an integer >= -1), got {raw!r:.40}") from None
    if value < -1:
        raise ApiError(422, f"{where}: expected a seq (an integer >= -1), got {value}")
    return value


def _not_pending(agent: Agent, asked_type: str, call_id: str, what: str, exc: Exception) -> ApiError:
    """409 for a call whose request is in the log (answered since), 404 for one never asked."""
    asked = any(e.type == asked_type and e.data.get("call_id") == call_id for e in agent.session.events)
    if asked:
        return ApiError(409, f"the {what} of call {call_id!r} is no longer pending: {exc}")
    return ApiError(404, f"no {what} was asked for by call {call_id!r} in this session")


class FollowerStream(EventSourceResponse):
    """The SSE response of one follower; a follower whose write stalls is dropped, quietly."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            logger.info("dropped a slow follower of %s (a write took over send_timeout)", scope.get("path"))


def api_routes(desk: SessionDesk, tails: LogTails, config: ServeConfig) -> list[BaseRoute]:
    """The routes of the native API, over ``desk`` and ``tails``."""

    async def list_sessions(request: Request) -> Response:
        return JSONResponse({"sessions": await desk.summaries()})

    async def create_session(request: Request) -> Response:
        body = await read_object(request)
        _unknown_keys(body, ("id", "model"))
        agent = await desk.create(_optional_str(body, "id"), _optional_str(body, "model"))
        return JSONResponse({"id": agent.id}, status_code=201)

    async def get_session(request: Request) -> Response:
        return JSONResponse(await desk.summary(request.path_params["id"]))

    async def delete_session(request: Request) -> Response:
        await desk.delete(request.path_params["id"])
        return Response(status_code=204)

    def deliver(verb: str) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            body = await read_object(request)
            _unknown_keys(body, ("content", "id"))
            if "content" not in body:
                raise ApiError(422, "content: required (a string, or a list of content blocks)")
            content = content_of(body["content"], "content")
            ident = _optional_str(body, "id")
            agent = await desk.agent(request.path_params["id"])
            try:
                if verb == "send":
                    queued = agent.send(content, id=ident)
                elif verb == "steer":
                    queued = agent.steer(content, id=ident)
                else:
                    queued = ident or secrets.token_hex(16)
                    loop_agent: Any = agent  # the loop's Agent takes id= here too (its Protocol lags)
                    loop_agent.inject(content, id=queued)
            except (TypeError, ValueError) as exc:
                raise ApiError(422, f"content: {exc}") from exc
            return JSONResponse({"id": queued}, status_code=202)

        return endpoint

    async def cancel(request: Request) -> Response:
        agent = await desk.agent(request.path_params["id"])
        agent.cancel()
        return JSONResponse({}, status_code=202)

    async def approvals(request: Request) -> Response:
        agent = await desk.agent(request.path_params["id"])
        pending = [
            {"call_id": p.call_id, "tool": p.tool, "arguments": p.arguments, "reason": p.reason, "seq": p.seq}
            for p in agent.pending_approvals()
        ]
        return JSONResponse({"approvals": pending})

    async def resolve(request: Request) -> Response:
        body = await read_object(request)
        _unknown_keys(body, ("decision", "reason", "arguments"))
        decision = body.get("decision")
        if decision not in ("once", "always", "deny", "cancelled"):
            raise ApiError(422, f"decision: expected one of once, always, deny, cancelled; got {decision!r:.80}")
        reason = body.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise ApiError(422, f"reason: expected a string or null, got {reason!r:.80}")
        arguments = body.get("arguments")
        if arguments is not None and not isinstance(arguments, dict | str):
            raise ApiError(422, f"arguments: expected a JSON object (or its text) or null, got {arguments!r:.80}")
        agent = await desk.agent(request.path_params["id"])
        call_id = request.path_params["call_id"]
        try:
            event = await agent.resolve_approval(call_id, decision, reason=reason, arguments=arguments, by="serve")
        except ApprovalNotPendingError as exc:
            raise _not_pending(agent, ApprovalRequestedEvent.type, call_id, "approval", exc) from exc
        except (TypeError, ValueError) as exc:
            raise ApiError(422, f"the approval of call {call_id!r} stays pending: {exc}") from exc
        return JSONResponse(event.to_json())

    async def questions(request: Request) -> Response:
        agent = await desk.agent(request.path_params["id"])
        pending = [
            {"call_id": q.call_id, "questions": agent.session.events[q.seq].plain_data()["questions"], "seq": q.seq}
            for q in agent.pending_questions()
        ]
        return JSONResponse({"questions": pending})

    async def answer(request: Request) -> Response:
        body = await read_object(request)
        _unknown_keys(body, ("answers",))
        answers = body.get("answers")
        if not isinstance(answers, dict):
            raise ApiError(422, f"answers: expected an object of question id -> answer, got {answers!r:.80}")
        agent = await desk.agent(request.path_params["id"])
        call_id = request.path_params["call_id"]
        try:
            event = await agent.answer_question(call_id, answers, by="serve")
        except QuestionNotPendingError as exc:
            raise _not_pending(agent, QuestionAskedEvent.type, call_id, "question", exc) from exc
        except (TypeError, ValueError) as exc:
            raise ApiError(422, f"the question of call {call_id!r} stays pending: {exc}") from exc
        return JSONResponse(event.to_json())

    async def events(request: Request) -> Response:
        after = -1
        last_id = request.headers.get("last-event-id")
        if last_id is not None and last_id.strip():
            after = _seq(last_id.strip(), "Last-Event-ID")
        elif "after" in request.query_params:
            after = _seq(request.query_params["after"], "after")
        agent = await desk.agent(request.path_params["id"])
        tail = tails.of(agent.session)
        return FollowerStream(
            tail.follow(after),
            ping=config.heartbeat,
            send_timeout=config.send_timeout,
            sep="\n",
        )

    routes: list[BaseRoute] = [
        Route("/api/sessions", list_sessions, methods=["GET"]),
        Route("/api/sessions", create_session, methods=["POST"]),
        Route("/api/sessions/{id}", get_session, methods=["GET"]),
        Route("/api/sessions/{id}", delete_session, methods=["DELETE"]),
        Route("/api/sessions/{id}/cancel", cancel, methods=["POST"]),
        Route("/api/sessions/{id}/events", events, methods=["GET"]),
        Route("/api/sessions/{id}/approvals", approvals, methods=["GET"]),
        Route("/api/sessions/{id}/approvals/{call_id}", resolve, methods=["POST"]),
        Route("/api/sessions/{id}/questions", questions, methods=["GET"]),
        Route("/api/sessions/{id}/questions/{call_id}", answer, methods=["POST"]),
    ]
    routes += [Route(f"/api/sessions/{{id}}/{verb}", deliver(verb), methods=["POST"]) for verb in _DELIVERIES]
    return routes
