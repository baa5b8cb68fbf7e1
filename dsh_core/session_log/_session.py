"""One session: an append-only event log, its surface, its derived messages and its turn bookkeeping.

A ``Session`` is an append-only log of ``SessionEvent``s, plus what is folded from it as it grows:
the *surface* (the model-visible entries that ``derive_messages()`` turns into model messages)
and the turn bookkeeping (``open_turn``, ``last_turn``). An append is checked completely — lossless
JSON, its surface operation, the message a model-visible event carries, turn numbering, the
pre-commit validators — before anything changes, so a refused append leaves no trace.

Publication. Once a session is entered in a store, each committed event is published as the
``session/event`` notification, synchronously inside ``append`` (its listeners are plain ``def``),
so listeners hear every event exactly once, in log order, and ``append`` stays a plain call that
synchronous code (``agent.send``) can make. An append from inside a ``session/event`` listener of
the same session is refused: it would be committed in the middle of another event's publication.
Before ``enter`` (and after detach) nothing is published.
"""

from __future__ import annotations

import itertools
import operator
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias, overload

import attrs

from dsh_core.session_log._catalogue import SURFACE_EVENT_TYPES, TurnEndEvent, TurnStartEvent
from dsh_core.session_log._event import (
    SessionEvent,
    SurfaceOp,
    _new_event,
    _set_payload,
    _set_seq,
    _set_time,
    _set_type,
    _set_typed,
    raw_event,
)
from dsh_core.session_log._spec import LogEvent, is_visible, spec_for
from dsh_core.vocabulary._codec import ObjectCodec
from dsh_core.vocabulary._content import AssistantMessage, Message, validate_optional_str
from dsh_core.vocabulary._errors import EventDataError
from dsh_core.vocabulary._json import FrozenDict, freeze_json_object
from dsh_core.vocabulary._llm_types import TrustedMessages
from dsh_core.vocabulary._slots import build_unchecked, field_count

if TYPE_CHECKING:
    from dsh_core.host._dispatch import Dispatcher

__all__ = ["CheckedLog", "Session", "SessionMeta", "Validator", "check_log", "open_turn_in"]

#: Vetoes an append by raising: ``fn(session, type, data)``, called with the frozen data.
Validator: TypeAlias = Callable[["Session", str, FrozenDict], object]

# ---------------------------------------------------------------------- metadata


def _check_cwd(instance: SessionMeta, attribute: attrs.Attribute[Any], value: object) -> None:
    # Hand-written: attrs has no "absolute path" check.
    if value is None:
        return
    if not isinstance(value, str):
        msg = f"SessionMeta.cwd must be an absolute path (a str) or None, got {type(value).__name__}"
        raise TypeError(msg)
    if not os.path.isabs(value):
        msg = (
            f"SessionMeta.cwd must be an absolute path, got {value!r}; resolve it first (Path(cwd).resolve())"
        )
        raise ValueError(msg)


def _check_seed_length(instance: SessionMeta, attribute: attrs.Attribute[Any], value: object) -> None:
    # Hand-written: attrs' instance_of(int) admits a bool.
    if type(value) is not int:
        msg = f"SessionMeta.seed_length must be an int, got {type(value).__name__}"
        raise TypeError(msg)
    if value < 0:
        msg = f"SessionMeta.seed_length must be >= 0, got {value}"
        raise ValueError(msg)


def _freeze_extra(value: object) -> FrozenDict:
    return freeze_json_object(value, where="SessionMeta.extra", root="extra")


