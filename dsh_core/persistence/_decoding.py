"""Reading stored events fast, for any backend: frozen JSON straight from the decoder, the collector
paused while a whole log is built, a listing's title from the first prompt.

``decode_frozen`` is the fast path of a load: ``json`` guarantees what ``freeze_json`` would check
of parsed text (str keys, JSON scalars; NaN and Infinity are refused), so each object is frozen as
the decoder builds it, bottom-up (arrays become tuples, objects ``FrozenDict``), instead of being
copied again afterwards.

``gc_paused``: a log of 100k events builds about a million containers, all of them kept, and the
collections they would trigger cost a third of the parse. Nothing is freed late but cycles, and
the pause lasts one parse; it nests across threads.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, NoReturn

from dsh_core.session_log._event import SessionEvent
from dsh_core.vocabulary import FrozenDict, UserMessage, frozen_trusted

__all__ = ["decode_frozen", "gc_paused", "loads_strict", "title_of"]

#: how long a listing's title may be (the start of the first prompt)
TITLE_LENGTH: Final = 80


def _refuse_constant(name: str) -> NoReturn:
    msg = f"{name} is not JSON (only finite numbers are)"
    raise ValueError(msg)


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` that refuses NaN and Infinity (plain, unfrozen values)."""
    return json.loads(text, parse_constant=_refuse_constant)


def _tuple_of(items: list[Any]) -> tuple[Any, ...]:
    return tuple([_tuple_of(item) if type(item) is list else item for item in items])


def _freeze_object(obj: dict[str, Any]) -> FrozenDict:
    for key, value in obj.items():
        if type(value) is list:
            obj[key] = _tuple_of(value)
    return frozen_trusted(obj)


#: JSON text to frozen values (objects ``FrozenDict``, arrays tuples). :raises ValueError: not JSON.
decode_frozen: Final = json.JSONDecoder(object_hook=_freeze_object, parse_constant=_refuse_constant).decode

_gc_lock = threading.Lock()
_gc_users = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause cyclic collection while building objects that all stay alive (see the module docstring)."""
    global _gc_users, _gc_was_enabled
    with _gc_lock:
        if _gc_users == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0 and _gc_was_enabled:
                gc.enable()


def title_of(event: SessionEvent) -> str | None:
    """A listing's title from a ``user/message`` event: its text on one line, at most 80 characters."""
    data: Any = event.data
    try:
        message = UserMessage.from_json(data["message"])
    except (ValueError, KeyError, TypeError):
        return None
    text = " ".join(message.text.split())
    return text if len(text) <= TITLE_LENGTH else text[: TITLE_LENGTH - 1] + "…"
