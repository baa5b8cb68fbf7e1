"""Markdown rendered as it streams: the answer is cut into finished blocks, each rendered once with rich.

A block is finished when a blank line ends it (a paragraph, a list), when its line is a heading,
when its closing fence ends a code block, or — a list item — when the next item starts (so a list
is shown rendered item by item as it streams, not raw until it ends); until then it is *pending*, shown as it arrives in
the live area. A block is never re-rendered once printed, so what scrolls up is final, and a code
block is highlighted only when it is whole. ``flush`` ends the last block (the message is complete).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from rich.console import RenderableType

__all__ = ["ListItem", "MarkdownBlocks", "render_block"]

_FENCE: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING: Final = re.compile(r"^ {0,3}#{1,6}(\s|$)")
#: a list item at the left margin (a nested one is indented, and belongs to its parent item)
_ITEM: Final = re.compile(r"^(?:[-*+]|\d{1,9}[.)])[ \t]")


class ListItem(str):
    """A finished list item; ``continues`` when it follows an item of the same list (printed with no blank line)."""

    continues: bool = False

#: the syntax-highlighting theme of code blocks
CODE_THEME: Final = "monokai"


def render_block(block: str) -> RenderableType:
    """One finished block as a rich renderable (links shown as text: a terminal may not follow them).

    rich's Markdown (markdown-it, pygments) is imported here, on first use: a piped ``dsh run``
    never renders, and never pays for it.
    """
    from rich.markdown import Markdown

    return Markdown(block, code_theme=CODE_THEME, hyperlinks=False)


class MarkdownBlocks:
    """Cuts streamed Markdown text into finished blocks; what is not finished yet is ``pending``."""

    def __init__(self) -> None:
        self._lines: list[str] = []  # complete lines of the open block
        self._tail = ""  # the line still streaming
        self._fence: str | None = None  # the marker of the open code block
        #: blocks returned so far (a blank line goes between two blocks)
        self.count = 0
        self._in_list = False  # the last block returned was a list item

    @property
    def pending(self) -> str:
        """The open block as it stands: its complete lines and the line still streaming."""
        return "".join(self._lines) + self._tail

    def feed(self, text: str) -> list[str]:
        """Take more text; returns the blocks it finished, in order."""
        finished: list[str] = []
        self._tail += text
        while "\n" in self._tail:
            line, _, self._tail = self._tail.partition("\n")
            finished += self._line(line + "\n")
        if self._fence is None and _ITEM.match(self._tail) and self._lines and _ITEM.match(self._lines[0]):
            finished += self._close()  # the next item has begun: the one before it is whole
        return finished

    def flush(self) -> list[str]:
        """The message is complete: the open block (if any) is finished."""
        if self._tail:
            self._lines.append(self._tail)
            self._tail = ""
        self._fence = None
        return self._close()

    def _line(self, line: str) -> list[str]:
        if self._fence is not None:
            self._lines.append(line)
            if line.strip().startswith(self._fence) and not line.strip().strip(self._fence[0]):
                self._fence = None
                return self._close()
            return []
        opening = _FENCE.match(line)
        if opening is not None:
            finished = self._close()
            self._fence = opening.group(1)
            self._lines.append(line)
            return finished
        if not line.strip():
            return self._close()
        if _ITEM.match(line) and self._lines and _ITEM.match(self._lines[0]):
            finished = self._close()  # the item before this one is whole
            self._lines.append(line)
            return finished
        if _HEADING.match(line):
            finished = self._close()
            self._lines.append(line)
            return finished + self._close()
        self._lines.append(line)
        return []

    def _close(self) -> list[str]:
        block = "".join(self._lines).strip("\n")
        self._lines = []
        previous_item, self._in_list = self._in_list, False
        if not block.strip():
            return []
        self.count += 1
        if _ITEM.match(block):
            item = ListItem(block)
            item.continues = previous_item
            self._in_list = True
            return [item]
        return [block]
