"""A logged request that waits for a logged answer: the machinery under approvals (and questions).

A request is an event appended to a session's log (``approval/requested``); its answer is another
(``approval/resolved``) carrying the same ``call_id``. The log is the truth: an ``AwaitedLog`` is
built from the events already there (so a resumed session knows what is still pending) and then
kept up to date by its own appends. The first answer appended wins; a second one, or one for a
request never made, raises ``NotPendingError`` — an answer is checked and appended synchronously,
so two answerers racing on one event loop can never both win. Anyone may answer from any task:
the waiter is woken by an ``anyio.Event``, and ``on_answer`` lets a waiter that is itself asking
someone (a prompt) stop asking the moment another answer lands.

One ``AwaitedLog`` per (session, request type), shared by whoever asks for it through ``of``
(weakly cached: the log, not this object, is what lasts).

A wait that ends without an answer because the agent is being disposed **parks** its call
(``ParkedCalls``, one set per live session for every request type): nothing is appended for it,
so the turn stays open in the log and a resume asks again; the loop logs no result for a parked
call. A wait ended by anything else (a cancel) closes the request with an answer saying so.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import anyio

from dsh_core.session_log._spec import LogEvent
from dsh_core.vocabulary._errors import DshError

if TYPE_CHECKING:
    from dsh_core.session_log._event import SessionEvent
    from dsh_core.session_log._session import Session
    from dsh_core.vocabulary._signal import CancelSignal

__all__ = ["AwaitedLog", "NotPendingError", "ParkedCalls"]


_logger = logging.getLogger("dsh.awaited")

R = TypeVar("R", bound="LogEvent")
A = TypeVar("A", bound="LogEvent")


def _key(payload: LogEvent) -> str:
    """The call a request or answer payload is about (its ``call_id`` field)."""
    call_id: str = getattr(payload, "call_id")  # noqa: B009 - every awaited payload type has one
    return call_id


class NotPendingError(DshError, LookupError):
    """An answer for a request that is not pending: never made, or already answered."""

    def __init__(self, message: str, *, session_id: str, call_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.call_id = call_id


class ParkedCalls:
    """The calls of one live session whose wait a disposal ended, of every request type (approvals,
    questions): left unanswered, so the turn stays parked in the log and a resume asks again.

    One per live session (``of``), weakly cached: the agent holds its own, so it lives with it.
    """

    __slots__ = ("__weakref__", "calls", "session")

    _cache: ClassVar[weakref.WeakValueDictionary[str, ParkedCalls]] = weakref.WeakValueDictionary()

    def __init__(self, session: Session) -> None:
        self.session = session
        self.calls: set[str] = set()

    @classmethod
    def of(cls, session: Session) -> ParkedCalls:
        """The parked calls of ``session`` (made, empty, on first use)."""
        found = cls._cache.get(session.id)
        if found is None or found.session is not session:
            found = cls(session)
            cls._cache[session.id] = found
        return found

    def __contains__(self, call_id: object) -> bool:
        return call_id in self.calls


class AwaitedLog(Generic[R, A]):
    """The requests of one type in one session's log, each waiting for its first answer."""

    __slots__ = (
        "__weakref__",
        "_answer_type",
        "_answers",
        "_listeners",
        "_request_type",
        "_requests",
        "session",
    )

    _cache: ClassVar[weakref.WeakValueDictionary[tuple[str, str], AwaitedLog[Any, Any]]] = (
        weakref.WeakValueDictionary()
    )

    def __init__(self, session: Session, request_type: type[R], answer_type: type[A]) -> None:
        self.session = session
        self._request_type = request_type
        self._answer_type = answer_type
        #: call_id -> (the request, its seq), in log order
        self._requests: dict[str, tuple[R, int]] = {}
        self._answers: dict[str, A] = {}
        #: call_id -> callbacks run (once) when its answer is appended
        self._listeners: dict[str, list[Callable[[A], None]]] = {}
        wanted = (request_type.type, answer_type.type)
        for event in session.events:
            if event.type in wanted:
                payload: Any = event.payload
                if event.type == wanted[0]:
                    self._requests[_key(payload)] = (payload, event.seq)
                else:
                    self._answers.setdefault(_key(payload), payload)

    @classmethod
    def of(cls, session: Session, request_type: type[R], answer_type: type[A]) -> AwaitedLog[R, A]:
        """The one ``AwaitedLog`` of ``session`` for ``request_type`` (made, from the log, on first use)."""
        key = (session.id, request_type.type)
        found = cls._cache.get(key)
        if found is None or found.session is not session:
            found = cls(session, request_type, answer_type)
            cls._cache[key] = found
        return found

    # ------------------------------------------------------------------ reading

    def pending(self) -> list[tuple[R, int]]:
        """The requests without an answer, with their seqs, in log order."""
        answers = self._answers
        return [entry for call_id, entry in self._requests.items() if call_id not in answers]

    def request_of(self, call_id: str) -> tuple[R, int] | None:
        return self._requests.get(call_id)

    def answer_of(self, call_id: str) -> A | None:
        return self._answers.get(call_id)

    def answers(self) -> list[tuple[R, A]]:
        """Every answered request with its answer, in the requests' log order."""
        answers = self._answers
        return [
            (request, answers[call_id])
            for call_id, (request, _) in self._requests.items()
            if call_id in answers
        ]

    # ------------------------------------------------------------------ writing

    def request(self, payload: R) -> SessionEvent:
        """Append ``payload`` as a new request. :raises ValueError: when ``call_id`` was requested before."""
        call_id = _key(payload)
        if call_id in self._requests:
            msg = f"session {self.session.id!r}: call {call_id!r} was already requested (seq {self._requests[call_id][1]})"
            raise ValueError(msg)
        event = self.session.append(payload)
        self._requests[call_id] = (payload, event.seq)
        return event

    def answer(self, payload: A) -> SessionEvent:
        """Append ``payload`` as the answer of its request; wake whoever waits for it.

        :raises NotPendingError: the request was never made, or is answered already.
        """
        call_id = _key(payload)
        self.check_pending(call_id)
        event = self.session.append(payload)
        self._answers[call_id] = payload
        for listener in self._listeners.pop(call_id, ()):
            listener(payload)
        return event

    def check_pending(self, call_id: str) -> R:
        """The pending request of ``call_id``. :raises NotPendingError: none is pending."""
        entry = self._requests.get(call_id)
        if entry is None or call_id in self._answers:
            state = "was never requested" if entry is None else "is already answered"
            noun = self._request_type.type
            msg = f"session {self.session.id!r}: call {call_id!r} {state} (no pending {noun})"
            raise NotPendingError(msg, session_id=self.session.id, call_id=call_id)
        return entry[0]

    # ------------------------------------------------------------------ a wait that ended unanswered

    def end_wait(self, call_id: str, signal: CancelSignal | None, closing: Callable[[], A]) -> bool:
        """After a wait for ``call_id`` ended (returned or raised): if it is still unanswered, park it
        when the agent is being disposed (``signal.reason == "disposed"``), else append ``closing()``
        (a cancel's answer). Returns whether it was parked.

        A session that refuses the append (detached) leaves the turn to be closed without it.
        """
        if call_id in self._answers:
            return False
        if signal is not None and signal.reason == "disposed":
            ParkedCalls.of(self.session).calls.add(call_id)
            return True
        try:
            self.answer(closing())
        except Exception:
            _logger.exception("call %r: could not record the closed %s", call_id, self._request_type.type)
        return False

    # ------------------------------------------------------------------ waiting

    def on_answer(self, call_id: str, listener: Callable[[A], None]) -> Callable[[], None]:
        """Run ``listener(answer)`` once when ``call_id`` is answered (at once if it is); returns its remover."""
        answer = self._answers.get(call_id)
        if answer is not None:
            listener(answer)
            return _nothing
        listeners = self._listeners.setdefault(call_id, [])
        listeners.append(listener)

        def remove() -> None:
            if listener in listeners:
                listeners.remove(listener)
                if not listeners and self._listeners.get(call_id) is listeners:
                    del self._listeners[call_id]

        return remove

    async def wait(self, call_id: str) -> A:
        """The answer of ``call_id``, once someone appends it (at once if one is there)."""
        answer = self._answers.get(call_id)
        if answer is not None:
            return answer
        answered = anyio.Event()
        remove = self.on_answer(call_id, lambda _: answered.set())
        try:
            await answered.wait()
        finally:
            remove()
        return self._answers[call_id]


def _nothing() -> None:
    return None
