"""The error a ``dsh`` command raises for a failure the user can fix.

CliError(DshError)                 .code: the exit status, .hint: one more line of help
"""

from __future__ import annotations

from dsh_core import DshError

from ._exit import ExitCode

__all__ = ["CliError"]


class CliError(DshError):
    """A failure the user can fix, reported as one line (plus an optional hint) and an exit status."""

    def __init__(self, message: str, *, code: ExitCode = ExitCode.SETUP, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.hint = hint
