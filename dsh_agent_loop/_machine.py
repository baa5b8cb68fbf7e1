"""The agent's lifecycle as one state machine: its states, every legal transition, the inbox, the waiters.

The verbs (``send``, ``steer``, ``inject``, ``cancel``), the driver and the teardown never set a
flag of their own: each asks this machine, and ``AgentMachine._to`` is the one place a state
changes. It refuses a transition that ``TRANSITIONS`` does not list with ``IllegalTransitionError``
(a bug in the loop, never a user error: misuse through the public verbs is refused before, with
``AgentDisposedError``). The legal transitions and who makes them:

=========  =========  ==============================================================
from       to         when
=========  =========  ==============================================================
IDLE       WOKEN      ``request_turn`` (a send, an idle steer, ``run_pending``) or
                      ``request_flush`` (an idle inject)
WOKEN      RUNNING    ``begin_turn``: the driver opens a turn for the queued prompts
WOKEN      IDLING     ``idle_work``: nothing queued (an idle inject, or a cancel took the
                      prompts): the driver flushes
RUNNING    RUNNING    ``begin_turn``: more prompts were queued during the turn
RUNNING    IDLING     ``end_of_work``: nothing queued; the driver announces ``idle``
IDLING     IDLE       ``settle``: the idle work is done and nothing woke the agent
IDLING     WOKEN      ``request_turn`` / ``request_flush`` during the idle work
IDLE, IDLING,
RUNNING    STOPPING   ``stop`` (teardown); a running turn ends ``disposed``
WOKEN      DRAINING   ``stop`` while work was due: the driver still flushes
DRAINING   STOPPING   ``drained``: that flush is done
DRAINING,
STOPPING   DISPOSED   ``dispose``: the driver has exited (or never ran)
=========  =========  ==============================================================

``status`` (SPEC §5) is read from the state: ``idle`` for IDLE, WOKEN and IDLING, ``running`` for
RUNNING, ``disposed`` from the moment teardown starts. ``docs/architecture.md`` draws the same
machine and the path of one prompt through it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

import anyio

from dsh_core.session_log import (
    ContextMessageEvent,
    InboxClearedEvent,
    InboxQueuedEvent,
    ParkedTurn,
    SessionEvent,
    parked_turn,
)
from dsh_core.vocabulary import (
    AgentDisposedError,
    AgentStatus,
    CancelSignal,
    DshError,
    TurnOutcome,
    UserMessage,
)

from ._inbox import Inbox, Queued

if TYPE_CHECKING:
    from dsh_core.services.sessions import Session

__all__ = ["TRANSITIONS", "AgentMachine", "AgentState", "IllegalTransitionError", "Waiter"]


class AgentState(enum.Enum):
    """Where an agent is in its life. Only ``AgentMachine`` moves it."""

    #: nothing running or due; the driver waits for work; ``when_idle()`` returns at once
    IDLE = "idle"
    #: work is due and the driver has not taken it yet: a turn for the queued prompts, or (none
    #: queued) a flush of what was appended while idle
    WOKEN = "woken"
    #: a turn is open, or the driver is between two turns of one busy spell
    RUNNING = "running"
    #: the driver does idle work (announces ``idle``, or flushes an idle injection); IDLE when done
    #: unless woken meanwhile
    IDLING = "idling"
    #: teardown started while work was due: the driver flushes what was appended, then stops
    DRAINING = "draining"
    #: teardown started: the running turn (if any) ends ``disposed`` and the driver exits
    STOPPING = "stopping"
    #: teardown finished; nothing is accepted any more
    DISPOSED = "disposed"


_S = AgentState

#: every legal transition; anything else is refused by ``AgentMachine._to``
TRANSITIONS: Final[Mapping[AgentState, frozenset[AgentState]]] = {
    _S.IDLE: frozenset({_S.WOKEN, _S.STOPPING}),
    _S.WOKEN: frozenset({_S.RUNNING, _S.IDLING, _S.DRAINING}),
    _S.RUNNING: frozenset({_S.RUNNING, _S.IDLING, _S.STOPPING}),
    _S.IDLING: frozenset({_S.IDLE, _S.WOKEN, _S.STOPPING}),
    _S.DRAINING: frozenset({_S.STOPPING, _S.DISPOSED}),
    _S.STOPPING: frozenset({_S.DISPOSED}),
    _S.DISPOSED: frozenset(),
}

_STATUS: Final[Mapping[AgentState, AgentStatus]] = {
    _S.IDLE: "idle",
    _S.WOKEN: "idle",
    _S.IDLING: "idle",
    _S.RUNNING: "running",
    _S.DRAINING: "disposed",
    _S.STOPPING: "disposed",
    _S.DISPOSED: "disposed",
}

_ENDED: Final = frozenset({_S.DRAINING, _S.STOPPING, _S.DISPOSED})


_ID_TYPES: Final = frozenset({InboxQueuedEvent.type, ContextMessageEvent.type})


def _id_of(event: SessionEvent) -> str:
    """The id an ``inbox/queued`` record or a (possibly idle-injected) ``context/message`` carries."""
    payload = event.payload  # read at admission: no JSON is built for an event appended typed
    if isinstance(payload, InboxQueuedEvent):
        return payload.id
    return payload.message.id if isinstance(payload, ContextMessageEvent) else ""


class IllegalTransitionError(DshError, RuntimeError):
    """The loop asked for a state change that ``TRANSITIONS`` does not allow (a bug in the loop)."""

    def __init__(self, message: str, *, agent_id: str, source: AgentState, target: AgentState) -> None:
        super().__init__(message)
        self.agent_id = agent_id
        self.source = source
        self.target = target


class Waiter:
    """One ``run()`` call waiting for the turn that consumes its prompt."""

    __slots__ = ("done", "outcome")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.outcome: TurnOutcome | None = None

    def resolve(self, outcome: TurnOutcome) -> None:
        if self.outcome is None:
            self.outcome = outcome
            self.done.set()


class AgentMachine:
    """One agent's state, its durable inbox and everything that waits on it.

    Synchronous throughout (the verbs are synchronous): a method either changes the state through
    ``_to`` or only reads it; the waits (``wait_for_work``, ``wait_until_settled``) only await
    events that ``_to`` sets.
    """

    __slots__ = ("_known", "_session", "_settled", "_state", "_wake", "inbox", "parked", "turn_signal", "waiters")

    def __init__(self, session: Session) -> None:
        self._session = session
        self._state = AgentState.IDLE
        self.inbox = Inbox.restore(session.events)
        #: the turn the log ends in, parked on an approval (SPEC §10.1): the next turn the driver
        #: runs re-opens it instead of starting one
        self.parked: ParkedTurn | None = parked_turn(session.events) if session.open_turn is not None else None
        #: every id ever queued or injected in this session (from the log, then each accept): a
        #: caller-chosen id seen again is a retried send or inject, which must not count twice
        #: (None while empty: an idle agent with a fresh log keeps no set)
        known = {_id_of(event) for event in session.events if event.type in _ID_TYPES}
        self._known: set[str] | None = known or None
        #: run() calls by the id of the prompt they sent
        self.waiters: dict[str, Waiter] = {}
        #: the signal of the turn that runs (or was last run); ``cancel()`` and ``stop()`` cancel it
        self.turn_signal: CancelSignal | None = None
        self._wake: anyio.Event | None = None
        self._settled: anyio.Event | None = None

    # ------------------------------------------------------------------ reading

    @property
    def state(self) -> AgentState:
        return self._state

    @property
    def status(self) -> AgentStatus:
        """The public status (SPEC §5) this state shows."""
        return _STATUS[self._state]

    @property
    def running(self) -> bool:
        return self._state is AgentState.RUNNING

    @property
    def turn_due(self) -> bool:
        """A turn is running or about to: context injected now rides with one of its steps."""
        state = self._state
        return state is AgentState.RUNNING or (
            state is AgentState.WOKEN and (bool(self.inbox.queued) or self.parked is not None)
        )

    def knows(self, ident: str) -> bool:
        """Whether ``ident`` was ever queued (pending, consumed or cleared) or injected in this session."""
        return self._known is not None and ident in self._known

    def check_alive(self, agent_id: str) -> None:
        """Refuse a verb once teardown started."""
        if self._state in _ENDED:
            msg = f"agent {agent_id!r} is disposed; create or resume a new agent to continue its session"
            raise AgentDisposedError(msg)

    # ------------------------------------------------------------------ the one place a state changes

    def _to(self, target: AgentState) -> None:
        source = self._state
        if target not in TRANSITIONS[source]:
            allowed = ", ".join(sorted(state.value for state in TRANSITIONS[source])) or "nothing (it is final)"
            msg = (
                f"agent {self._session.id!r}: illegal state transition {source.value} -> {target.value}; "
                f"from {source.value} an agent may go to: {allowed}"
            )
            raise IllegalTransitionError(msg, agent_id=self._session.id, source=source, target=target)
        self._state = target
        if source is AgentState.IDLE and self._wake is not None:
            self._wake.set()
            self._wake = None
        if (target is AgentState.IDLE or target is AgentState.DISPOSED) and self._settled is not None:
            self._settled.set()
            self._settled = None

    # ------------------------------------------------------------------ the verbs' side

    def accept(self, item: Queued, waiter: Waiter | None = None) -> None:
        """Record ``item`` as ``inbox/queued`` and queue it; a prompt releases the restored ones first.

        Raises whatever the append raises (nothing is queued then).
        """
        self._session.append(InboxQueuedEvent(id=item.id, kind=item.kind, message=item.message))
        self._remember(item.id)
        inbox = self.inbox
        if item.kind == "send":
            inbox.release_held()
        inbox.put(item)
        if waiter is not None:
            self.waiters[item.id] = waiter

    def append_idle_context(self, message: UserMessage) -> None:
        """An idle inject: ``context/message`` now, and the driver woken to flush it."""
        self._session.append(ContextMessageEvent(message=message))
        self._remember(message.id)
        self.request_flush()

    def _remember(self, ident: str) -> None:
        if self._known is None:
            self._known = {ident}
        else:
            self._known.add(ident)

    def request_turn(self) -> None:
        """Wake the driver to run the queued prompts (IDLE or IDLING -> WOKEN); nothing queued: no-op."""
        if self.inbox.queued and (self._state is AgentState.IDLE or self._state is AgentState.IDLING):
            self._to(AgentState.WOKEN)

    def reopen_parked(self) -> None:
        """Wake the driver to re-open the parked turn (if the log ends in one)."""
        if self.parked is not None and self._state is AgentState.IDLE:
            self._to(AgentState.WOKEN)

    def take_parked(self) -> ParkedTurn | None:
        """The parked turn for the turn about to run, once."""
        parked, self.parked = self.parked, None
        return parked

    def request_flush(self) -> None:
        """Wake the driver to flush what was appended while idle (IDLE or IDLING -> WOKEN)."""
        if self._state is AgentState.IDLE or self._state is AgentState.IDLING:
            self._to(AgentState.WOKEN)

    def run_pending(self) -> bool:
        """Release the prompts restored from the log and wake the driver for them."""
        self.inbox.release_held()
        if not self.inbox.queued:
            return False
        self.request_turn()
        return True

    def cancel(self, reason: str = "cancelled") -> None:
        """Clear the inbox (recorded as ``inbox/cleared``) and cancel the running turn's signal.

        No transition: a RUNNING turn closes ``aborted`` by itself; a WOKEN driver finds no prompt
        left and flushes instead. Once teardown started this does nothing.
        """
        if self._state in _ENDED:
            return
        self._clear("disposed" if reason == "disposed" else "aborted")
        if self._state is AgentState.RUNNING and self.turn_signal is not None:
            self.turn_signal.cancel(reason)

    def stop(self) -> None:
        """Teardown starts: clear the inbox, end the running turn ``disposed``, let the driver exit.

        Idempotent. WOKEN -> DRAINING (the driver still flushes what was appended), any other
        live state -> STOPPING.
        """
        state = self._state
        if state in _ENDED:
            return
        self._clear("disposed")
        if state is AgentState.RUNNING and self.turn_signal is not None:
            self.turn_signal.cancel("disposed")
        self._to(AgentState.DRAINING if state is AgentState.WOKEN else AgentState.STOPPING)

    def _clear(self, kind: str) -> None:
        cleared = self.inbox.clear()
        if cleared:
            self._session.append(InboxClearedEvent(ids=cleared))
            self.resolve(cleared, TurnOutcome({"kind": kind}, None))

    # ------------------------------------------------------------------ the driver's side

    def begin_turn(self) -> CancelSignal:
        """WOKEN or RUNNING -> RUNNING: a turn for the queued prompts, with a fresh signal."""
        self._to(AgentState.RUNNING)
        signal = self.turn_signal = CancelSignal()
        return signal

    def idle_work(self) -> None:
        """WOKEN -> IDLING: no prompt is queued (an idle injection, or a cancel took them): flush."""
        self._to(AgentState.IDLING)

    def end_of_work(self) -> None:
        """RUNNING -> IDLING: nothing more is queued; the driver announces ``idle``."""
        self._to(AgentState.IDLING)

    def settle(self) -> None:
        """IDLING -> IDLE once the idle work is done, unless something woke the agent meanwhile."""
        if self._state is AgentState.IDLING:
            self._to(AgentState.IDLE)

    def drained(self) -> None:
        """DRAINING -> STOPPING: the owed flush is done (unless teardown stopped waiting for it)."""
        if self._state is AgentState.DRAINING:
            self._to(AgentState.STOPPING)

    def dispose(self) -> None:
        """DRAINING or STOPPING -> DISPOSED: every remaining ``run()`` returns ``disposed``."""
        self._to(AgentState.DISPOSED)
        self.resolve(list(self.waiters), TurnOutcome({"kind": "disposed"}, None))

    async def wait_for_work(self) -> None:
        """Return once the state is no longer IDLE (the driver's park)."""
        while self._state is AgentState.IDLE:
            wake = self._wake
            if wake is None:
                wake = self._wake = anyio.Event()
            await wake.wait()

    async def wait_until_settled(self) -> None:
        """Return once nothing is running or due (IDLE), or the agent is disposed. Never raises."""
        while not (self._state is AgentState.IDLE or self._state is AgentState.DISPOSED):
            settled = self._settled
            if settled is None:
                settled = self._settled = anyio.Event()
            await settled.wait()

    # ------------------------------------------------------------------ run() waiters

    def resolve(self, ids: Sequence[str], outcome: TurnOutcome) -> None:
        """Hand ``outcome`` to the ``run()`` calls waiting for the prompts ``ids``."""
        waiters = self.waiters
        if not waiters:
            return
        for ident in ids:
            waiter = waiters.pop(ident, None)
            if waiter is not None:
                waiter.resolve(outcome)

    def __repr__(self) -> str:
        return f"<AgentMachine {self._session.id!r} {self._state.value}>"
