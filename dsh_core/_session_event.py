"""One entry of a session's append-only log, and the surface operation model-visible entries carry.

``SessionEvent(type, seq, time, data)``: ``seq`` is the index in the log (contiguous from 0),
``time`` seconds since the epoch, ``data`` deep-frozen lossless JSON (a ``FrozenDict``).

The *surface* is the list of model-visible entries that ``derive_messages()`` folds into
messages. Events of the ``SURFACE_EVENT_TYPES`` may carry ``data["surface"]``: ``{"op": "append"}``
(the default when absent) or ``{"op": "replace", "start": i, "end": j}``, which replaces the
surface entries ``i`` to ``j`` (end exclusive) with this event (compaction, pruning).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, TypeAlias

import attrs

from ._errors import EventDataError, VocabularyError
from ._json import (
    FrozenDict,
    JsonValueError,
    check_keys,
    expect_object,
    freeze_json_object,
    int_field,
    literal_field,
    number_field,
    refuse,
    str_field,
    thaw_json,
)

__all__ = ["SURFACE_EVENT_TYPES", "SessionEvent", "SurfaceOp", "SurfaceOpKind"]

#: The model-visible event types: each one is an entry of the surface (contract, SPEC §3).
SURFACE_EVENT_TYPES: Final[frozenset[str]] = frozenset(
    {"user/message", "assistant/message", "tool/result", "context/message", "steering/message"}
)

SurfaceOpKind: TypeAlias = Literal["append", "replace"]
_OPS: Final = frozenset({"append", "replace"})


def _validate_op(instance: SurfaceOp, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in _OPS:
        msg = f"SurfaceOp.op must be 'append' or 'replace', got {value!r}"
        raise ValueError(msg)


def _validate_bound(instance: SurfaceOp, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (type(value) is not int or value < 0):
        msg = f"SurfaceOp.{attribute.name} must be an int >= 0 or None, got {value!r}"
        raise (ValueError if type(value) is int else TypeError)(msg)


@attrs.frozen
class SurfaceOp:
    """How a model-visible event changes the surface: append itself, or replace a span with itself.

    Build with ``SurfaceOp.append()`` or ``SurfaceOp.replace(start, end)``; ``end`` is exclusive
    and ``start <= end`` (an empty span inserts at ``start``).
    """

    op: SurfaceOpKind = attrs.field(default="append", validator=_validate_op)
    start: int | None = attrs.field(default=None, validator=_validate_bound)
    end: int | None = attrs.field(default=None, validator=_validate_bound)

    _APPEND: ClassVar[SurfaceOp]

    def __attrs_post_init__(self) -> None:
        if self.op == "append":
            if self.start is not None or self.end is not None:
                msg = "SurfaceOp(op='append') takes no start or end; use SurfaceOp.replace(start, end)"
                raise ValueError(msg)
        elif self.start is None or self.end is None or self.start > self.end:
            msg = f"SurfaceOp(op='replace') needs 0 <= start <= end, got start={self.start}, end={self.end}"
            raise ValueError(msg)

    @classmethod
    def append(cls) -> SurfaceOp:
        """The default: the event becomes the last surface entry."""
        return cls._APPEND

    @classmethod
    def replace(cls, start: int, end: int) -> SurfaceOp:
        """The event takes the place of surface entries ``start`` to ``end`` (exclusive)."""
        return cls("replace", start, end)

    @property
    def removed(self) -> int:
        """How many surface entries this operation removes."""
        return 0 if self.start is None or self.end is None else self.end - self.start

    def to_json(self) -> dict[str, Any]:
        if self.op == "append":
            return {"op": "append"}
        return {"op": "replace", "start": self.start, "end": self.end}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "surface") -> SurfaceOp:
        """Read a surface operation. :raises VocabularyError: naming the bad field."""
        data = expect_object(data, field)
        op = literal_field(data, "op", field, _OPS)
        if op == "append":
            check_keys(data, _APPEND_KEYS, field)
            return cls._APPEND
        check_keys(data, _REPLACE_KEYS, field)
        start = int_field(data, "start", field)
        end = int_field(data, "end", field)
        if start > end:
            refuse(f"{field}.end", f"a replaced span ends at or after its start ({start}), got {end}")
        return cls("replace", start, end)

    @classmethod
    def of(cls, event: SessionEvent) -> SurfaceOp | None:
        """The surface operation ``event`` carries: ``None`` for an event that is not model-visible.

        :raises VocabularyError: if the event's ``surface`` is malformed.
        """
        if event.type not in SURFACE_EVENT_TYPES:
            return None
        raw = event.data.get("surface")
        if raw is None:
            return cls._APPEND
        return cls.from_json(expect_object(raw, "data.surface"), field="data.surface")


SurfaceOp._APPEND = SurfaceOp()
_APPEND_KEYS: Final = frozenset({"op"})
_REPLACE_KEYS: Final = frozenset({"op", "start", "end"})


# ---------------------------------------------------------------------- events


def _validate_type(instance: SessionEvent, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not str or not value:
        msg = f"SessionEvent.type must be a non-empty str such as 'turn/start', got {value!r}"
        raise (ValueError if isinstance(value, str) else TypeError)(msg)


def _validate_seq(instance: SessionEvent, attribute: attrs.Attribute[Any], value: object) -> None:
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
    if event_type not in SURFACE_EVENT_TYPES:
        raise EventDataError(f"{event_type}: data.surface: {_NOT_VISIBLE}", event_type=event_type)
    try:
        SurfaceOp.from_json(expect_object(raw, "data.surface"), field="data.surface")
    except VocabularyError as exc:
        raise EventDataError(f"{event_type}: {exc}", event_type=event_type) from exc


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

    @property
    def surface(self) -> SurfaceOp | None:
        """The surface operation of a model-visible event (``None`` for any other event)."""
        return SurfaceOp.of(self)

    def to_json(self) -> dict[str, Any]:
        """The event as plain JSON ``{"type", "seq", "time", "data"}`` (``data`` thawed)."""
        return {"type": self.type, "seq": self.seq, "time": self.time, "data": thaw_json(self.data)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, field: str = "event") -> SessionEvent:
        """Read an event. :raises VocabularyError: naming the bad field (``event.seq``, ...)."""
        data = expect_object(data, field)
        check_keys(data, _EVENT_KEYS, field)
        event_type = str_field(data, "type", field)
        if not event_type:
            refuse(f"{field}.type", "expected a non-empty event type such as 'turn/start'")
        seq = int_field(data, "seq", field)
        time = number_field(data, "time", field, minimum=0.0)
        raw = expect_object(data.get("data"), f"{field}.data")
        try:
            frozen = freeze_json_object(raw, where=field, root=f"{field}.data")
        except JsonValueError as exc:  # only when handed Python objects rather than parsed JSON
            refuse(exc.path, exc.problem)
        if "surface" in frozen:
            if event_type not in SURFACE_EVENT_TYPES:
                refuse(f"{field}.data.surface", _NOT_VISIBLE)
            surface = expect_object(frozen["surface"], f"{field}.data.surface")
            SurfaceOp.from_json(surface, field=f"{field}.data.surface")
        return cls(event_type, seq, time, frozen)


_EVENT_KEYS: Final = frozenset({"type", "seq", "time", "data"})
