"""SPEC §9.1 in one place: which published events a store writes and makes durable at once.

An accepted ``send``/``steer`` (``inbox/queued``), a cancel's ``inbox/cleared`` and context injected
while no turn runs must not wait out a backend's batch window: the store starts writing them the
moment they are published, so a send that returned survives the process being killed, and a flush
that follows returns only when they are on disk. Every backend asks ``is_urgent`` from its
``session/event`` listener.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from dsh_core.session_log._catalogue import ContextMessageEvent, InboxClearedEvent, InboxQueuedEvent

if TYPE_CHECKING:
    from dsh_core.session_log._event import SessionEvent
    from dsh_core.session_log._session import Session

__all__ = ["URGENT_TYPES", "is_urgent"]

#: event types a store writes at once, never batched: the durable inbox (SPEC §3, §9.1)
URGENT_TYPES: Final = frozenset({InboxQueuedEvent.type, InboxClearedEvent.type})

_CONTEXT: Final = ContextMessageEvent.type


def is_urgent(session: Session, event: SessionEvent) -> bool:
    """Whether ``event`` skips the batch window: an inbox record, or context injected between turns."""
    kind = event.type
    return kind in URGENT_TYPES or (kind == _CONTEXT and session.open_turn is None)
