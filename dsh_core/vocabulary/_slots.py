"""Building a frozen attrs instance straight into its slots, for a ``trusted`` constructor.

A few constructors run once per streamed chunk or per step with values their caller has already
checked (``AssistantChunkEvent.trusted``, ``LlmRequest.for_call``, ``ToolResult.of_text``). They
skip the attrs ``__init__`` (its validators, converters and generic ``object.__setattr__``) and
set each slot through its descriptor: about half the cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs

__all__ = ["new_instance", "slot_setters"]

#: an instance of a slotted class with no slot set yet (each one is set right after)
new_instance: Final = object.__new__


def slot_setters(cls: type) -> tuple[Callable[[Any, Any], None], ...]:
    """The slot setters of ``cls``'s fields, in field order (``attrs.fields``: they cannot fall out
    of step with the class)."""
    return tuple(cls.__dict__[attribute.name].__set__ for attribute in attrs.fields(cls))
