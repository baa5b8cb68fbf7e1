"""Turn cancellation: a signal the public ``cancel()`` sets, and the one cancel scope of a turn.

A turn runs inside one anyio cancel scope. The parts of it that ``cancel()`` must interrupt at
once (admitting the prompts, everything of a step up to its assistant message, the continuation
gate) are *stretches*, opened with ``with interrupts:``; the signal cancels the scope only while
a stretch is open. The tool calls run between stretches: a cancel then only sets the signal,
which the tool pipeline sees (a running tool ends ``ABORTED``), and the next stretch starts
cancelled. Code after a stretch calls ``check(signal)``.

One scope per turn rather than one per stretch: entering and leaving an anyio cancel scope costs
several microseconds on either backend, and a step has two or three stretches (the tool-step and
text-step figures of ``benchmarks/loop.py``).
"""

from __future__ import annotations

from types import TracebackType

import anyio

from dsh_core.vocabulary import AssistantMessage, CancelSignal

__all__ = ["Aborted", "TurnInterrupts", "check"]


class Aborted(Exception):
    """Internal: the turn's signal was cancelled; the turn ends ``aborted`` (or ``disposed``).

    ``message`` is the interrupted assistant message kept in the log, if the step had streamed any.
    """

    def __init__(self, reason: str, message: AssistantMessage | None = None) -> None:
        super().__init__(reason)
        self.message = message


class TurnInterrupts:
    """The turn's cancel scope, which ``signal`` cancels while a stretch (``with interrupts:``) is open.

    The turn enters ``scope`` around its body and calls ``arm()`` inside it; the scope then
    absorbs the cancellation it caused. A cancel that lands between stretches takes effect when
    the next stretch opens. ``kept`` is the interrupted assistant message a cancelled step left
    in the log (the turn's last message), if any.
    """

    __slots__ = ("_open", "kept", "scope", "signal")

    def __init__(self, signal: CancelSignal) -> None:
        self.signal = signal
        self.scope = anyio.CancelScope()
        self._open = False
        self.kept: AssistantMessage | None = None

    def arm(self) -> None:
        """Let the signal reach the scope (once per turn, inside ``scope``)."""
        self.signal.on_cancel(self._cancelled)  # the signal is the turn's own: never removed

    def _cancelled(self) -> None:
        if self._open:
            self.scope.cancel()

    @property
    def cancelled_here(self) -> bool:
        """Whether the signal cancelled the turn's scope (as opposed to a cancel from outside)."""
        return self.scope.cancel_called

    def __enter__(self) -> None:
        self._open = True
        if self.signal.reason is not None:  # cancelled between stretches: interrupt this one at once
            self.scope.cancel()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._open = False


def check(signal: CancelSignal, message: AssistantMessage | None = None) -> None:
    """Raise ``Aborted`` (carrying ``message``) if the turn was cancelled."""
    if signal.reason is not None:
        raise Aborted(signal.reason, message)