@attrs.frozen(kw_only=True)
class SessionMeta:
    """What a session knows about itself besides its log.

    ``cwd`` is the workspace (absolute, or ``None``); ``parent_id`` the session it was forked
    from; ``seed_length`` how many leading events were inherited (a fork's prefix, or a resumed
    log's original seed) rather than lived; ``extra`` free JSON for plugins (frozen).
    """

    cwd: str | None = attrs.field(default=None, validator=_check_cwd)
    parent_id: str | None = attrs.field(default=None, validator=validate_optional_str)
    seed_length: int = attrs.field(default=0, validator=_check_seed_length)
    extra: FrozenDict = attrs.field(factory=FrozenDict, converter=_freeze_extra)

    def to_json(self) -> dict[str, Any]:
        """``{"cwd", "parent_id", "seed_length", "extra"}``, every key always written."""
        return _META_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "meta") -> SessionMeta:
        """Read metadata; absent keys take their defaults. :raises VocabularyError: naming the field."""
        meta: SessionMeta = _META_JSON.read(data, field)
        return meta


#: a relative ``cwd`` is the one rule the readers do not say (the class refuses it)
_META_JSON: Final = ObjectCodec(SessionMeta, errors_at="cwd")
_META_JSON.install_to_json()


# ---------------------------------------------------------------------- read-only views


class _EventLog(Sequence[SessionEvent]):
    """``session.events``: a live, read-only view of the log (indexing is O(1))."""

    __slots__ = ("_log",)

    def __init__(self, log: list[SessionEvent]) -> None:
        self._log = log

    def __len__(self) -> int:
        return len(self._log)

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[SessionEvent, ...]: ...
    def __getitem__(self, index: int | slice) -> SessionEvent | tuple[SessionEvent, ...]:
        if isinstance(index, slice):
            return tuple(self._log[index])
        return self._log[index]

    def __iter__(self) -> Iterator[SessionEvent]:
        # Bounded at the length when iteration starts: events appended meanwhile are not seen.
        return itertools.islice(self._log, len(self._log))

    def __repr__(self) -> str:
        return f"<session events: {len(self._log)}>"


# Kept: derive_messages() at 1,000 messages costs 0.13 us vs 0.96 for a tuple copy, which grows with the log.
class _MessageView(TrustedMessages):
    """The result of ``derive_messages()``: an immutable, O(1)-to-make snapshot of the messages.

    It reads the slice ``[start, stop)`` of a list that the session only ever extends beyond
    ``stop`` (a surface replace builds a new list), so the snapshot never changes. It compares
    equal to a tuple or list with the same messages, and ``prefix + view`` gives a tuple. Being a
    ``TrustedMessages``, it goes into an ``LlmRequest`` as it is, without a copy.
    """

    __slots__ = ("_items", "_start", "_stop")

    def __init__(self, items: list[Message], start: int, stop: int) -> None:
        self._items = items
        self._start = start
        self._stop = stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        length = self._stop - self._start
        if isinstance(index, slice):
            start, stop, step = index.indices(length)
            if step == 1:
                return _MessageView(self._items, self._start + start, self._start + max(start, stop))
            return tuple(self._items[self._start : self._stop][index])
        if index < 0:
            index += length
        if not 0 <= index < length:
            msg = f"message index out of range (there are {length})"
            raise IndexError(msg)
        return self._items[self._start + index]

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._items, self._start, self._stop)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _MessageView):
            if other._items is self._items and other._start == self._start and other._stop == self._stop:
                return True
        elif not isinstance(other, tuple | list):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: object) -> tuple[Message, ...]:
        if not isinstance(other, tuple | list | _MessageView):
            return NotImplemented
        return (*self, *other)

    def __radd__(self, other: object) -> tuple[Message, ...]:
        if not isinstance(other, tuple | list):
            return NotImplemented
        return (*other, *self)

    def __repr__(self) -> str:
        return f"Messages({list(self)!r})"


# ---------------------------------------------------------------------- sessions


