"""What ``dsh`` prints on stdout for data: a console sized for a terminal or for a pipe, and JSON lines.

Piped output is not cut to a terminal width (rich assumes 80 columns without a terminal), and a
closed pipe (``dsh sessions list | head``) ends the command quietly (``_main``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Final, TextIO

from rich.console import Console

__all__ = ["PIPE_WIDTH", "json_line", "output_console", "silence_stdout"]

#: the width of a table printed to a pipe: wide enough that no line is cut
PIPE_WIDTH: Final = 100_000

_C1: Final = re.compile("[\x80-\x9f\u2028\u2029]")


class _OutputConsole(Console):
    """A console whose closed pipe raises ``BrokenPipeError`` (``dsh`` exits 141) instead of rich's silent exit 1."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        silence_stdout()
        raise BrokenPipeError


def output_console(file: TextIO | None = None) -> Console:
    """A rich console on ``file`` (stdout): the terminal's width, or no limit when it is a pipe."""
    stream = file or sys.stdout
    terminal = stream.isatty()
    return _OutputConsole(
        file=stream,
        highlight=False,
        width=None if terminal else PIPE_WIDTH,
        soft_wrap=not terminal,
    )


def json_line(value: Any) -> str:
    """``value`` as one line of JSON, every control character escaped (C1 ones too, which JSON allows raw)."""
    text = json.dumps(value, ensure_ascii=False)
    return _C1.sub(lambda match: f"\\u{ord(match.group()):04x}", text) + "\n"


def silence_stdout() -> None:
    """Point stdout at ``/dev/null``: its reader is gone, and Python's flush at exit must not fail loudly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout: nothing to silence
        pass
