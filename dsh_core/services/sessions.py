"""The default in-memory session store (``ctx.sessions``): which sessions are live, and their lifecycle.

``prepare`` builds a private session, ``enter`` makes it live (``session/created``) and returns its
exact ``detach`` (``session/disposed``), ``create`` does both, ``fork`` seeds a child with a balanced
prefix of another session's log, and ``flush`` runs the ``session/flush`` listeners in parallel.
The sessions themselves (``Session``, ``SessionMeta``) live in ``_session``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import anyio

from dsh_core.session_log._event import SessionEvent
from dsh_core.session_log._repair import parked_turn
from dsh_core.session_log._session import CheckedLog, Session, SessionMeta, Validator, open_turn_in
from dsh_core.vocabulary._errors import DuplicateRegistrationError, EventDataError, ScopeDisposedError

if TYPE_CHECKING:
    from dsh_core.host._context import Context
    from dsh_core.host._dispatch import Dispatcher

__all__ = ["Detach", "Session", "SessionMeta", "SessionStore", "SessionsPlugin", "SessionsService", "Validator"]

#: Removes a session from the store; async, idempotent, never removes a later same-id session.
Detach: TypeAlias = Callable[[], Awaitable[None]]


# ---------------------------------------------------------------------- the store


class _Entry:
    __slots__ = ("detach", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.detach: Detach | None = None


class _StoreState:
    __slots__ = ("closed", "events", "sessions")

    def __init__(self, events: Dispatcher) -> None:
        self.events = events
        self.sessions: dict[str, _Entry] = {}
        self.closed = False


class SessionsService(Protocol):
    """What ``ctx.sessions`` offers, and what a replacement ``sessions`` service must provide.

    A replacement is provided under the name ``sessions``; if it has ``bind(ctx)``, the context
    sees what that returns, which must satisfy this Protocol (sessions entered through a bound
    view are detached when its context is disposed).
    """

    def prepare(
        self,
        id: str,
        *,
        meta: SessionMeta | Mapping[str, Any] | None = None,
        seed: Iterable[SessionEvent | tuple[str, Mapping[str, Any]]] = (),
        checked: CheckedLog | None = None,
    ) -> Session: ...

    async def enter(self, session: Session) -> Detach: ...

    async def announce(self, session: Session) -> None: ...

    def enter_now(self, session: Session) -> Detach: ...

    async def create(
        self,
        id: str,
        *,
        meta: SessionMeta | Mapping[str, Any] | None = None,
        seed: Iterable[SessionEvent | tuple[str, Mapping[str, Any]]] = (),
    ) -> Session: ...

    def get(self, id: str) -> Session | None: ...

    def list(self) -> tuple[Session, ...]: ...

    async def flush(self, session: Session) -> None: ...

    async def fork(
        self, source: Session, upto_seq: int, child_id: str, *, meta: SessionMeta | None = None
    ) -> Session: ...


class SessionStore:
    """The ``sessions`` service: the live sessions by id.

    Seen through ``ctx.sessions`` the store is bound to that context: a session entered,
    created or forked through it is detached when the context is disposed (unless detached
    before). Every view shares one table.
    """

    __slots__ = ("_ctx", "_state")

    def __init__(self, events: Dispatcher) -> None:
        self._state = _StoreState(events)
        self._ctx: Context | None = None

    def bind(self, ctx: Context) -> SessionStore:
        """This store as seen from ``ctx``: what it enters is detached when ``ctx`` is disposed."""
        view = SessionStore.__new__(SessionStore)
        view._state = self._state
        view._ctx = ctx
        return view

    def prepare(
        self,
        id: str,
        *,
        meta: SessionMeta | Mapping[str, Any] | None = None,
        seed: Iterable[SessionEvent | tuple[str, Mapping[str, Any]]] = (),
        checked: CheckedLog | None = None,
    ) -> Session:
        """Build a session that nobody can see yet; ``enter`` publishes it.

        ``seed`` (``SessionEvent``s numbered from 0, or ``(type, data)`` pairs) becomes the first
        events, each checked like an append (without validators; nothing is published).
        ``checked`` is what ``check_log`` returned for this id when a backend loaded the log (the
        loaded session's ``checked``): if the seed begins with exactly those event objects, their
        checked state is taken over instead of checking them again (a resume checks each stored
        event once); any other seed is checked in full.
        ``meta`` is a ``SessionMeta`` or its JSON (a mapping, whose ``seed_length`` defaults to
        the seed's length); no meta means ``SessionMeta(seed_length=len(seed))``. Two prepares of
        one id may coexist; ``enter`` decides which one goes live.

        :raises TypeError: for an id, meta or seed item of the wrong type.
        :raises ValueError: for an empty id, or ``meta.seed_length`` beyond the seed
            (``VocabularyError`` for a malformed meta mapping).
        :raises EventDataError: for a seed event the session refuses (naming its type).
        """
        if not isinstance(id, str):
            msg = f"session id must be a str, got {type(id).__name__}"
            raise TypeError(msg)
        if not id.strip():
            msg = f"session id must be a non-empty str, got {id!r}"
            raise ValueError(msg)
        if isinstance(seed, str | bytes | Mapping) or not isinstance(seed, Iterable):
            msg = f"seed must be a sequence of SessionEvents or (type, data) pairs, got {type(seed).__name__}"
            raise TypeError(msg)
        items = list(seed)
        if meta is None:
            meta = SessionMeta(seed_length=len(items))
        elif isinstance(meta, Mapping):
            meta = SessionMeta.from_json({"seed_length": len(items), **meta})
        elif not isinstance(meta, SessionMeta):
            msg = f"meta must be a SessionMeta or a mapping of its fields, got {type(meta).__name__}"
            raise TypeError(msg)
        if meta.seed_length > len(items):
            msg = f"session {id!r}: meta.seed_length is {meta.seed_length} but the seed has only {len(items)} events"
            raise ValueError(msg)
        session = Session._new(id, meta)
        adopted = session._adopt_checked(items, checked)  # events check_log passed are not checked again
        for index in range(adopted, len(items)):
            item = items[index]
            if isinstance(item, SessionEvent):
                if item.seq != index:
                    msg = (
                        f"{item.type}: seed event {index} has seq {item.seq}; a seed is the first events "
                        f"of a log, so its seqs run 0, 1, 2, ..."
                    )
                    raise EventDataError(msg, event_type=item.type)
                session._admit(item, validate=False)
            elif isinstance(item, tuple) and len(item) == 2:
                session._commit(item[0], item[1])
            else:
                msg = (
                    f"seed[{index}] must be a SessionEvent or a (type, data) pair, got {type(item).__name__}"
                )
                raise TypeError(msg)
        if session.open_turn is not None and parked_turn(session.events) is None:  # re-opened by a resume (§10.1)
            msg = (
                f"session {id!r}: the seed ends inside turn {session.open_turn} (a turn/start without its "
                "turn/end); a seed must end between turns — repair the log first (a persistence plugin's "
                "load does) or seed only up to the last turn/end"
            )
            raise ValueError(msg)
        return session

    async def enter(self, session: Session) -> Detach:
        """``enter_now`` then ``announce``: the session is live and ``session/created`` has fired.

        If ``session/created`` is cancelled or vetoed, the entry is rolled back (with its paired
        ``session/disposed``) and the error re-raised.
        """
        release = self.enter_now(session)
        try:
            await self.announce(session)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await release()
            raise
        return release

    async def announce(self, session: Session) -> None:
        """Emit ``session/created`` for a session entered with ``enter_now``."""
        await self._state.events.notify("session/created", session=session)

    def enter_now(self, session: Session) -> Detach:
        """Make ``session`` live at once — listed, its appends published — without announcing it.

        For callers that must publish synchronously (``ctx.agent_loop.create``); they owe an
        ``announce`` right after.

        Returns its ``detach``: async, idempotent, it removes exactly this entry (never a later
        session with the same id), stops publication and emits ``session/disposed``. Through
        ``ctx.sessions`` it also runs when that context is disposed.

        :raises TypeError: ``session`` is not a ``Session``.
        :raises DuplicateRegistrationError: the id is taken (or this session is already live).
        :raises ScopeDisposedError: the store has stopped.
        """
        if not isinstance(session, Session):
            msg = f"enter() takes a Session (from prepare()), got {type(session).__name__}"
            raise TypeError(msg)
        state = self._state
        if state.closed:
            msg = f"cannot enter session {session.id!r}: the session store has stopped"
            raise ScopeDisposedError(msg)
        taken = state.sessions.get(session.id)
        if taken is not None or session._dispatcher is not None:
            which = (
                "this session is already live"
                if taken is None or taken.session is session
                else "another live session has it"
            )
            msg = f"session id {session.id!r} is taken ({which}); detach that session first or choose another id"
            raise DuplicateRegistrationError(msg)
        entry = _Entry(session)
        events = state.events

        async def detach() -> None:
            if entry.detach is None:
                return
            entry.detach = None
            if state.sessions.get(session.id) is entry:
                del state.sessions[session.id]
                session._dispatcher = None
            await events.notify("session/disposed", session=session)

        release = detach if self._ctx is None else _awaiting(self._ctx.effect(detach))
        entry.detach = release
        state.sessions[session.id] = entry
        session._dispatcher = events
        return release

    async def create(
        self,
        id: str,
        *,
        meta: SessionMeta | Mapping[str, Any] | None = None,
        seed: Iterable[SessionEvent | tuple[str, Mapping[str, Any]]] = (),
    ) -> Session:
        """``prepare`` then ``enter``: a live session, detached when the calling context is disposed."""
        session = self.prepare(id, meta=meta, seed=seed)
        await self.enter(session)
        return session

    def get(self, id: str) -> Session | None:
        """The live session ``id``, or ``None``."""
        entry = self._state.sessions.get(id)
        return None if entry is None else entry.session

    def list(self) -> tuple[Session, ...]:
        """The live sessions, in the order they were entered."""
        return tuple(entry.session for entry in self._state.sessions.values())

    async def flush(self, session: Session) -> None:
        """Make ``session`` durable: the ``session/flush`` listeners run concurrently; the first
        failure cancels the others and is re-raised.

        :raises ValueError: ``session`` is not live in this store.
        """
        if not isinstance(session, Session):
            msg = f"flush() takes a Session, got {type(session).__name__}"
            raise TypeError(msg)
        entry = self._state.sessions.get(session.id)
        if entry is None or entry.session is not session:
            msg = f"cannot flush {session!r}: it is not live in this session store (create() or enter() it first)"
            raise ValueError(msg)
        await self._state.events.parallel("session/flush", session=session)

    async def fork(
        self, source: Session, upto_seq: int, child_id: str, *, meta: SessionMeta | None = None
    ) -> Session:
        """A live child session seeded with ``source.events[0 .. upto_seq]`` (inclusive).

        The child's meta: the source's ``cwd``, ``parent_id=source.id`` and ``seed_length`` the
        copied count (or ``meta``, given explicitly). The prefix must be balanced: forking inside
        a turn (a ``turn/start`` whose ``turn/end`` is not in the copied range) is refused.

        :raises ValueError: ``upto_seq`` is outside the log, or ends inside an open turn.
        :raises DuplicateRegistrationError: ``child_id`` is taken.
        """
        if not isinstance(source, Session):
            msg = f"fork() takes the source Session, got {type(source).__name__}"
            raise TypeError(msg)
        length = len(source._log)
        if upto_seq.__class__ is not int or not 0 <= upto_seq < length:
            bounds = f"0..{length - 1}" if length else "none: the log is empty"
            msg = f"cannot fork session {source.id!r} at seq {upto_seq!r}: its log has seqs {bounds}"
            raise ValueError(msg)
        prefix = source._log[: upto_seq + 1]
        opened = open_turn_in(prefix)
        if opened is not None:
            turn, started = opened
            msg = (
                f"cannot fork session {source.id!r} at seq {upto_seq}: turn {turn} is open there "
                f"(its turn/start is seq {started}, its turn/end comes later or not yet); fork at a seq "
                f"before {started}, or once the turn has ended"
            )
            raise ValueError(msg)
        if meta is None:
            meta = SessionMeta(cwd=source.meta.cwd, parent_id=source.id, seed_length=len(prefix))
        return await self.create(child_id, meta=meta, seed=prefix)

    async def _close(self) -> None:
        """Detach every live session (the store is stopping); later enters are refused."""
        state = self._state
        state.closed = True
        for entry in reversed(list(state.sessions.values())):
            if entry.detach is not None:
                await entry.detach()


def _awaiting(disposer: Callable[[], object]) -> Detach:
    """An async detach over a context-effect disposer (which returns the awaitable only once)."""

    async def run() -> None:
        result = disposer()
        if result is not None:
            await result  # type: ignore[misc]  # the effect's undo is our async detach

    return run


class SessionsPlugin:
    """The default ``sessions`` service: sessions kept in memory for the harness's life."""

    name = "sessions"
    provides = ("sessions",)

    def start(self, ctx: Context) -> None:
        store = SessionStore(ctx.events)
        ctx.provide("sessions", store)
        # Undone before the service is withdrawn (effects run LIFO): live sessions are detached,
        # each with its session/disposed.
        ctx.effect(store._close)
