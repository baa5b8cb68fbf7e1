"""Turn cancellation: a signal the public ``cancel()`` sets, and scopes that it cancels."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from dsh_core._signal import CancelSignal

__all__ = ["Aborted", "check", "interruptible"]


class Aborted(Exception):
    """Internal: the turn's signal was cancelled; the turn ends ``aborted`` (or ``disposed``)."""


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


def check(signal: CancelSignal) -> None:
    """Raise ``Aborted`` if the turn was cancelled."""
    if signal.reason is not None:
        raise Aborted(signal.reason)
