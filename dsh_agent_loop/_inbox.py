"""The agent's durable inbox: prompts waiting for a turn, steering and context waiting for a step.

Every accepted item is first recorded in the session as ``inbox/queued``; the event that consumes
it (``user/message``, ``steering/message``, ``context/message`` or ``prompt/blocked``) carries its
id, and a cancel records ``inbox/cleared``. So the pending items can be rebuilt from the log alone.
The inbox knows nothing of models or tools.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

import attrs

from dsh_core.session_log import InboxClearedEvent, InboxKind, InboxQueuedEvent, SessionEvent
from dsh_core.vocabulary import UserMessage

__all__ = ["Inbox", "InboxKind", "Queued"]


@attrs.frozen
class Queued:
    """One accepted message and how it was sent."""

    id: str
    kind: InboxKind
    message: UserMessage
    #: False for items the loop makes itself (a continuation reason): no inbox/queued record exists
    durable: bool = True


class Inbox:
    """Two FIFOs: ``queued`` (prompts for the next turn) and ``step`` (steering and context)."""

    def __init__(self) -> None:
        self.queued: deque[Queued] = deque()
        self.step: deque[Queued] = deque()

    def __bool__(self) -> bool:
        return bool(self.queued or self.step)

    def put(self, item: Queued) -> None:
        (self.queued if item.kind == "send" else self.step).append(item)

    def take_queued(self) -> list[Queued]:
        items = list(self.queued)
        self.queued.clear()
        return items

    def take_step(self) -> list[Queued]:
        items = list(self.step)
        self.step.clear()
        return items

    def clear(self) -> list[str]:
        """Drop everything; returns the ids dropped (for the ``inbox/cleared`` record)."""
        ids = [item.id for item in (*self.step, *self.queued)]
        self.queued.clear()
        self.step.clear()
        return ids

    def drop_steering(self) -> list[Queued]:
        """A terminal stop discards the steering left over; injected context stays."""
        dropped = [item for item in self.step if item.kind == "steer"]
        kept = [item for item in self.step if item.kind != "steer"]
        self.step.clear()
        self.step.extend(kept)
        return dropped

    @property
    def has_steering(self) -> bool:
        return any(item.kind == "steer" for item in self.step)

    def requeue_steering(self) -> bool:
        """At an ordinary turn end, leftover steering waits for the next turn as a prompt would.

        Injected context stays where it is, riding with the next turn's first step. Returns
        whether anything was re-queued.
        """
        steering = [item for item in self.step if item.kind == "steer"]
        if not steering:
            return False
        context = [item for item in self.step if item.kind != "steer"]
        self.step.clear()
        self.step.extend(context)
        self.queued.extend(attrs.evolve(item, kind="send") for item in steering)
        return True

    @classmethod
    def restore(cls, events: Sequence[SessionEvent] | Iterable[SessionEvent]) -> Inbox:
        """Rebuild the pending items from a log: queued - consumed - cleared, in order.

        A restored agent has no running turn, so pending prompts and steering wait for the next
        turn, and pending injected context for its first step.
        """
        pending: dict[str, Queued] = {}
        for event in events:
            payload = event.payload
            if isinstance(payload, InboxQueuedEvent):
                # Steering outlives its turn as a prompt; injected context still rides with a step.
                queued_kind: InboxKind = "inject" if payload.kind == "inject" else "send"
                pending[payload.id] = Queued(payload.id, queued_kind, payload.message)
            elif isinstance(payload, InboxClearedEvent):
                for ident in payload.ids:
                    pending.pop(ident, None)
            elif payload is not None and payload.spec.consumes:
                queued_id = payload.queued_id  # type: ignore[attr-defined]  # a consuming type has one
                if queued_id is not None:
                    pending.pop(queued_id, None)
        inbox = cls()
        for item in pending.values():
            inbox.put(item)
        return inbox
