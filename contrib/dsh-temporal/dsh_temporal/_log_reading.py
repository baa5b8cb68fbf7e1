"""What a turn activity reads back from the session log: outcomes per queued id, and crash marks.

The log is the single source of truth: the outcome of a message sent through the engine is the
``turn/end`` of the turn that consumed it (with that turn's last assistant message), or
``aborted`` when a cancel cleared it, or ``rejected`` when a prompt-submit listener blocked it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from dsh_core import SessionEvent
from dsh_core.session_log import (
    AssistantMessageEvent,
    ContextMessageEvent,
    InboxClearedEvent,
    InboxQueuedEvent,
    PromptBlockedEvent,
    SteeringMessageEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
)

__all__ = ["inject_key", "injects_after", "interrupted_turn", "outcomes_of", "turns_started"]

_TURN_START = TurnStartEvent.type
_TURN_END = TurnEndEvent.type
_ASSISTANT = AssistantMessageEvent.type
_CONSUMERS = frozenset({UserMessageEvent.type, SteeringMessageEvent.type, PromptBlockedEvent.type})
_CLEARED = InboxClearedEvent.type
_QUEUED = InboxQueuedEvent.type
_CONTEXT = ContextMessageEvent.type
#: the source ``agent.inject`` gives a message that names none
_INJECT_SOURCE: Mapping[str, Any] = {"kind": "context"}
#: turn/end reasons that mean the turn's worker went away rather than the turn finishing
_LOST = frozenset({"interrupted", "disposed"})


def outcomes_of(events: Sequence[SessionEvent], wanted: Collection[str]) -> dict[str, dict[str, Any]]:
    """The outcome (``{"reason": ..., "message": ...}``) of each wanted id the log has settled."""
    wanted = set(wanted)
    found: dict[str, dict[str, Any]] = {}
    if not wanted:
        return found
    open_ids: list[str] = []  # consumed by the turn that is open at this point of the log
    last_message: SessionEvent | None = None
    for event in events:
        data = event.data
        if event.type == _TURN_START:
            open_ids, last_message = [], None
        elif event.type in _CONSUMERS:
            ident = data.get("queued_id")
            if ident in wanted:
                open_ids.append(str(ident))
        elif event.type == _ASSISTANT:
            last_message = event
        elif event.type == _TURN_END:
            reason = event.to_json()["data"]["reason"]
            message = None if last_message is None else last_message.to_json()["data"]["message"]
            for ident in open_ids:
                found[ident] = {"reason": reason, "message": message}
            open_ids = []
        elif event.type == _CLEARED:
            for ident in event.to_json()["data"].get("ids", []):
                if ident in wanted and ident not in found:
                    found[str(ident)] = {"reason": {"kind": "aborted"}, "message": None}
    return found


def turns_started(events: Sequence[SessionEvent], after_seq: int) -> int:
    """How many turns started after ``after_seq``."""
    return sum(1 for event in events[after_seq + 1 :] if event.type == _TURN_START)


def interrupted_turn(events: Sequence[SessionEvent]) -> int | None:
    """The number of the last turn if it ended because its worker went away, else ``None``."""
    for event in reversed(events):
        if event.type == _TURN_END:
            data = event.to_json()["data"]
            return int(data["turn"]) if data["reason"].get("kind") in _LOST else None
        if event.type == _TURN_START:
            return None
    return None


def inject_key(content: Sequence[Mapping[str, Any]], source: Mapping[str, Any] | None) -> str:
    """What tells one injected message from another in the log: its content and source."""
    return json.dumps([list(content), dict(source or _INJECT_SOURCE)], sort_keys=True, separators=(",", ":"))


def injects_after(events: Sequence[SessionEvent], after_seq: int) -> Counter[str]:
    """The injects logged after ``after_seq``, counted by ``inject_key``.

    An inject made while a turn runs is logged ``inbox/queued`` (kind ``inject``) and later
    ``context/message`` with its ``queued_id``; one made while idle only ``context/message``.
    Each is counted once.
    """
    found: Counter[str] = Counter()
    for event in events[after_seq + 1 :]:
        if event.type == _QUEUED and event.data.get("kind") == "inject":
            message = event.to_json()["data"]["message"]
        elif event.type == _CONTEXT and event.data.get("queued_id") is None:
            message = event.to_json()["data"]["message"]
        else:
            continue
        found[inject_key(message["content"], message.get("source"))] += 1
    return found
