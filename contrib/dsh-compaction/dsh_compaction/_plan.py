"""Choosing what to summarise: the oldest span of the surface, cut where no tool call loses its result.

The surface is the session's list of model-visible entries (``session.surface``); the session
prefix is not part of it, so a plan can never touch the prefix. A span always starts at entry 0
(an earlier summary, when there is one, is folded into the new one) and ends at a *cut*: a
position ``i`` such that

* the entry at ``i`` is not a tool result (the surface after the replace starts with the summary,
  and the kept tail never starts with a tool result), and
* every tool call made before ``i`` has its result before ``i`` (a call and its result are never
  separated; calls that have no result anywhere in the surface do not count).

The tail from the cut on is kept verbatim. The cut is the last one that keeps at least
``keep`` tokens; an exchange boundary (a user prompt) is preferred when cutting there still brings
the request under the threshold, so that whole exchanges are summarised whenever that is enough.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from dsh_core import SessionEvent

from ._estimate import message_json_tokens

__all__ = ["Entry", "Mode", "Span", "choose_span", "cuts", "entry_of"]

Role: TypeAlias = Literal["user", "assistant", "tool"]
#: How hard to cut. ``keep``: keep at least ``keep`` tokens, or cut nothing. ``fit``: as ``keep``
#: when that brings the request under the threshold; otherwise the first cut that does, or else
#: the largest head. ``keep-or-largest``: as ``keep``, or else the largest head (a manual request).
#: ``largest``: the largest head that can be cut off (after an overflow the estimate proved wrong).
Mode: TypeAlias = Literal["keep", "fit", "keep-or-largest", "largest"]


@attrs.frozen
class Entry:
    """One surface entry, as planning sees it."""

    seq: int
    role: Role
    #: estimated tokens (0 for an entry that projects to no message)
    tokens: int
    #: ids of the tool calls it makes (an assistant message)
    calls: tuple[str, ...] = ()
    #: the call id it answers (a tool result)
    answers: str | None = None
    #: a user prompt: an exchange starts here
    prompt: bool = False
    #: an earlier compaction summary
    summary: bool = False


def entry_of(event: SessionEvent) -> Entry:
    """The planning view of a model-visible event."""
    message: Mapping[str, Any] = event.data["message"]  # type: ignore[assignment]  # checked at append
    role: Role = message["role"]
    if role == "assistant":
        content = message.get("content", ())
        calls = tuple(block["id"] for block in content if block.get("type") == "tool-call")
        tokens = message_json_tokens(message) if content else 0  # an empty reply is never sent
        return Entry(event.seq, role, tokens, calls=calls)
    if role == "tool":
        return Entry(event.seq, role, message_json_tokens(message), answers=message.get("call_id"))
    kind = message.get("source", {}).get("kind")
    return Entry(
        event.seq, role, message_json_tokens(message), prompt=kind == "user", summary=kind == "compaction"
    )


@attrs.frozen
class Span:
    """The surface entries ``[start, end)`` to replace with a summary."""

    start: int
    end: int
    #: estimated tokens of the span and of the tail kept after it
    tokens: int
    tail_tokens: int
    #: the cut is at a user prompt: only whole exchanges are summarised
    at_exchange: bool


def cuts(entries: Sequence[Entry]) -> list[int]:
    """Every position where the surface may be cut (see the module docstring), in order."""
    answered = {entry.answers for entry in entries if entry.answers is not None}
    waiting: set[str] = set()
    found: list[int] = []
    for index, entry in enumerate(entries):
        if index and not waiting and entry.role != "tool":
            found.append(index)
        waiting.update(call for call in entry.calls if call in answered)
        if entry.answers is not None:
            waiting.discard(entry.answers)
    return found


def choose_span(
    entries: Sequence[Entry],
    *,
    keep: float,
    room: float,
    min_tokens: float = 0,
    mode: Mode = "keep",
) -> Span | None:
    """The span to summarise, or ``None`` when nothing worth summarising can be cut off.

    :param keep: estimated tokens the kept tail must hold at least.
    :param room: estimated tokens the tail may hold for the request to come under the threshold
        (the threshold less the header and the summary).
    :param min_tokens: a span must hold more than this (a smaller one is not worth a model call).
    :param mode: how hard to cut (see ``Mode``).
    """
    tail = [0] * (len(entries) + 1)
    for index in range(len(entries) - 1, -1, -1):
        tail[index] = tail[index + 1] + entries[index].tokens
    total = tail[0]
    fresh = [False] * (len(entries) + 1)  # fresh[i]: entries[:i] hold more than earlier summaries
    for index, entry in enumerate(entries):
        fresh[index + 1] = fresh[index] or not entry.summary
    candidates = [cut for cut in cuts(entries) if fresh[cut] and total - tail[cut] > min_tokens]
    if not candidates:
        return None

    def span(cut: int) -> Span:
        return Span(0, cut, total - tail[cut], tail[cut], entries[cut].prompt)

    if mode == "largest":
        return span(candidates[-1])
    keeping = [cut for cut in candidates if tail[cut] >= keep]
    if keeping:
        exchanges = [cut for cut in keeping if entries[cut].prompt]
        if exchanges and tail[exchanges[-1]] <= room:
            return span(exchanges[-1])
        if tail[keeping[-1]] <= room or mode != "fit":
            return span(keeping[-1])
    if mode == "keep":
        return None
    if mode == "fit":
        fitting = [cut for cut in candidates if tail[cut] <= room]
        if fitting:
            return span(fitting[0])
    return span(candidates[-1])
