"""The dsh events neither protocol has a word for, as plain values both projections carry.

Steering (``steering/message``), the inbox (``inbox/queued``, ``inbox/cleared``) and compaction
(``compaction/summary``, from the ``compaction`` plugin) become AG-UI ``CUSTOM`` events named
``dsh.<name>`` and AI SDK ``data-dsh-<name>`` parts. Each carries an ``id`` that stays the same for
one thing (a queued prompt keeps its id from ``queued`` to ``cleared``, so the AI SDK's chat
replaces that part rather than adding one).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

from dsh_core.session_log import InboxClearedEvent, InboxQueuedEvent, SteeringMessageEvent

if TYPE_CHECKING:
    from dsh_core import SessionEvent

__all__ = ["COMPACTION", "Extra", "extras_of"]

#: The ``compaction`` plugin's event (a plugin's, not the core catalogue's: matched by name).
COMPACTION: Final = "compaction/summary"


@attrs.frozen
class Extra:
    """One dsh-specific fact for a protocol stream: its kind, the id it is known by, and its value."""

    name: str
    id: str
    value: Mapping[str, Any]


def _text(message: Mapping[str, Any]) -> str:
    return "".join(str(block.get("text", "")) for block in message.get("content", ()) if block.get("type") == "text")


def extras_of(event: SessionEvent) -> Iterator[Extra]:
    """What ``event`` says that the protocols have no event for (nothing for any other event)."""
    kind = event.type
    if kind not in (SteeringMessageEvent.type, InboxQueuedEvent.type, InboxClearedEvent.type, COMPACTION):
        return
    data: Any = event.plain_data()
    if kind == SteeringMessageEvent.type:
        message = data["message"]
        source = (message.get("source") or {}).get("kind", "user")
        yield Extra("steering", message["id"], {"text": _text(message), "queuedId": data.get("queued_id"), "source": source})
    elif kind == InboxQueuedEvent.type:
        yield Extra("inbox", data["id"], {"state": "queued", "kind": data["kind"], "text": _text(data["message"])})
    elif kind == InboxClearedEvent.type:
        for ident in data["ids"]:
            yield Extra("inbox", ident, {"state": "cleared"})
    else:
        yield Extra("compaction", f"compaction-{event.seq}", {"seq": event.seq, **data})
