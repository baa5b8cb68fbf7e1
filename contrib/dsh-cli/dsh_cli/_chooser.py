"""The chooser an ``ask_user`` question opens in ``dsh chat``'s live area, like the approval modal.

The arrow keys move between the options and Enter answers with the highlighted one; a
multi-select question ticks options with Space (Enter with none ticked takes the highlighted one).
Typed text answers too, as ``dsh run`` reads it (``parse_reply``: a number, ``1,3``, an option's
text, or the user's own words): free text is always allowed, and it is the only way to answer a
question without options. No single key answers by itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from ._questions import parse_reply
from ._render import wrap_exact
from ._sanitize import clean, clean_line

if TYPE_CHECKING:
    from prompt_toolkit.formatted_text import StyleAndTextTuples

__all__ = ["Chooser"]

_DIM = "fg:ansibrightblack"


class Chooser:
    """One question on screen, waiting for its answer: ``selected`` is the highlighted option."""

    def __init__(self, question: Mapping[str, Any]) -> None:
        self.question = question
        self.text = clean(str(question.get("question", "")))
        #: the options as the answer names them (shown cleaned)
        self.options = [str(option) for option in question.get("options") or ()]
        self.many = bool(question.get("multi_select")) and bool(self.options)
        self.selected = 0
        self.ticked: set[int] = set()
        self.answered = anyio.Event()
        self.result: str | list[str] = ""
        #: a hint shown under the options (Enter on an empty line of a question without options)
        self.hint = ""

    def move(self, step: int) -> None:
        if self.options:
            self.selected = (self.selected + step) % len(self.options)

    def tick(self) -> None:
        """Space in a multi-select question: tick or untick the highlighted option."""
        if self.many:
            self.ticked ^= {self.selected}

    def confirm(self, typed: str) -> bool:
        """Enter: ``typed`` text is the answer if any, else the highlighted (or ticked) options.

        ``False`` when there is nothing to answer with yet (no options, nothing typed).
        """
        if typed.strip():
            self.result = parse_reply(self.question, typed)
        elif not self.options:
            self.hint = "type your answer, then Enter"
            return False
        elif self.many:
            self.result = [self.options[index] for index in sorted(self.ticked or {self.selected})]
        else:
            self.result = self.options[self.selected]
        self.answered.set()
        return True

    def lines(self, width: int) -> StyleAndTextTuples:
        """The question, its options (the highlighted one reversed) and the keys, for the live area."""
        parts: StyleAndTextTuples = []
        for index, line in enumerate(wrap_exact(self.text, width - 2)):
            parts += [("bold fg:ansiyellow", "? " if index == 0 else "  "), ("bold", line), ("", "\n")]
        if self.many:
            parts += [(_DIM, "  (more than one may be chosen)"), ("", "\n")]
        for index, option in enumerate(self.options):
            box = ("[x] " if index in self.ticked else "[ ] ") if self.many else ""
            label = f"{box}{index + 1}. {clean_line(option)}"
            if index == self.selected:
                parts += [("reverse bold", f" > {label} "), ("", "\n")]
            else:
                parts += [("", f"   {label}"), ("", "\n")]
        if not self.options:
            keys = "  type your answer, then Enter"
        elif self.many:
            keys = "  ↑/↓ move, space ticks, Enter answers · or type numbers (1,3) or your own answer"
        else:
            keys = "  ↑/↓ choose, Enter answers · or type a number or your own answer"
        parts += [(_DIM, keys), ("", "\n")]
        if self.hint:
            parts += [("fg:ansiyellow", f"  {self.hint}"), ("", "\n")]
        return parts
