"""The concrete agent: its public verbs (send, steer, inject, cancel, run) and the state the driver reads.

The agent never runs a turn itself: the verbs record what was asked (durably, in the session) and
wake the driver (``_driver.drive``), which is the only code that opens turns and steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from dsh_core.session_log import ContextMessageEvent, InboxClearedEvent, InboxQueuedEvent
from dsh_core.vocabulary import (
    AgentDisposedError,
    AgentOptions,
    AgentStatus,
    CancelSignal,
    Image,
    Text,
    TurnOutcome,
    UserMessage,
    new_id,
)

from ._header import HeaderLog
from ._inbox import Inbox, InboxKind, Queued

if TYPE_CHECKING:
    from dsh_core.host import Context
    from dsh_core.services.sessions import Session
    from dsh_core.vocabulary import Message

__all__ = ["Agent"]

_DEFAULT_SOURCES: dict[str, dict[str, str]] = {
    "send": {"kind": "user"},
    "steer": {"kind": "steering"},
    "inject": {"kind": "context"},
}


class _Waiter:
    """One ``run()`` call waiting for the turn that consumes its prompt."""

    __slots__ = ("done", "outcome")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.outcome: TurnOutcome | None = None

    def resolve(self, outcome: TurnOutcome) -> None:
        if self.outcome is None:
            self.outcome = outcome
            self.done.set()


class Agent:
    """One agent: a session, an inbox and a driver. Made only by the agent loop's factory."""

    def __init__(
        self, *, ctx: Context, session: Session, options: AgentOptions, inbox: Inbox, last_turn: int
    ) -> None:
        self._ctx = ctx
        self._session = session
        self._options = options
        self.inbox = inbox
        self.status_value: AgentStatus = "idle"
        #: a send (or idle steer) asked the driver to run a turn
        self.wake_requested = False
        #: idle injections appended but not yet flushed
        self.flush_wanted = False
        #: set by cancel(); the driver drops or aborts exactly one turn, then resets it
        self.cancel_marker = False
        #: teardown started: the driver finishes the running turn (ending ``disposed``) and exits
        self.stopping = False
        self.turn_signal: CancelSignal | None = None
        self.last_turn = last_turn
        self.prefix: tuple[Message, ...] | None = None
        self.header = HeaderLog()
        self.wake_event = anyio.Event()
        self.settled = anyio.Event()
        self.settled.set()
        self.waiters: dict[str, _Waiter] = {}
        #: every id ever queued in this session (from the log, then each accept): a caller-chosen
        #: id seen again is a retried send, which must not be queued twice
        self.known_ids: set[str] = {
            str(event.data["id"]) for event in session.events if event.type == InboxQueuedEvent.type
        }

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
        return self.status_value

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
        if self._seen(id):
            return id  # type: ignore[return-value]  # _seen is true only for a str
        item = self._accept("send", content, source, id=id)
        self._wake()
        return item.id

    def _send_awaited(self, content: Any, source: Mapping[str, Any] | None) -> _Waiter:
        """``send`` whose waiter exists before ``agent/queued`` fires (a listener may cancel)."""
        waiter = _Waiter()
        self._accept("send", content, source, waiter)
        self._wake()
        return waiter

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
        if self._seen(id):
            return id  # type: ignore[return-value]  # _seen is true only for a str
        running = self.status_value == "running"
        item = self._accept("steer" if running else "send", content, source or _DEFAULT_SOURCES["steer"], id=id)
        if not running:
            self._wake()
        return item.id

    def inject(self, content: str | Sequence[Text | Image], source: Mapping[str, Any] | None = None) -> None:
        """Add model-visible context without waking the driver.

        Running: it lands at the next step. Idle: it is appended to the session at once and
        flushed durably in the background, riding with the next turn.
        """
        if self.status_value == "running" or self.wake_requested:
            self._accept("inject", content, source)
            return
        self._check_alive()
        message = UserMessage(content=content, source=source or _DEFAULT_SOURCES["inject"])
        self._session.append(ContextMessageEvent(message=message))
        self.flush_wanted = True
        self._mark_busy()
        self.wake_event.set()

    def cancel(self) -> None:
        """Stop the running turn and drop everything queued.

        Idempotent; never raises. The turn ends ``aborted``. Queued prompts are recorded as
        ``inbox/cleared`` before they are dropped. While idle with nothing queued this is a no-op
        that arms nothing: the next ``send`` runs normally.
        """
        if self.status_value == "disposed":
            return
        self._abort("cancelled")

    async def when_idle(self) -> None:
        """Wait until nothing is running or queued to run. Never raises."""
        while not self.settled.is_set():
            await self.settled.wait()

    async def run(
        self, content: str | Sequence[Text | Image], source: Mapping[str, Any] | None = None
    ) -> TurnOutcome:
        """Send a prompt and wait for the turn that consumes it; returns how that turn ended."""
        waiter = self._send_awaited(content, source)
        await waiter.done.wait()
        assert waiter.outcome is not None
        return waiter.outcome

    def __repr__(self) -> str:
        return f"<Agent {self.id!r} {self.status_value}>"

    # ------------------------------------------------------------------ for the driver and the loop

    def _seen(self, ident: str | None) -> bool:
        """Whether a caller-chosen id was already queued (a retried send); checks its type first."""
        if ident is None:
            return False
        if not isinstance(ident, str):
            msg = f"id must be a str or None, got {type(ident).__name__}"
            raise TypeError(msg)
        if not ident:
            msg = "id must not be empty; pass None to let the agent choose one"
            raise ValueError(msg)
        self._check_alive()
        return ident in self.known_ids

    def _accept(
        self,
        kind: InboxKind,
        content: Any,
        source: Mapping[str, Any] | None,
        waiter: _Waiter | None = None,
        *,
        id: str | None = None,
    ) -> Queued:
        self._check_alive()
        message = UserMessage(content=content, source=source or _DEFAULT_SOURCES[kind])
        item = Queued(id or new_id(), kind, message)
        self._session.append(InboxQueuedEvent(id=item.id, kind=item.kind, message=message))
        self.known_ids.add(item.id)
        self.inbox.put(item)
        if waiter is not None:
            self.waiters[item.id] = waiter
        self._ctx.events.notify_sync("agent/queued", agent=self, message=item)
        return item

    def _wake(self) -> None:
        self.wake_requested = True
        self._mark_busy()
        self.wake_event.set()

    def _mark_busy(self) -> None:
        if self.settled.is_set():
            self.settled = anyio.Event()

    def _check_alive(self) -> None:
        if self.stopping or self.status_value == "disposed":
            msg = f"agent {self.id!r} is disposed; create or resume a new agent to continue its session"
            raise AgentDisposedError(msg)

    def _abort(self, reason: str) -> None:
        """Clear the inbox (durably) and abort the turn that is running or about to run."""
        active = self.status_value == "running" or self.wake_requested
        cleared = self.inbox.clear()
        if cleared:
            self._session.append(InboxClearedEvent(ids=cleared))
            kind = "disposed" if reason == "disposed" else "aborted"
            self.resolve_waiters(cleared, TurnOutcome({"kind": kind}, None))
        if not active:
            return
        self.cancel_marker = True
        if self.turn_signal is not None:
            self.turn_signal.cancel(reason)

    def resolve_waiters(self, ids: Sequence[str], outcome: TurnOutcome) -> None:
        for ident in ids:
            waiter = self.waiters.pop(ident, None)
            if waiter is not None:
                waiter.resolve(outcome)

    def resolve_all_waiters(self, outcome: TurnOutcome) -> None:
        self.resolve_waiters(list(self.waiters), outcome)
