"""Text from outside dsh (model output, tool output, stored logs, file names) made safe to print on a terminal.

A tool printing ``\\033]0;TITLE\\007`` must not retitle the terminal, and ``\\033[31m`` from a model
must not colour what follows: only dsh itself writes control sequences. Escape sequences (CSI, OSC,
DCS and the other string sequences, two-character escapes) are removed whole; any other control
character but newline and tab is shown as its Unicode control picture (``\\a`` -> ``␇``), so nothing
is lost silently. A carriage return ending a line (``\\r\\n``) becomes a newline; a lone one, which
would overwrite the line, is shown as ``␍``.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["clean", "clean_line"]

_ESCAPES: Final = re.compile(
    r"""
    (?: \x1b\[ | \x9b ) [\x30-\x3f]* [\x20-\x2f]* [\x40-\x7e]?     # CSI ... final byte
  | (?: \x1b[\]PX^_] | [\x90\x98\x9d\x9e\x9f] ) .*? (?: \x07 | \x1b\\ | \x9c | $ )  # OSC, DCS, SOS, PM, APC
  | \x1b [\x20-\x2f]* [\x30-\x7e]?                                   # two-character and nF escapes
    """,
    re.VERBOSE | re.DOTALL,
)
_CONTROLS: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    return "\ufffd"  # a C1 control: no picture exists


def clean(text: str) -> str:
    """``text`` without terminal escape sequences, its other control characters made visible."""
    if text.isprintable():  # the common case: nothing to do (newlines and tabs are not printable)
        return text
    text = _ESCAPES.sub("", text.replace("\r\n", "\n"))
    return _CONTROLS.sub(_picture, text)


def clean_line(text: str) -> str:
    """``clean`` for one-line contexts: newlines and tabs become spaces too."""
    return clean(text).replace("\n", " ").replace("\t", " ")
