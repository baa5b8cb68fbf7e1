"""Approvals as logged records (SPEC §10.1): a call that needs a yes waits for the first answer logged.

An ``Ask`` from ``tools/pre-execute`` becomes ``approval/requested``, made durable before anyone
is asked; the call runs, is refused or is cancelled by the first ``approval/resolved`` appended
for it. Answerers race: an ``approval/answer`` listener (a policy, answering at once), the
``approval`` service (the CLI's prompt, a replay), and anyone calling
``agent.resolve_approval`` from any task (a server, a test). Whoever loses is told: a prompt
being asked is cancelled the moment another answer lands. With no answerer the call waits,
until it is resolved or the turn is cancelled (``cancelled``, by ``cancel``).

``always`` is read from the log (per session and tool), so it survives resume. Edited arguments
are checked like the model's (SPEC §9.2) before they are logged: an invalid edit raises
``ValueError`` and leaves the request pending.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

import anyio
import attrs

from dsh_core.services.awaited import AwaitedLog, NotPendingError, ParkedCalls
from dsh_core.session_log._catalogue import (
    APPROVAL_DECISIONS,
    ApprovalDecision,
    ApprovalRequestedEvent,
    ApprovalResolvedEvent,
)
from dsh_core.vocabulary._decisions import Deny
from dsh_core.vocabulary._json import FrozenDict, dumps_json, freeze_json

if TYPE_CHECKING:
    from dsh_core.host._context import Context
    from dsh_core.session_log._event import SessionEvent
    from dsh_core.session_log._session import Session
    from dsh_core.vocabulary._tool_types import ToolExecution

__all__ = [
    "ApprovalAnswer",
    "ApprovalBook",
    "ApprovalNotPendingError",
    "PendingApproval",
    "denial_text",
    "settle_approval",
]


class ApprovalNotPendingError(NotPendingError):
    """``resolve_approval`` for a call that is not waiting: unknown, or already resolved (a ``LookupError``)."""


@attrs.frozen
class PendingApproval:
    """A call waiting for a yes: its ``approval/requested`` record (``seq`` is that event's)."""

    call_id: str
    tool: str
    #: the model's arguments, decoded
    arguments: FrozenDict
    reason: str
    seq: int


def _decision(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in APPROVAL_DECISIONS:
        msg = f"an approval decision is one of {', '.join(APPROVAL_DECISIONS)}; got {value!r}"
        raise (ValueError if isinstance(value, str) else TypeError)(msg)


def _optional_text(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        msg = f"ApprovalAnswer.{attribute.name} must be a str or None, got {type(value).__name__}"
        raise TypeError(msg)


@attrs.frozen
class ApprovalAnswer:
    """What an answerer (an ``approval`` service, an ``approval/answer`` listener) decides.

    ``by`` defaults to the answerer's own name (an ``approval`` service's ``approval_by``, else
    ``policy``); ``arguments`` (a mapping, or JSON text) replace the model's.
    """

    decision: ApprovalDecision = attrs.field(validator=_decision)
    reason: str | None = attrs.field(default=None, validator=_optional_text)
    arguments: Mapping[str, Any] | str | None = None
    by: str | None = attrs.field(default=None, validator=_optional_text)


logger = logging.getLogger("dsh.approvals")

_WHO: Final = {"cli": "the user", "serve": "the user", "api": "the user", "policy": "a policy"}


def denial_text(request: ApprovalRequestedEvent, resolved: ApprovalResolvedEvent) -> str:
    """What the model is told about a call its approval refused: who, and their words."""
    who = _WHO.get(resolved.by, resolved.by)
    if resolved.decision == "cancelled":
        return f"the request for approval ({request.reason}) was cancelled by {who}"
    if resolved.reason:
        return f"{who} denied the call ({request.reason}) and said: {resolved.reason}"
    return f"{who} rejected the call ({request.reason})"


class ApprovalBook:
    """One session's approvals, from its log: what is pending, what was answered, what is ``always``."""

    __slots__ = ("__weakref__", "_always", "_log", "_parked")

    _cache: ClassVar[weakref.WeakValueDictionary[str, ApprovalBook]] = weakref.WeakValueDictionary()

    def __init__(self, log: AwaitedLog[ApprovalRequestedEvent, ApprovalResolvedEvent]) -> None:
        self._log = log
        self._parked = ParkedCalls.of(log.session)  # held: it lives with the book (and the agent)
        self._always: set[str] = {
            request.tool for request, answer in log.answers() if answer.decision == "always"
        }

    @classmethod
    def of(cls, session: Session) -> ApprovalBook:
        """The book of ``session`` (one per live session, made from its log on first use)."""
        book = cls._cache.get(session.id)
        if book is None or book._log.session is not session:
            book = cls(AwaitedLog.of(session, ApprovalRequestedEvent, ApprovalResolvedEvent))
            cls._cache[session.id] = book
        return book

    @property
    def log(self) -> AwaitedLog[ApprovalRequestedEvent, ApprovalResolvedEvent]:
        return self._log

    @property
    def parked(self) -> set[str]:
        """The session's parked calls (``ParkedCalls``: approvals and questions alike) whose wait a
        disposal ended: left unanswered, so the turn is parked in the log and a resume re-opens it."""
        return self._parked.calls

    def pending(self) -> tuple[PendingApproval, ...]:
        return tuple(
            PendingApproval(request.call_id, request.tool, request.arguments, request.reason, seq)
            for request, seq in self._log.pending()
        )

    def always_allows(self, tool: str) -> bool:
        """Whether ``always`` was answered for ``tool`` in this session (so it runs unasked)."""
        return tool in self._always

    def resolve(self, resolved: ApprovalResolvedEvent) -> SessionEvent:
        """Append ``resolved`` if its call is pending. :raises ApprovalNotPendingError: it is not."""
        try:
            request = self._log.check_pending(resolved.call_id)
        except NotPendingError as exc:
            raise ApprovalNotPendingError(str(exc), session_id=exc.session_id, call_id=exc.call_id) from None
        event = self._log.answer(resolved)
        if resolved.decision == "always":
            self._always.add(request.tool)
        return event

    def request_of(self, call_id: str) -> ApprovalRequestedEvent | None:
        entry = self._log.request_of(call_id)
        return None if entry is None else entry[0]


def checked_arguments(ctx: Context, agent_id: str | None, tool: str, arguments: object) -> FrozenDict:
    """Edited ``arguments`` (a mapping or JSON text) checked like the model's: parsed and against the schema.

    :raises ValueError: naming what is wrong (the ``INVALID_ARGS`` text the model would get).
    :raises TypeError: ``arguments`` is neither a mapping nor a str.
    """
    if isinstance(arguments, str):
        text = arguments
    elif isinstance(arguments, Mapping):
        try:
            text = dumps_json(freeze_json(arguments, where=f"arguments for {tool}", root="arguments"))
        except (ValueError, TypeError, RecursionError) as exc:
            msg = f"edited arguments for tool {tool!r} are not JSON: {exc}"
            raise ValueError(msg) from None
    else:
        msg = f"edited arguments are a mapping or JSON text, got {type(arguments).__name__}"
        raise TypeError(msg)
    runtime = getattr(ctx.tools, "runtime", None)
    check = getattr(runtime, "check_arguments", None)
    if check is None:  # a replacement tools service: JSON, an object
        msg = f"the tools service cannot check edited arguments for tool {tool!r}"
        raise ValueError(msg)
    parsed: FrozenDict = check(tool, text, agent_id)
    return parsed


def resolution_of(
    ctx: Context,
    agent_id: str | None,
    request: ApprovalRequestedEvent,
    decision: object,
    *,
    reason: object = None,
    arguments: object = None,
    by: object = "api",
) -> ApprovalResolvedEvent:
    """An ``approval/resolved`` for ``request`` from an answerer's words, checked (SPEC §10.1).

    :raises ValueError: an unknown decision, an empty ``by``, an invalid edit, an edit of a denial.
    :raises TypeError: a value of the wrong type.
    """
    if not isinstance(decision, str):
        msg = f"decision must be one of {', '.join(APPROVAL_DECISIONS)}; got {type(decision).__name__}"
        raise TypeError(msg)
    if decision not in APPROVAL_DECISIONS:
        msg = f"decision must be one of {', '.join(APPROVAL_DECISIONS)}; got {decision!r}"
        raise ValueError(msg)
    if reason is not None and not isinstance(reason, str):
        msg = f"reason must be a str or None, got {type(reason).__name__}"
        raise TypeError(msg)
    if not isinstance(by, str):
        msg = f"by must be a str naming who answered, got {type(by).__name__}"
        raise TypeError(msg)
    if not by:
        msg = "by must name who answered (cli, serve, api, policy, or your own), got ''"
        raise ValueError(msg)
    edited: FrozenDict | None = None
    if arguments is not None:
        if decision not in ("once", "always"):
            msg = f"edited arguments go with a decision that runs the call (once, always), not {decision!r}"
            raise ValueError(msg)
        edited = checked_arguments(ctx, agent_id, request.tool, arguments)
    return ApprovalResolvedEvent(
        call_id=request.call_id,
        decision=decision,
        reason=reason,
        arguments=edited,
        by=by,
    )


async def make_durable(ctx: Context, session: Session) -> None:
    """Flush ``session`` when something makes it durable (no persistence: nothing to wait for)."""
    if ctx.events.has_listeners("session/flush"):
        await ctx.sessions.flush(session)


async def settle_approval(
    ctx: Context, session: Session, execution: ToolExecution, reason: str, book: ApprovalBook | None = None
) -> tuple[ApprovalRequestedEvent, ApprovalResolvedEvent]:
    """Request approval for ``execution`` (unless a parked turn's request is there) and wait for its answer.

    The request is durable before anyone is asked; the answer is durable before this returns (a
    crash after the body ran must not find the call still waiting, and run it twice). A cancel
    of the turn while it waits resolves it ``cancelled`` by ``cancel`` (and propagates).
    """
    if book is None:
        book = ApprovalBook.of(session)
    log = book.log
    call_id = execution.call_id
    request = book.request_of(call_id)
    if request is None:
        arguments = execution.parsed if execution.parsed is not None else FrozenDict()
        if isinstance(arguments, FrozenDict) and call_id.__class__ is str and call_id and reason.__class__ is str:
            request = ApprovalRequestedEvent.trusted(call_id, execution.name, arguments, reason)
        else:  # refused by the validators, naming what is wrong
            request = ApprovalRequestedEvent(call_id=call_id, tool=execution.name, arguments=arguments, reason=reason)
        log.request(request)
        await make_durable(ctx, session)
    resolved = log.answer_of(call_id)
    if resolved is None:
        try:
            resolved = await _race(ctx, session, book, execution, request)
        finally:
            # Disposed while it waits: parked (the turn stays open); cancelled: resolved so.
            log.end_wait(call_id, execution.signal, lambda: _cancelled(call_id))
    await make_durable(ctx, session)
    return request, resolved


def _cancelled(call_id: str) -> ApprovalResolvedEvent:
    return ApprovalResolvedEvent(call_id=call_id, decision="cancelled", by="cancel")


async def _race(
    ctx: Context,
    session: Session,
    book: ApprovalBook,
    execution: ToolExecution,
    request: ApprovalRequestedEvent,
) -> ApprovalResolvedEvent:
    """The first answer: an ``approval/answer`` listener, else the ``approval`` service against the API."""
    log = book.log
    call_id = request.call_id
    events = ctx.events
    if events.has_listeners("approval/answer"):
        entry = log.request_of(call_id)
        seq = entry[1] if entry is not None else -1
        pending = PendingApproval(request.call_id, request.tool, request.arguments, request.reason, seq)
        answer = await events.serial("approval/answer", execution=execution, request=pending)
        if answer is not None and log.answer_of(call_id) is None:
            _record(ctx, execution, book, request, answer, "policy")
    resolved = log.answer_of(call_id)
    if resolved is not None:
        return resolved
    service = ctx.get_service("approval")
    if service is None:
        return await log.wait(call_id)
    with anyio.CancelScope() as scope:
        forget = log.on_answer(call_id, lambda _: scope.cancel())
        try:
            answer = await service.approve(execution, request.reason)
        except Exception as exc:  # noqa: BLE001 - a failing approval channel fails closed, never allows
            answer = Deny(f"asking for approval failed ({type(exc).__name__}: {exc})")
        finally:
            forget()
        if log.answer_of(call_id) is None:
            _record(ctx, execution, book, request, answer, getattr(service, "approval_by", "policy"))
    resolved = log.answer_of(call_id)
    if resolved is None:  # the service's answer was refused (an invalid edit): keep waiting
        return await log.wait(call_id)
    return resolved


def _record(
    ctx: Context,
    execution: ToolExecution,
    book: ApprovalBook,
    request: ApprovalRequestedEvent,
    answer: object,
    by: str,
) -> None:
    """Log an answerer's answer (``True``, ``False``, a ``Deny``, an ``ApprovalAnswer``)."""
    if answer is True:
        if by.__class__ is str and by:
            resolved = ApprovalResolvedEvent.trusted(request.call_id, "once", by)
        else:  # refused by the validators, naming what is wrong
            resolved = ApprovalResolvedEvent(call_id=request.call_id, decision="once", by=by)
    elif answer is False:
        resolved = ApprovalResolvedEvent(call_id=request.call_id, decision="deny", by=by)
    elif isinstance(answer, Deny):
        resolved = ApprovalResolvedEvent(
            call_id=request.call_id, decision="deny", reason=answer.reason, by=by
        )
    elif isinstance(answer, ApprovalAnswer):
        try:
            resolved = resolution_of(
                ctx,
                execution.agent_id,
                request,
                answer.decision,
                reason=answer.reason,
                arguments=answer.arguments,
                by=answer.by or by,
            )
        except ValueError as exc:  # an invalid edit: refused, the request stays pending
            logger.warning("call %r: an answer was refused: %s", request.call_id, exc)
            return
    else:
        msg = f"an approval answerer returned {answer!r}; expected True, False, Deny(reason) or ApprovalAnswer(...)"
        raise TypeError(msg)
    book.resolve(resolved)
