"""How a session-log event type is declared: ``@log_event`` on a frozen attrs payload class.

The declaration is the one place that says what an event type's ``data`` holds (its fields, read and
written by one ``ObjectCodec``) and what the harness does with it: ``visible`` (a model-visible
surface entry carrying a ``message``), ``consumes`` (carries the ``queued_id`` of the queued prompt
it consumes) and ``in_turn`` (written only inside a turn). The registry maps each type name to its
declaration; undeclared types are free JSON that nothing checks beyond being lossless.
"""

from __future__ import annotations

import builtins
import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, Self, TypeVar, cast

import attrs

from dsh_core.vocabulary._codec import ObjectCodec
from dsh_core.vocabulary._errors import DuplicateRegistrationError, EventDataError, VocabularyError
from dsh_core.vocabulary._json import FrozenDict

__all__ = [
    "LogEvent",
    "LogEventSpec",
    "declared_types",
    "is_visible",
    "log_event",
    "read_payload",
    "spec_for",
]

_P = TypeVar("_P", bound="LogEvent")


@attrs.frozen
class LogEventSpec:
    """What the catalogue knows about one event type."""

    type: str
    cls: builtins.type[LogEvent]
    doc: str
    visible: bool
    consumes: bool
    in_turn: bool
    codec: ObjectCodec = attrs.field(eq=False, repr=False)
    #: the module that declared it (``dsh_core.session_log._catalogue`` for the core types)
    module: str = ""


class LogEvent:
    """Base of every payload class: the typed ``data`` of one event type.

    ``session.append(payload)`` validates nothing more (the constructor did) and serialises the
    payload once, when ``event.data`` is first read.
    """

    __slots__ = ()

    #: the event type, e.g. ``"turn/start"`` (set by ``@log_event``)
    type: ClassVar[str]
    spec: ClassVar[LogEventSpec]

    def to_data(self) -> FrozenDict:
        """The event's ``data``: deep-frozen JSON in the shape of SPEC §7."""
        return self.spec.codec.encode(self)

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, field: str = "data") -> Self:
        """Read and check ``data`` of this type. :raises VocabularyError: naming the bad field."""
        payload: Self = cls.spec.codec.read(data, field)
        return payload


_REGISTRY: dict[str, LogEventSpec] = {}
_VISIBLE: set[str] = set()


def log_event(
    event_type: str, *, visible: bool = False, consumes: bool = False, in_turn: bool = False
) -> Callable[[type[_P]], type[_P]]:
    """Declare ``event_type`` with the decorated frozen attrs class as its payload.

    Put it above ``@attrs.frozen``. The class's docstring is the type's documentation. A
    model-visible type has a ``message`` and a ``surface`` field; a consuming type a ``queued_id``.

    :raises DuplicateRegistrationError: the type is already declared by another class.
    :raises TypeError: the class is not an attrs ``LogEvent`` or lacks the fields its flags need.
    """

    def declare(cls: type[_P]) -> type[_P]:
        is_attrs = attrs.has(cls)
        if not (isinstance(cls, type) and issubclass(cls, LogEvent) and is_attrs):
            msg = f"@log_event({event_type!r}) decorates an attrs class deriving from LogEvent, got {cls!r}"
            raise TypeError(msg)
        names = {field.name for field in attrs.fields(cast(Any, cls))}
        needed = ({"message", "surface"} if visible else set()) | ({"queued_id"} if consumes else set())
        if not needed <= names:
            msg = f"@log_event({event_type!r}): {cls.__name__} needs the fields {sorted(needed - names)}"
            raise TypeError(msg)
        if "type" in names:
            msg = f"@log_event({event_type!r}): {cls.__name__} may not have a field named 'type' (the event's own)"
            raise TypeError(msg)
        taken = _REGISTRY.get(event_type)
        if taken is not None and (taken.module, taken.cls.__qualname__) != (cls.__module__, cls.__qualname__):
            msg = (
                f"session event type {event_type!r} is already declared by {taken.module}.{taken.cls.__qualname__}; "
                f"choose a name of your own, e.g. '<plugin>/<event>'"
            )
            raise DuplicateRegistrationError(msg)
        spec = LogEventSpec(
            type=event_type,
            cls=cls,
            doc=inspect.cleandoc(cls.__doc__ or ""),
            visible=visible,
            consumes=consumes,
            in_turn=in_turn,
            codec=ObjectCodec(cls),
            module=cls.__module__,
        )
        cls.type = event_type
        cls.spec = spec
        _REGISTRY[event_type] = spec
        if visible:
            _VISIBLE.add(event_type)
        return cls

    return declare


def spec_for(event_type: str) -> LogEventSpec | None:
    """The declaration of ``event_type``, or ``None`` for an undeclared type."""
    return _REGISTRY.get(event_type)


def declared_types() -> tuple[LogEventSpec, ...]:
    """Every declared type, in declaration order."""
    return tuple(_REGISTRY.values())


def is_visible(event_type: str) -> bool:
    """Whether events of ``event_type`` are model-visible (surface entries)."""
    return event_type in _VISIBLE


_NO_PAYLOAD: Final = None


def read_payload(event_type: str, data: Mapping[str, Any], *, field: str = "data") -> LogEvent | None:
    """``data`` of ``event_type`` as its payload class, checked by the type's rules.

    Returns ``None`` for an undeclared type (its data is free JSON).

    :raises EventDataError: naming the event type and the field, e.g.
        ``tool/call: data.call_id: missing``; ``.field`` holds the path.
    """
    spec = _REGISTRY.get(event_type)
    if spec is None:
        return _NO_PAYLOAD
    try:
        payload: LogEvent = spec.codec.read(data, field)
    except VocabularyError as exc:
        raise EventDataError(f"{event_type}: {exc}", event_type=event_type, field=exc.field) from exc
    return payload
