"""Turn cancellation: a signal the public ``cancel()`` sets, and scopes that it cancels."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

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


class interruptible:
    """A scope that the turn's signal cancels. Code after it calls ``check(signal)``.

    Only the cancellation this scope caught is absorbed; a cancellation from outside (the
    harness shutting down) propagates as usual. A class rather than a ``@contextmanager``
    generator: it runs once or twice per step, and the generator protocol costs more than the
    scope itself.
    """

    __slots__ = ("_remove", "_scope", "_signal")

    def __init__(self, signal: CancelSignal) -> None:
        self._signal = signal
        self._scope = anyio.CancelScope()
        self._remove: Callable[[], None] | None = None

    def __enter__(self) -> anyio.CancelScope:
        scope = self._scope.__enter__()
        self._remove = self._signal.on_cancel(scope.cancel)
        return scope

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if self._remove is not None:
            self._remove()
        return bool(self._scope.__exit__(exc_type, exc, tb))


def check(signal: CancelSignal, message: AssistantMessage | None = None) -> None:
    """Raise ``Aborted`` (carrying ``message``) if the turn was cancelled."""
    if signal.reason is not None:
        raise Aborted(signal.reason, message)
