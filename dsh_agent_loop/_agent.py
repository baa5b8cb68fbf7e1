"""The concrete agent: its public verbs (send, steer, inject, cancel, run, run_pending).

The agent never runs a turn itself and keeps no state of its own: a verb checks and records what
was asked, and hands it to the agent's ``AgentMachine`` (``_machine.py``), which owns the state,
the durable inbox and the waiters, and wakes the driver (``_driver.drive``), the only code that
opens turns and steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dsh_core.services.approvals import (
    ApprovalBook,
    ApprovalNotPendingError,
    PendingApproval,
    make_durable,
    resolution_of,
)
from dsh_core.services.awaited import NotPendingError, ParkedCalls
from dsh_core.services.questions import PendingQuestion, answer_question, pending_questions
from dsh_core.vocabulary import AgentOptions, AgentStatus, Image, Text, TurnOutcome, UserMessage, new_id

from ._header import HeaderLog
from ._inbox import InboxKind, Queued
from ._machine import AgentMachine, Waiter

if TYPE_CHECKING:
    from dsh_core.host import Context
    from dsh_core.llm import LlmCallConfig
    from dsh_core.services import AssemblyContext
    from dsh_core.services.sessions import Session
    from dsh_core.session_log import SessionEvent
    from dsh_core.vocabulary import Message

__all__ = ["Agent"]


_DEFAULT_SOURCES: dict[str, dict[str, str]] = {
    "send": {"kind": "user"},
    "steer": {"kind": "steering"},
    "inject": {"kind": "context"},
}


class Agent:
    """One agent: a session, its state machine and a driver. Made only by the agent loop's factory."""

    __slots__ = (
        "__weakref__",
        "_approvals",
        "_ctx",
        "_options",
        "_parked",
        "_session",
        "assembly_context",
        "call_config",
        "header",
        "machine",
        "prefix",
    )

    def __init__(self, *, ctx: Context, session: Session, options: AgentOptions) -> None:
        self._ctx = ctx
        self._session = session
        self._options = options
        #: the state, the durable inbox and the waiters; the one place the agent's state changes
        self.machine = AgentMachine(session)
        #: the session prefix, fixed at this instance's first step (``agent/session-prefix``)
        self.prefix: tuple[Message, ...] | None = None
        self.header = HeaderLog()
        #: the options as the seed of ``agent/request``, built at the first step (``_step``)
        self.call_config: LlmCallConfig | None = None
        #: whom the system prompt is assembled for, built at the first step (id, scope, cwd and
        #: model never change for an agent)
        self.assembly_context: AssemblyContext | None = None
        #: the session's approvals (made from the log on first use; held here so it lives with the agent)
        self._approvals: ApprovalBook | None = None
        #: the calls a disposal parked, approvals and questions alike (held: the cache is weak)
        self._parked = ParkedCalls.of(session)

    # ------------------------------------------------------------------ what the Agent protocol exposes

    @property
    def id(self) -> str:
        return self._session.id

    @property
    def session(self) -> Session:
        return self._session

    @property
    def options(self) -> AgentOptions:
        return self._options

    @property
    def status(self) -> AgentStatus:
        return self.machine.status

    @property
    def ctx(self) -> Context:
        return self._ctx

    def send(
        self,
        content: str | Sequence[Text | Image],
        source: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
    ) -> str:
        """Queue a prompt for a turn and wake the driver; returns the queued id.

        The prompt is recorded as ``inbox/queued`` before this returns, so it survives a crash.
        Bad content raises (``TypeError``/``ValueError``) and nothing is queued. A caller-chosen
        ``id`` makes the send idempotent: an id already queued in this session's log (pending,
        consumed or cleared) is not queued again, and the call just returns it.
        """
        if id is not None and self._seen(id):
            return id
        item = self._accept("send", content, source, id=id)
        self.machine.request_turn()
        return item.id

    def steer(
        self,
        content: str | Sequence[Text | Image],
        source: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
    ) -> str:
        """Add steering for the next step of the running turn; while idle, behave like ``send``.

        ``id`` is idempotent as for ``send``.
        """
        if id is not None and self._seen(id):
            return id
        if self.machine.running:
            return self._accept("steer", content, source or _DEFAULT_SOURCES["steer"], id=id).id
        item = self._accept("send", content, source or _DEFAULT_SOURCES["steer"], id=id)
        self.machine.request_turn()
        return item.id

    def inject(
        self,
        content: str | Sequence[Text | Image],
        source: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
    ) -> None:
        """Add model-visible context without waking the driver.

        Running (or a turn about to start): it lands at the next step (recorded as
        ``inbox/queued`` until then, under ``id``). Idle: it is appended to the session at once as
        ``context/message`` (whose message has ``id``) and flushed durably in the background,
        riding with the next turn. A caller-chosen ``id`` makes it idempotent as for ``send``: an
        id already queued or injected in this session's log is not added again (a retried
        inject, e.g. by a retried Temporal activity).
        """
        if id is not None and self._seen(id):
            return
        machine = self.machine
        if machine.turn_due:
            self._accept("inject", content, source, id=id)
            return
        machine.check_alive(self.id)
        message = UserMessage(content=content, source=source or _DEFAULT_SOURCES["inject"], id=id or new_id())
        machine.append_idle_context(message)

    def cancel(self) -> None:
        """Stop the running turn and drop everything queued.

        Idempotent; never raises. The turn ends ``aborted``. Queued prompts are recorded as
        ``inbox/cleared`` before they are dropped. While idle with nothing queued this is a no-op
        that arms nothing: the next ``send`` runs normally.
        """
        self.machine.cancel()

    def run_pending(self) -> bool:
        """Start a turn for the prompts restored from the log, without a new ``send``.

        A resumed agent holds the prompts that were pending when its session was stored (queued,
        never consumed nor cleared) until the next ``send``; this runs them now instead. Returns
        whether a turn was asked for (``False`` when nothing is pending). Raises
        ``AgentDisposedError`` once the agent is disposed. ``ctx.agents.resume(...,
        run_pending=True)`` calls it.
        """
        self.machine.check_alive(self.id)
        return self.machine.run_pending()

    async def when_idle(self) -> None:
        """Wait until nothing is running or queued to run. Never raises."""
        await self.machine.wait_until_settled()

    async def run(
        self, content: str | Sequence[Text | Image], source: Mapping[str, Any] | None = None
    ) -> TurnOutcome:
        """Send a prompt and wait for the turn that consumes it; returns how that turn ended."""
        waiter = Waiter()  # exists before agent/queued fires: a listener may cancel
        self._accept("send", content, source, waiter)
        self.machine.request_turn()
        await waiter.done.wait()
        assert waiter.outcome is not None
        return waiter.outcome

    def pending_approvals(self) -> tuple[PendingApproval, ...]:
        """The calls waiting for a yes (their ``approval/requested`` without ``approval/resolved``), in log order."""
        return self.approvals.pending()

    async def resolve_approval(
        self,
        call_id: str,
        decision: str,
        *,
        reason: str | None = None,
        arguments: Mapping[str, Any] | str | None = None,
        by: str = "api",
    ) -> SessionEvent:
        """Answer the pending approval of ``call_id``, from any task; returns the ``approval/resolved`` event.

        ``decision`` is ``once``, ``always`` (this tool, for the rest of the session), ``deny``
        (``reason``, if given, is told to the model) or ``cancelled``. ``arguments`` (a mapping or
        JSON text) replace the model's and are checked like them. The first resolution appended
        wins; the event is durable when this returns.

        :raises ApprovalNotPendingError: ``call_id`` is unknown or already resolved (a ``LookupError``).
        :raises ValueError: a malformed decision or ``by``, or edited arguments the tool refuses
            (the request stays pending). :raises TypeError: a value of the wrong type.
        """
        if not isinstance(call_id, str):
            msg = f"call_id must be a str, got {type(call_id).__name__}"
            raise TypeError(msg)
        self.machine.check_alive(self.id)
        book = self.approvals
        try:
            request = book.log.check_pending(call_id)
        except NotPendingError as exc:
            raise ApprovalNotPendingError(str(exc), session_id=exc.session_id, call_id=call_id) from None
        resolved = resolution_of(self._ctx, self.id, request, decision, reason=reason, arguments=arguments, by=by)
        event = book.resolve(resolved)
        await make_durable(self._ctx, self._session)
        return event

    def pending_questions(self) -> tuple[PendingQuestion, ...]:
        """The ``ask_user`` calls waiting for answers (``question/asked`` without ``question/answered``), in log order."""
        return pending_questions(self._session)

    async def answer_question(self, call_id: str, answers: Mapping[str, Any], *, by: str = "api") -> SessionEvent:
        """Answer the pending question of ``call_id`` from any task: ``answers`` maps each question's id
        to the chosen option, options (``multi_select``) or the user's text. The first answer appended
        wins; the ``question/answered`` event is durable when this returns.

        :raises QuestionNotPendingError: ``call_id`` is unknown or already answered (a ``LookupError``).
        :raises ValueError, TypeError: malformed answers (the question stays pending).
        """
        self.machine.check_alive(self.id)
        return await answer_question(self._ctx, self._session, call_id, answers, by=by)

    def parked_calls(self) -> set[str]:
        """The calls whose wait (for approval, for answers) a disposal ended: the loop logs nothing
        more for them, so their turn stays parked in the log and a resume asks again."""
        return self._parked.calls

    #: the name this had when only approvals parked calls
    approvals_parked = parked_calls

    @property
    def approvals(self) -> ApprovalBook:
        book = self._approvals
        if book is None:
            book = self._approvals = ApprovalBook.of(self._session)
        return book

    def __repr__(self) -> str:
        return f"<Agent {self.id!r} {self.machine.state.value}>"

    # ------------------------------------------------------------------ checks and recording

    def _seen(self, ident: str) -> bool:
        """Whether a caller-chosen id was already queued (a retried send); checks its type first."""
        if not isinstance(ident, str):
            msg = f"id must be a str or None, got {type(ident).__name__}"
            raise TypeError(msg)
        if not ident:
            msg = "id must not be empty; pass None to let the agent choose one"
            raise ValueError(msg)
        self.machine.check_alive(self.id)
        return self.machine.knows(ident)

    def _accept(
        self,
        kind: InboxKind,
        content: Any,
        source: Mapping[str, Any] | None,
        waiter: Waiter | None = None,
        *,
        id: str | None = None,
    ) -> Queued:
        self.machine.check_alive(self.id)
        message = UserMessage(content=content, source=source or _DEFAULT_SOURCES[kind])
        item = Queued(id or new_id(), kind, message)
        self.machine.accept(item, waiter)
        self._ctx.events.notify_sync("agent/queued", agent=self, message=item)
        return item