class Session:
    """One conversation's append-only event log, its surface and its derived messages.

    Made by the store (``ctx.sessions.prepare`` / ``create`` / ``fork``), never directly. The store
    is its one friend: it builds sessions with ``_new``, seeds them through ``_commit``/``_admit``
    and switches publication on and off through ``_dispatcher``.
    """

    __slots__ = (
        "_dispatcher",
        "_entries",
        "_events_view",
        "_id",
        "_last_turn",
        "_log",
        "_messages",
        "_meta",
        "_next_validator",
        "_open_turn",
        "_publishing",
        "_surface",
        "_validators",
        "_view",
    )

    _id: str
    _meta: SessionMeta
    _log: list[SessionEvent]
    _events_view: _EventLog
    _surface: list[int]
    _entries: list[Message | None]
    _messages: list[Message]
    _view: _MessageView | None
    _open_turn: int | None
    _last_turn: int
    _validators: dict[int, Validator]
    _next_validator: int
    _dispatcher: Dispatcher | None
    _publishing: bool

    def __init__(self, *args: object, **kwargs: object) -> None:
        msg = "a Session is made by its store: ctx.sessions.prepare(id) or await ctx.sessions.create(id)"
        raise TypeError(msg)

    @classmethod
    def _new(cls, session_id: str, meta: SessionMeta) -> Session:
        self = object.__new__(cls)
        self._id = session_id
        self._meta = meta
        self._log = []
        self._events_view = _EventLog(self._log)
        # The surface: the seqs of its entries, and each entry's message (None: projects to nothing).
        self._surface = []
        self._entries = []
        self._messages = []
        self._view = None
        self._open_turn = None
        self._last_turn = 0
        self._validators = {}
        self._next_validator = 0
        # Publication (see the module docstring).
        self._dispatcher = None
        self._publishing = False
        return self

    # ------------------------------------------------------------------ reading

    @property
    def id(self) -> str:
        return self._id

    @property
    def meta(self) -> SessionMeta:
        return self._meta

    @property
    def events(self) -> Sequence[SessionEvent]:
        """The log, read-only and live: ``events[seq]`` is the event with that ``seq``."""
        return self._events_view

    @property
    def surface(self) -> tuple[int, ...]:
        """The seqs of the current surface entries, in order (positions for a surface replace)."""
        return tuple(self._surface)

    @property
    def open_turn(self) -> int | None:
        """The turn whose ``turn/start`` has no ``turn/end`` yet, or ``None``."""
        return self._open_turn

    @property
    def last_turn(self) -> int:
        """The highest turn number started in this log (0 before the first turn)."""
        return self._last_turn

    def derive_messages(self) -> Sequence[Message]:
        """The model messages the surface folds into: what the next request sees after the prefix.

        Each surface entry gives its message, except an ``assistant/message`` with empty content
        (nothing to send back). An ``assistant/message`` marked ``interrupted`` is an ordinary
        entry. The result is an immutable sequence snapshot, made in O(1): the fold is kept up to
        date by ``append`` (O(1) per event; a surface replace costs O(surface)). Calls with no
        append in between return the same object.
        """
        messages = self._messages
        view = self._view
        if view is None or view._items is not messages or view._stop != len(messages):
            view = self._view = _MessageView(messages, 0, len(messages))
        return view

    # ------------------------------------------------------------------ appending

    @overload
    def append(self, type: LogEvent, /) -> SessionEvent: ...
    @overload
    def append(self, type: str, data: Mapping[str, Any], surface: SurfaceOp | None = None) -> SessionEvent: ...
    def append(
        self, type: str | LogEvent, data: Mapping[str, Any] | None = None, surface: SurfaceOp | None = None
    ) -> SessionEvent:
        """Validate, commit and publish one event; returns it (``seq`` = its index in the log).

        Either a typed payload of ``dsh_core.session_log._catalogue`` (``append(TurnStartEvent(turn=1))``),
        checked when it was built and serialised once, when ``event.data`` is first read; or a
        type and its ``data``, a JSON object of lossless JSON stored deep-frozen, which for a
        declared type must follow that type's rules (it is read into the payload class). ``surface``
        (only for model-visible events given as type and data) replaces a span of the surface
        instead of appending; it is stored in ``data["surface"]``, where a caller may also put it.
        Synchronous: the ``session/event`` listeners have run when it returns (their failures
        are logged and contained).

        :raises TypeError: ``type`` is neither a str nor a payload, or ``surface`` not a ``SurfaceOp``.
        :raises EventDataError: (a ``ValueError``, naming the event type) for data that is not
            lossless JSON or breaks its type's rules (a model-visible event without a valid message
            of the right role, ...), a surface op on another event, a replace citing surface
            entries that do not exist, a turn numbered out of order, or an append from inside
            this session's own ``session/event`` listeners.
        :raises Exception: whatever a validator raised to veto the append.
        Nothing is committed when it raises.
        """
        if self._publishing:
            msg = (
                f"{_type_name(type)}: cannot append to session {self._id!r} from inside one of its session/event "
                f"listeners: the event would land in the middle of another event's publication. "
                f"Hand the work to a task of your own (it may append once the listener has returned)"
            )
            raise EventDataError(msg, event_type=_type_name(type))
        log = self._log
        cls = type.__class__
        checked = _PAYLOAD_CLASSES.get(cls)  # one lookup: a payload class, and whether it is checked
        if checked is None and isinstance(type, LogEvent):
            checked = _learn_payload_class(type.__class__)
        if checked is not None:
            # The hot path: a typed payload, checked when it was built; most are neither
            # model-visible nor turn boundaries. ``logged_event`` inlined.
            payload: LogEvent = type  # type: ignore[assignment]  # a payload class (the lookup above)
            if data is not None or surface is not None:
                msg = f"{payload.type}: a payload carries its own data and surface; append(payload) takes nothing else"
                raise TypeError(msg)
            event = _new_event(SessionEvent)
            _set_type(event, payload.type)
            _set_seq(event, len(log))
            _set_time(event, _now())
            _set_payload(event, payload)
            _set_typed(event, True)
            if checked or self._validators:
                self._admit(event, validate=True)
            else:
                log.append(event)
        elif type.__class__ is str:
            if data is None:
                msg = f"{type}: append(type, data) needs the event's data (a JSON object)"
                raise TypeError(msg)
            if surface is not None:
                data = _with_surface(type, data, surface)
            spec = spec_for(type)
            if spec is not None:
                # A declared type: its rules read the data into its payload (once; the event keeps it).
                event = raw_event(type, len(log), _now(), data)
                self._admit(event, validate=True)
            else:
                event = SessionEvent(type, len(log), _now(), data)
                if self._validators:
                    self._admit(event, validate=True)
                else:
                    log.append(event)
        else:
            msg = (
                "session event type must be a str such as 'note/x' (with its data), or a payload of "
                f"dsh_core.session_log._catalogue such as TurnStartEvent(turn=1); got {type.__class__.__name__}"
            )
            raise TypeError(msg)
        dispatcher = self._dispatcher
        if dispatcher is not None:
            # The store's dispatcher is a friend: its cached plan says at once when nobody listens.
            plan = dispatcher._plans.get(_SESSION_EVENT)
            if plan is None or plan.impls:  # inlined, as in append_unchecked (a call less per event)
                self._publishing = True
                try:
                    dispatcher.notify_sync(_SESSION_EVENT, session=self, event=event)
                finally:
                    self._publishing = False
        return event

    def append_unchecked(self, cls: type[LogEvent], /, *values: object) -> SessionEvent:
        """``append(cls(*values))`` for field values the caller has already checked, in field order;
        the payload is built only when first read (``event.payload``, ``event.data``).

        For an event written often that nobody may read: the agent loop's ``assistant/chunk``
        (its own turn and step numbers, a chunk its assembler took). With nobody listening, no
        payload object is made: a quarter of a streamed chunk's cost. A type the session checks
        (a turn boundary, a model-visible event), a session with validators or a wrong count of
        values takes the ordinary path, with the payload built at once.

        :raises TypeError: ``values`` are not one per field of ``cls``.
        """
        log = self._log
        if _DEFERRABLE.get(cls) != len(values) or self._validators or self._publishing:
            event = self.append(build_unchecked(cls, values))  # checks the count, learns the class
            if _PAYLOAD_CLASSES.get(cls) is False:
                _DEFERRABLE[cls] = field_count(cls)
            return event
        event = _new_event(SessionEvent)
        _set_type(event, cls.type)
        _set_seq(event, len(log))
        _set_time(event, _now())
        _set_payload(event, (cls, values))
        _set_typed(event, True)
        log.append(event)
        dispatcher = self._dispatcher
        if dispatcher is not None:
            plan = dispatcher._plans.get(_SESSION_EVENT)
            if plan is None or plan.impls:
                self._publishing = True
                try:
                    dispatcher.notify_sync(_SESSION_EVENT, session=self, event=event)
                finally:
                    self._publishing = False
        return event

    def add_validator(self, validator: Validator) -> Callable[[], None]:
        """Run ``validator(session, type, data)`` before every append; raising vetoes it.

        Validators run after the event has passed the session's own checks, with the frozen
        data (including ``surface``), in the order added; they must not append. Returns an
        idempotent remover.
        """
        if not callable(validator):
            msg = f"add_validator: expected a callable (session, type, data), got {type(validator).__name__}"
            raise TypeError(msg)
        key = self._next_validator
        self._next_validator += 1
        self._validators[key] = validator

        def remove() -> None:
            self._validators.pop(key, None)

        return remove

    def _commit(self, event_type: str, data: Mapping[str, Any]) -> SessionEvent:
        """Build and admit one event (a seed pair); ``append`` inlines the same steps."""
        if event_type.__class__ is not str:
            msg = (
                f"session event type must be a str such as 'turn/start', got {event_type.__class__.__name__}"
            )
            raise TypeError(msg)
        event = SessionEvent(event_type, len(self._log), time.time(), data)
        return self._admit(event, validate=True)

    def _admit(self, event: SessionEvent, *, validate: bool) -> SessionEvent:
        """Check ``event`` by its type's rules and against the session's state, run the validators,
        then commit it."""
        numbered = event._payload is None and (event.type == TurnStartEvent.type or event.type == TurnEndEvent.type)
        if numbered:
            # Numbering first: it is what a turn boundary written by hand most often gets wrong.
            self._check_turn(event.type, _turn_of(event))
        payload = event.payload  # read (and checked) from data unless it came as a payload
        cls = payload.__class__
        op: SurfaceOp | None = None
        message: Message | None = None
        if payload is not None and is_visible(event.type):
            op = payload.surface  # type: ignore[attr-defined]  # a visible payload has one
            message = payload.message  # type: ignore[attr-defined]
            if op.op == "replace" and op.end is not None and op.end > len(self._surface):
                msg = (
                    f"{event.type}: data.surface: replace [{op.start}, {op.end}) cites surface entries that do "
                    f"not exist; the surface has {len(self._surface)} entries (see session.surface)"
                )
                raise EventDataError(msg, event_type=event.type, field="data.surface")
        elif not numbered and (cls is TurnStartEvent or cls is TurnEndEvent):  # a typed payload
            self._check_turn(event.type, payload.turn)  # type: ignore[union-attr]
        if validate and self._validators:
            data = event.data
            for validator in tuple(self._validators.values()):
                validator(self, event.type, data)
        # Commit: nothing below can fail.
        self._log.append(event)
        if message is not None:
            self._fold(event.seq, op, message)
        elif cls is TurnStartEvent:
            self._open_turn = self._last_turn = payload.turn  # type: ignore[union-attr]
        elif cls is TurnEndEvent:
            self._open_turn = None
        return event

    def _check_turn(self, event_type: str, turn: int) -> None:
        """A ``turn/start`` or ``turn/end`` numbered right for the open turn."""
        if event_type == TurnStartEvent.type:
            if self._open_turn is not None:
                msg = f"{event_type}: data.turn: turn {turn} cannot start while turn {self._open_turn} is open (no turn/end yet)"
                raise EventDataError(msg, event_type=event_type, field="data.turn")
            if turn <= self._last_turn:
                msg = f"{event_type}: data.turn: turn {turn} does not follow turn {self._last_turn}; turn numbers only grow"
                raise EventDataError(msg, event_type=event_type, field="data.turn")
        elif turn != self._open_turn:
            state = "no turn is open" if self._open_turn is None else f"the open turn is {self._open_turn}"
            msg = f"{event_type}: data.turn: turn {turn} cannot end: {state}"
            raise EventDataError(msg, event_type=event_type, field="data.turn")

    def _adopt_checked(self, items: Sequence[object], checked: CheckedLog | None) -> int:
        """Take over the state ``checked`` (what ``check_log`` built for this session's id) when
        ``items`` begin with exactly the events it checked (the same objects, in order): those are
        not checked again.

        Returns how many leading items were adopted (0 when there is nothing to adopt). Only for a
        new, empty session (the store's ``prepare``).
        """
        if checked is None or self._log or checked.session_id != self._id:
            return 0
        scratch = checked._scratch
        log = scratch._log
        if len(log) > len(items) or not all(map(operator.is_, log, items)):
            return 0
        self._log.extend(log)
        self._surface = list(scratch._surface)
        self._entries = list(scratch._entries)
        self._messages = list(scratch._messages)
        self._open_turn = scratch._open_turn
        self._last_turn = scratch._last_turn
        return len(log)

    def _fold(self, seq: int, op: SurfaceOp | None, message: Message) -> None:
        shown: Message | None = message
        if message.__class__ is AssistantMessage and not message.content:
            shown = None  # an empty reply (max-tokens, an empty stop) sends nothing back
        if op is None or op.op == "append":
            self._surface.append(seq)
            self._entries.append(shown)
            if shown is not None:
                self._messages.append(shown)
            return
        start, end = op.start, op.end
        self._surface[start:end] = [seq]
        self._entries[start:end] = [shown]
        # A new list: snapshots already handed out keep reading the old one, which never changes.
        self._messages = [entry for entry in self._entries if entry is not None]

    def __repr__(self) -> str:
        return f"<Session {self._id!r} events={len(self._log)} surface={len(self._surface)}>"


