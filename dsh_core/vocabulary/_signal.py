"""A cancellation signal that code which polls (or waits) can observe; the scope does the cancelling."""

from __future__ import annotations

from collections.abc import Callable

import anyio

__all__ = ["CancelSignal"]


class CancelSignal:
    """Set once when a turn or step is cancelled; ``reason`` says why.

    The loop cancels the task doing the work through an anyio cancel scope; this signal is the
    read-only view for adapters and tools that poll, or that need to wait on it.
    """

    __slots__ = ("_callbacks", "_event", "reason")

    def __init__(self) -> None:
        self._event: anyio.Event | None = None
        self._callbacks: dict[int, Callable[[], object]] = {}
        self.reason: str | None = None

    @property
    def cancelled(self) -> bool:
        return self.reason is not None

    def cancel(self, reason: str = "cancelled") -> None:
        """Mark the signal cancelled; idempotent (the first reason is kept)."""
        if self.reason is None:
            self.reason = reason
            if self._event is not None:
                self._event.set()
            callbacks, self._callbacks = self._callbacks, {}
            for callback in callbacks.values():
                callback()

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` (e.g. a cancel scope's ``cancel``) when cancelled; returns a remover.

        Runs at once if the signal is already cancelled.
        """
        if self.reason is not None:
            callback()
            return lambda: None
        key = id(callback)
        self._callbacks[key] = callback
        return lambda: self._callbacks.pop(key, None) and None

    async def wait(self) -> None:
        """Return once the signal is cancelled."""
        if self.reason is not None:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()

    def __repr__(self) -> str:
        return f"<CancelSignal {'cancelled: ' + self.reason if self.reason else 'armed'}>"
