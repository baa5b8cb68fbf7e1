"""Questions to the user as logged records (SPEC §10.6): ``ask_user`` waits like an approval, on the same machinery.

``question/asked`` is appended and made durable before anyone is asked; the first
``question/answered`` appended for its ``call_id`` is the answer (``AwaitedLog``, shared with
approvals). Answerers race: the ``question`` service (the CLI's chooser), and anyone calling
``agent.answer_question`` from any task (a server, a test). With no answerer the call waits until
it is answered or the turn is cancelled (``answers`` ``{}``, by ``cancel``); when the agent is
disposed while it waits, the call is parked like an approval's (the turn stays open in the log, and
a resume asks again). A ``question`` service
that answers ``None`` says that nobody can be asked (``dsh run`` without a terminal): the question
is closed (by ``unavailable``) and the tool tells the model so at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio
import attrs

from dsh_core.services.approvals import make_durable
from dsh_core.services.awaited import AwaitedLog, NotPendingError
from dsh_core.session_log._catalogue import QuestionAnsweredEvent, QuestionAskedEvent
from dsh_core.vocabulary._json import FrozenDict, freeze_json_object

if TYPE_CHECKING:
    from dsh_core.host._context import Context
    from dsh_core.session_log._event import SessionEvent
    from dsh_core.session_log._session import Session
    from dsh_core.vocabulary._tool_types import ToolExecution

__all__ = [
    "NobodyToAskError",
    "PendingQuestion",
    "QuestionChannel",
    "QuestionNotPendingError",
    "answer_question",
    "ask_questions",
    "checked_answers",
    "closed_question",
    "pending_questions",
    "question_log",
]

logger = logging.getLogger("dsh.questions")


class QuestionNotPendingError(NotPendingError):
    """``answer_question`` for a call that is not waiting: unknown, or already answered (a ``LookupError``)."""


class NobodyToAskError(RuntimeError):
    """The ``question`` service says nobody can be asked here (no terminal, no page)."""


@attrs.frozen
class PendingQuestion:
    """An ``ask_user`` call waiting for its answers: its ``question/asked`` record (``seq`` is that event's)."""

    call_id: str
    #: each ``{id, question, options?, multi_select?}``
    questions: tuple[FrozenDict, ...]
    seq: int


@runtime_checkable
class QuestionChannel(Protocol):
    """``ctx.question``: asks someone (a terminal's chooser) the questions of an ``ask_user`` call."""

    async def ask(self, execution: ToolExecution, question: PendingQuestion) -> Mapping[str, Any] | None:
        """The answers (question id -> option, options or text), or ``None`` when nobody can be asked.

        Cancelled when another answerer answers first; cancellation must pass through.
        """
        ...


def closed_question(call_id: str, by: str) -> QuestionAnsweredEvent:
    """The answer that closes a question nobody answered: ``{}``, by ``cancel`` or ``repair``."""
    return QuestionAnsweredEvent(call_id=call_id, answers=FrozenDict(), by=by)


def question_log(session: Session) -> AwaitedLog[QuestionAskedEvent, QuestionAnsweredEvent]:
    """The questions of ``session``, from its log (one per live session)."""
    return AwaitedLog.of(session, QuestionAskedEvent, QuestionAnsweredEvent)


def pending_questions(session: Session) -> tuple[PendingQuestion, ...]:
    """The questions of ``session`` without an answer, in log order."""
    return tuple(
        PendingQuestion(request.call_id, request.questions, seq) for request, seq in question_log(session).pending()
    )


def checked_answers(request: QuestionAskedEvent, answers: object) -> FrozenDict:
    """``answers`` for ``request`` checked: a mapping of each question's id to a str, or a list of str
    for a ``multi_select`` question; no id that was not asked; every question answered.

    :raises TypeError: ``answers`` is not a mapping. :raises ValueError: naming what is wrong.
    """
    if not isinstance(answers, Mapping):
        msg = f"answers must be a mapping of question id to the answer, got {type(answers).__name__}"
        raise TypeError(msg)
    asked = {str(question["id"]): question for question in request.questions}
    unknown = sorted(str(key) for key in answers if key not in asked)
    if unknown:
        msg = f"answers name questions that were not asked: {', '.join(unknown)} (asked: {', '.join(asked)})"
        raise ValueError(msg)
    missing = [key for key in asked if key not in answers]
    if missing:
        msg = f"answers leave questions unanswered: {', '.join(missing)}"
        raise ValueError(msg)
    for key, value in answers.items():
        many = asked[key].get("multi_select", False)
        if isinstance(value, str):
            continue
        if many and isinstance(value, Sequence) and all(isinstance(item, str) for item in value):
            continue
        kind = "a str or a list of str" if many else "a str"
        msg = f"answers[{key!r}] must be {kind}, got {value!r}"
        raise ValueError(msg)
    return freeze_json_object(dict(answers), where=QuestionAnsweredEvent.type, root="answers")


async def answer_question(
    ctx: Context, session: Session, call_id: str, answers: object, *, by: str = "api"
) -> SessionEvent:
    """Answer the pending question of ``call_id``; the ``question/answered`` event is durable on return.

    :raises QuestionNotPendingError: nothing of ``call_id`` is pending.
    :raises ValueError, TypeError: malformed answers or ``by`` (the question stays pending).
    """
    if not isinstance(by, str) or not by:
        msg = f"by must be a non-empty str naming who answered, got {by!r}"
        raise (ValueError if isinstance(by, str) else TypeError)(msg)
    log = question_log(session)
    try:
        request = log.check_pending(call_id)
    except NotPendingError as exc:
        raise QuestionNotPendingError(str(exc), session_id=exc.session_id, call_id=call_id) from None
    event = log.answer(QuestionAnsweredEvent(call_id=call_id, answers=checked_answers(request, answers), by=by))
    await make_durable(ctx, session)
    return event


async def ask_questions(
    ctx: Context, session: Session, execution: ToolExecution, questions: object
) -> QuestionAnsweredEvent:
    """Log the questions of ``execution`` (durably) and wait for the first answer.

    A cancel while it waits answers ``{}`` by ``cancel`` and propagates.

    :raises NobodyToAskError: the ``question`` service says nobody can be asked.
    :raises ValueError, TypeError: malformed ``questions`` (nothing is logged).
    """
    log = question_log(session)
    call_id = execution.call_id
    entry = log.request_of(call_id)
    if entry is None:
        request = QuestionAskedEvent(call_id=call_id, questions=questions)
        event = log.request(request)
        entry = (request, event.seq)
    request, seq = entry
    try:
        await make_durable(ctx, session)
        answered = log.answer_of(call_id) or await _race(ctx, log, execution, PendingQuestion(call_id, request.questions, seq))
    finally:
        # Disposed while it waits: parked as an approval is (the loop logs nothing more for it, the
        # turn stays open and the next resume asks again); cancelled: closed ``{}`` by ``cancel``.
        log.end_wait(call_id, execution.signal, lambda: closed_question(call_id, "cancel"))
    await make_durable(ctx, session)
    if answered.by == "unavailable":
        msg = "nobody can be asked here"
        raise NobodyToAskError(msg)
    return answered


async def _race(
    ctx: Context,
    log: AwaitedLog[QuestionAskedEvent, QuestionAnsweredEvent],
    execution: ToolExecution,
    pending: PendingQuestion,
) -> QuestionAnsweredEvent:
    call_id = pending.call_id
    scope_ctx = execution.ctx if execution.ctx is not None else ctx
    service = scope_ctx.get_service("question")
    if service is None:
        return await log.wait(call_id)
    with anyio.CancelScope() as scope:
        forget = log.on_answer(call_id, lambda _: scope.cancel())
        try:
            answers = await service.ask(execution, pending)
        finally:
            forget()
        if log.answer_of(call_id) is None:
            by = str(getattr(service, "question_by", "cli"))
            if answers is None:
                log.answer(QuestionAnsweredEvent(call_id=call_id, answers=FrozenDict(), by="unavailable"))
            else:
                request = log.check_pending(call_id)
                try:
                    log.answer(QuestionAnsweredEvent(call_id=call_id, answers=checked_answers(request, answers), by=by))
                except (TypeError, ValueError) as exc:  # a bad answer: refused, the question stays pending
                    logger.warning("call %r: an answer was refused: %s", call_id, exc)
    found = log.answer_of(call_id)
    return found if found is not None else await log.wait(call_id)