def _with_surface(event_type: str, data: Mapping[str, Any], surface: SurfaceOp) -> Mapping[str, Any]:
    """``data`` with ``surface`` stored under ``"surface"`` (an append op is the default: not stored)."""
    if not isinstance(surface, SurfaceOp):
        msg = f"{event_type}: surface must be a SurfaceOp (SurfaceOp.replace(start, end)), got {type(surface).__name__}"
        raise TypeError(msg)
    if not is_visible(event_type):
        visible = ", ".join(sorted(SURFACE_EVENT_TYPES))
        msg = f"{event_type}: a surface operation is only for model-visible events ({visible})"
        raise EventDataError(msg, event_type=event_type)
    if not isinstance(data, Mapping):
        return data  # SessionEvent refuses it, naming the event type
    given = data.get("surface")
    if given is not None:
        if given != surface.to_json():
            msg = (
                f"{event_type}: the surface op is given twice and differently (surface= and data['surface'])"
            )
            raise EventDataError(msg, event_type=event_type)
        return data
    if surface.op == "append":
        return data
    return {**data, "surface": surface.to_json()}


def open_turn_in(events: Iterable[SessionEvent]) -> tuple[int, int] | None:
    """``(turn, seq of its turn/start)`` of a turn left open at the end of ``events``, if any."""
    opened: tuple[int, int] | None = None
    for event in events:
        if event.type == TurnStartEvent.type:
            opened = (int(event.data["turn"]), event.seq)  # type: ignore[arg-type]  # checked at append
        elif event.type == TurnEndEvent.type:
            opened = None
    return opened


