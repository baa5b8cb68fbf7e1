"""Spilled outputs as log records: the ``spill/stored`` event, and finding one by its locator."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from dsh_core.session_log import LogEvent, SessionEvent, log_event

__all__ = ["SpillIndex", "SpillStored"]


@log_event("spill/stored")
@attrs.frozen(kw_only=True)
class SpillStored(LogEvent):
    """The full text of a tool result too large to show the model (``bytes`` of UTF-8, more than
    ``max_inline_bytes``), kept for ``read_output``; the call's ``tool/result`` follows, showing a
    preview and carrying ``spilled: {locator, bytes}``."""

    locator: str
    call_id: str
    tool: str
    bytes: int
    text: str


class SpillIndex:
    """Where each locator's ``spill/stored`` sits in one session's log, read incrementally."""

    __slots__ = ("_positions", "_read")

    def __init__(self) -> None:
        self._positions: dict[str, int] = {}
        self._read = 0

    def find(self, events: Sequence[SessionEvent], locator: str) -> SpillStored | None:
        """The stored output of ``locator`` in ``events`` (the log this index follows), or ``None``."""
        if len(events) < self._read:  # a different log under the same session id: start over
            self._positions.clear()
            self._read = 0
        for index in range(self._read, len(events)):
            event = events[index]
            if event.type == SpillStored.type:
                payload = event.payload
                stored = payload if isinstance(payload, SpillStored) else SpillStored.from_data(event.data)
                self._positions[stored.locator] = index
        self._read = len(events)
        position = self._positions.get(locator)
        if position is None:
            return None
        event = events[position]
        payload = event.payload
        return payload if isinstance(payload, SpillStored) else SpillStored.from_data(event.data)

    def locators(self) -> list[str]:
        """The locators seen so far, oldest first."""
        return list(self._positions)
