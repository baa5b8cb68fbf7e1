"""One entry of a session's append-only log: ``SessionEvent(type, seq, time, data)``.

``seq`` is the index in the log (contiguous from 0), ``time`` seconds since the epoch, ``data``
deep-frozen lossless JSON (a ``FrozenDict``). Model-visible events may carry ``data["surface"]``
(see ``SurfaceOp``); what each declared type's ``data`` holds is in ``dsh_core.session_log._catalogue``.

An event appended as a typed payload keeps it, and builds ``data`` from it when ``data`` is first
read (once: it is then stored like any other field), so an event nobody reads as JSON is never
serialised. ``event.payload`` is the typed view of any declared event, read from ``data`` (and
checked by its type's rules) the first time it is asked for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

import attrs

from dsh_core.session_log._catalogue import SURFACE_EVENT_TYPES as SURFACE_EVENT_TYPES
from dsh_core.session_log._spec import LogEvent, is_visible, read_payload
from dsh_core.session_log._surface import SurfaceOp as SurfaceOp
from dsh_core.session_log._surface import SurfaceOpKind as SurfaceOpKind
from dsh_core.vocabulary._codec import ObjectCodec, json_field
from dsh_core.vocabulary._errors import EventDataError, VocabularyError
from dsh_core.vocabulary._json import (
    FrozenDict,
    JsonValueError,
    expect_object,
    freeze_json_object,
    refuse,
)
from dsh_core.vocabulary._slots import build_unchecked

__all__ = ["SURFACE_EVENT_TYPES", "SessionEvent", "SurfaceOp", "SurfaceOpKind", "logged_event", "raw_event"]

# ---------------------------------------------------------------------- events


_validate_type: Final = attrs.validators.and_(attrs.validators.instance_of(str), attrs.validators.min_len(1))


def _validate_seq(instance: SessionEvent, attribute: attrs.Attribute[Any], value: object) -> None:
    # Hand-written: attrs' instance_of(int) admits a bool.
    if type(value) is not int or value < 0:
        msg = f"SessionEvent.seq must be an int >= 0, got {value!r}"
        raise (ValueError if type(value) is int else TypeError)(msg)


def _to_time(value: object) -> float:
    if type(value) is float or type(value) is int:
        if math.isfinite(value) and value >= 0:
            return float(value)
        msg = f"SessionEvent.time must be finite seconds since the epoch, got {value!r}"
        raise ValueError(msg)
    msg = f"SessionEvent.time must be a number (seconds since the epoch), got {type(value).__name__}"
    raise TypeError(msg)


def _to_data(value: object, event: Any) -> FrozenDict:
    """Freeze ``data`` (a ``FrozenDict`` passes as it is), naming the event type in any error.

    An attrs converter that takes the half-built event (``type`` is already set) for that name.
    """
    if type(value) is not FrozenDict:
        try:
            value = freeze_json_object(value, where=event.type, root="data")
        except JsonValueError as exc:
            raise EventDataError(str(exc), event_type=event.type) from exc
    if "surface" in value:
        _check_surface(value["surface"], event.type)
    return value


_NOT_VISIBLE: Final = (
    f"only model-visible events ({', '.join(sorted(SURFACE_EVENT_TYPES))}) carry a surface operation"
)


def _check_surface(raw: object, event_type: str) -> None:
    if not is_visible(event_type):
        raise EventDataError(f"{event_type}: data.surface: {_NOT_VISIBLE}", event_type=event_type)
    try:
        SurfaceOp.from_json(expect_object(raw, "data.surface"), field="data.surface")
    except VocabularyError as exc:
        raise EventDataError(f"{event_type}: {exc}", event_type=event_type) from exc


#: A payload not built yet: its class and its field values, in field order (already checked).
DeferredPayload: TypeAlias = tuple[type[LogEvent], tuple[Any, ...]]


@attrs.frozen
class SessionEvent:
    """One entry of the session log. Appended by ``session.append``, never built by hand in a loop.

    Constructing one freezes ``data`` and checks it is lossless JSON, raising ``EventDataError``
    naming the event type otherwise; a ``surface`` entry is checked too (see ``SurfaceOp``).
    """

    type: str = attrs.field(validator=_validate_type)
    seq: int = attrs.field(validator=_validate_seq)
    time: float = attrs.field(converter=_to_time)
    # mypy's attrs plugin knows no attrs.Converter (the parameter becomes Any, which is right here)
    data: FrozenDict = attrs.field(converter=attrs.Converter(_to_data, takes_self=True))  # type: ignore[misc]
    #: the typed payload, once known (given at a typed append, or read from ``data``), or its class
    #: and field values until first read (``Session.append_unchecked``); not compared
    _payload: LogEvent | DeferredPayload | None = attrs.field(default=None, init=False, eq=False, repr=False)
    #: appended as a typed payload: ``data``, if built, is the payload's own encoding (not JSON given
    #: by a caller or read from a store, which may spell the same values otherwise)
    _typed: bool = attrs.field(default=False, init=False, eq=False, repr=False)

    def __getattr__(self, name: str) -> Any:
        # Reached only for a slot never set: the ``data`` of an event appended as a payload.
        if name != "data":
            raise AttributeError(name)
        data = self.payload.to_data()  # type: ignore[union-attr]  # set by the append
        _set_data(self, data)
        return data

    @property
    def payload(self) -> LogEvent | None:
        """The typed payload of a declared event type (``None`` for an undeclared one).

        :raises EventDataError: the stored data breaks its type's rules (naming the field).
        """
        payload = self._payload
        if payload is None:
            payload = read_payload(self.type, self.data)
            if payload is not None:
                _set_payload(self, payload)
        elif payload.__class__ is tuple:  # deferred: built now, from values checked at the append
            payload = build_unchecked(*payload)
            _set_payload(self, payload)
        return payload  # type: ignore[return-value]

    def plain_data(self) -> Mapping[str, Any]:
        """The JSON of ``data`` for a serialiser (orjson, ``json``): for an event appended as a
        typed payload, built straight from it as plain dicts and lists, without the frozen copy
        that ``data`` keeps (what persistence writes for every event, which nobody may ever read as
        ``data``: 0.3 us against 0.6 for a streamed chunk). It may be ``data`` itself: read it,
        never keep or change it."""
        payload: Any = self._payload
        if payload.__class__ is tuple:
            cls, values = payload
            if cls.to_data is _DEFAULT_TO_DATA:
                return cls.spec.codec.encode_values(values)  # type: ignore[no-any-return]
        elif self._typed and payload.__class__.to_data is _DEFAULT_TO_DATA:
            return payload.spec.codec.encode_plain(payload)  # type: ignore[no-any-return]
        return self.data  # given as JSON, or a payload class with its own ``to_data``

    @property
    def surface(self) -> SurfaceOp | None:
        """The surface operation of a model-visible event (``None`` for any other event)."""
        return SurfaceOp.of(self)

    def to_json(self) -> dict[str, Any]:
        """The event as plain JSON ``{"type", "seq", "time", "data"}`` (``data`` thawed)."""
        return _EVENT_JSON.encode_plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "event") -> SessionEvent:
        """Read an event. :raises VocabularyError: naming the bad field (``event.seq``, ...)."""
        event: SessionEvent = _EVENT_JSON.read(data, field)
        return event


def _event_rule(field: str, event_type: str, seq: int, time: float, data: FrozenDict) -> None:
    """What ``SessionEvent``'s own checks add to the fields' types: a type is not empty, and only a
    model-visible event carries a surface operation, a valid one."""
    if not event_type:
        refuse(f"{field}.type", "expected a non-empty event type such as 'turn/start'")
    if "surface" in data:
        if not is_visible(event_type):
            refuse(f"{field}.data.surface", _NOT_VISIBLE)
        surface = expect_object(data["surface"], f"{field}.data.surface")
        SurfaceOp.from_json(surface, field=f"{field}.data.surface")


#: The readers and ``_event_rule`` check everything the constructor does, so an event read is built
#: straight into its slots.
_EVENT_JSON: Final = ObjectCodec(
    SessionEvent, fields={"time": json_field(minimum=0.0)}, check=_event_rule, trusted=True
)
_EVENT_JSON.install_to_json()


#: a payload class whose ``to_data`` is this one encodes as its codec says
_DEFAULT_TO_DATA: Final = LogEvent.to_data

_new_event = object.__new__
_set_type = SessionEvent.type.__set__  # type: ignore[attr-defined]  # slot descriptors
_set_seq = SessionEvent.seq.__set__  # type: ignore[attr-defined]
_set_time = SessionEvent.time.__set__  # type: ignore[attr-defined]
_set_data = SessionEvent.__dict__["data"].__set__
_set_payload = SessionEvent.__dict__["_payload"].__set__
_set_typed = SessionEvent.__dict__["_typed"].__set__


# Kept: the constructor needs ``data``, which a typed append has not until it is read; and a raw
# append's event costs 0.32 us this way vs 0.94 through ``SessionEvent(...)`` (same run).
def logged_event(seq: int, time: float, payload: LogEvent) -> SessionEvent:
    """An event for a typed payload, its ``data`` built when first read.

    The session's own constructor: the payload was checked when it was built and ``seq`` and
    ``time`` come from the session, so nothing is checked again (a third of the cost of an append).
    """
    event: SessionEvent = _new_event(SessionEvent)
    _set_type(event, payload.type)
    _set_seq(event, seq)
    _set_time(event, time)
    _set_payload(event, payload)
    _set_typed(event, True)
    return event


def raw_event(event_type: str, seq: int, time: float, data: object) -> SessionEvent:
    """An event of a declared type given as JSON ``data``: frozen here, its payload read by the
    session's rules when it is admitted (``event.payload``).

    The session's own constructor for ``append(type, data)``: ``event_type`` is a declared type and
    ``seq`` and ``time`` come from the session, so only ``data`` needs checking. A model-visible
    type's ``surface`` is checked once, by its payload's reader.

    :raises EventDataError: ``data`` is not lossless JSON, or carries a surface op it may not.
    """
    if type(data) is not FrozenDict:
        try:
            data = freeze_json_object(data, where=event_type, root="data")
        except JsonValueError as exc:
            raise EventDataError(str(exc), event_type=event_type) from exc
    if "surface" in data and not is_visible(event_type):
        _check_surface(data["surface"], event_type)  # raises
    event: SessionEvent = _new_event(SessionEvent)
    _set_type(event, event_type)
    _set_seq(event, seq)
    _set_time(event, time)
    _set_data(event, data)
    _set_payload(event, None)
    _set_typed(event, False)
    return event
