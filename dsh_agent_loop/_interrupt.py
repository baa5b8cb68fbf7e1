"""Turn cancellation: a signal the public ``cancel()`` sets, and scopes that it cancels."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from dsh_core.vocabulary import AssistantMessage, CancelSignal

__all__ = ["Aborted", "check", "interruptible"]


class Aborted(Exception):
    """Internal: the turn's signal was cancelled; the turn ends ``aborted`` (or ``disposed``).

    ``message`` is the interrupted assistant message kept in the log, if the step had streamed any.
    """

    def __init__(self, reason: str, message: AssistantMessage | None = None) -> None:
        super().__init__(reason)
        self.message = message


@contextmanager
def interruptible(signal: CancelSignal) -> Iterator[anyio.CancelScope]:
    """A scope that the turn's signal cancels. Code after it calls ``check(signal)``.

    Only the cancellation this scope caught is absorbed; a cancellation from outside (the
    harness shutting down) propagates as usual.
    """
    with anyio.CancelScope() as scope:
        remove = signal.on_cancel(scope.cancel)
        try:
            yield scope
        finally:
            remove()


def check(signal: CancelSignal, message: AssistantMessage | None = None) -> None:
    """Raise ``Aborted`` (carrying ``message``) if the turn was cancelled."""
    if signal.reason is not None:
        raise Aborted(signal.reason, message)