def _turn_of(event: SessionEvent) -> int:
    turn = event.data.get("turn")
    if turn.__class__ is not int or turn < 1:
        msg = f"{event.type}: data.turn: expected a turn number (an int >= 1), got {turn!r}"
        raise EventDataError(msg, event_type=event.type, field="data.turn")
    return turn


def _type_name(value: object) -> str:
    return value if isinstance(value, str) else str(getattr(value, "type", type(value).__name__))


_now: Final = time.time
_SESSION_EVENT: Final = "session/event"

#: Every payload class appended so far -> whether an append checks it against the session's state
#: (a turn boundary, or model-visible). Learnt at its first append, so a type a plugin declares
#: later is known the same way; one dict lookup where an isinstance and a set lookup were.
_PAYLOAD_CLASSES: Final[dict[type, bool]] = {TurnStartEvent: True, TurnEndEvent: True}


#: Payload classes the session checks nothing of -> their count of fields: what
#: ``append_unchecked`` may defer (learnt at a class's first such append).
_DEFERRABLE: Final[dict[type, int]] = {}


def _learn_payload_class(cls: type[LogEvent]) -> bool:
    checked = is_visible(getattr(cls, "type", ""))
    _PAYLOAD_CLASSES[cls] = checked
    return checked


@attrs.frozen(eq=False, repr=False)
class CheckedLog:
    """A log ``check_log`` passed, with the session state its events build.

    A persistence backend keeps it with the session it loaded (``LoadedSessionLike.checked``), and
    the resume hands it on to ``ctx.sessions.prepare(id, seed=events, checked=...)``, which takes
    that state over instead of checking the same event objects a second time. It lives as long as
    whoever holds it: nothing process-wide keeps it.
    """

    session_id: str
    _scratch: Session = attrs.field(alias="scratch")

    @property
    def events(self) -> tuple[SessionEvent, ...]:
        """The events checked, in order."""
        return tuple(self._scratch._log)

    @property
    def open_turn(self) -> int | None:
        """The turn left open at the end of the log (``None``: it ends between turns)."""
        return self._scratch._open_turn

    def __repr__(self) -> str:
        return f"<CheckedLog {self.session_id!r} events={len(self._scratch._log)}>"


