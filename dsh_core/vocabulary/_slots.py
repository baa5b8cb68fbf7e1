"""Building a frozen attrs instance straight into its slots, for values already checked.

A few constructors run once per step with values their caller has already checked
(``StepStartEvent.trusted``, ``LlmRequest.for_call``, ``ToolResult.of_text``), and a streamed
chunk's payload is built only when first read (``Session.append_unchecked``). They skip the attrs
``__init__`` (its validators, converters and generic ``object.__setattr__``) and set each slot
through its descriptor: about half the cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs

__all__ = ["build_unchecked", "field_count", "new_instance", "slot_setters"]

#: an instance of a slotted class with no slot set yet (each one is set right after)
new_instance: Final = object.__new__


def slot_setters(cls: type) -> tuple[Callable[[Any, Any], None], ...]:
    """The slot setters of ``cls``'s fields, in field order (``attrs.fields``: they cannot fall out
    of step with the class)."""
    return tuple(cls.__dict__[attribute.name].__set__ for attribute in attrs.fields(cls))


_SETTERS: Final[dict[type, tuple[Callable[[Any, Any], None], ...]]] = {}


def _setters_of(cls: type) -> tuple[Callable[[Any, Any], None], ...]:
    """``slot_setters(cls)``, made once per class."""
    return _SETTERS.get(cls) or _SETTERS.setdefault(cls, slot_setters(cls))


def build_unchecked(cls: type, values: tuple[Any, ...]) -> Any:
    """An instance of ``cls`` from all its field values, in field order, set unchecked.

    :raises TypeError: for a count of values that is not ``cls``'s count of fields.
    """
    setters = _setters_of(cls)
    if len(values) != len(setters):
        msg = f"{cls.__name__} has {len(setters)} fields, got {len(values)} values"
        raise TypeError(msg)
    instance: Any = new_instance(cls)
    for setter, value in zip(setters, values, strict=True):
        setter(instance, value)
    return instance


def field_count(cls: type) -> int:
    """How many fields ``cls`` has (what ``build_unchecked`` takes)."""
    return len(_setters_of(cls))