def check_log(session_id: str, meta: SessionMeta, events: Iterable[SessionEvent]) -> CheckedLog:
    """Admit ``events`` (numbered from 0) into a scratch session, as a seed is admitted: every check
    an append makes, data rules and session state alike, without validators or publication.

    For a persistence backend that reads a stored log: what append refuses, this refuses, so a
    damaged log is reported where it is stored instead of deep inside ``prepare``. Returns the
    checked log (its ``open_turn`` tells whether the log ends inside a turn); given to
    ``ctx.sessions.prepare(session_id, seed=..., checked=...)`` with a seed that begins with these
    same event objects, it spares that prepare checking them again (events after them, such as
    crash repair's, are checked as usual).

    :raises EventDataError: for the first event refused; ``.seq`` is its seq, ``.field`` the field.
    """
    scratch = Session._new(session_id, meta)
    for event in events:
        if event.seq != len(scratch._log):
            msg = f"{event.type}: seq: the event has seq {event.seq} but is event {len(scratch._log)} of the log"
            raise EventDataError(msg, event_type=event.type, field="seq", seq=len(scratch._log))
        try:
            scratch._admit(event, validate=False)
        except EventDataError as exc:
            raise EventDataError(str(exc), event_type=exc.event_type, field=exc.field, seq=event.seq) from None
    return CheckedLog(session_id, scratch=scratch)
