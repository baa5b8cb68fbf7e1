"""The ``question`` service of the ``dsh`` command: the questions of ``ask_user`` put to the human.

One answerer among several (a page, the API) racing for the first ``question/answered`` (SPEC
§10.6). ``ChatQuestions`` prints the questions in ``dsh chat`` and takes the next line typed as
the answer; ``TerminalQuestions`` asks on stderr and reads stdin (``dsh run`` at a terminal);
``NobodyToAsk`` answers ``None``: nobody can be asked (``dsh run`` without a terminal), and the
model is told so at once.

An answer is a number (``2``), several for a multi-select question (``1,3``), an option's text,
or any other text, which is the answer as typed.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import anyio
from rich.text import Text

from ._approval import TerminalPrompter
from ._sanitize import clean_line

if TYPE_CHECKING:
    from dsh_core import PendingQuestion, ToolExecution

    from ._screen import ChatScreen

__all__ = ["ChatQuestions", "NobodyToAsk", "TerminalQuestions", "parse_reply", "question_lines"]

_HINT = "answer with a number, several for more than one (1,3), or type your own answer"


def question_lines(question: Mapping[str, Any]) -> list[str]:
    """A question as lines: the question, then its numbered options."""
    lines = [f"? {clean_line(str(question.get('question', '')))}"]
    options = question.get("options") or ()
    for number, option in enumerate(options, 1):
        lines.append(f"  {number}. {clean_line(str(option))}")
    if question.get("multi_select"):
        lines.append("  (more than one may be chosen)")
    return lines


def parse_reply(question: Mapping[str, Any], line: str) -> str | list[str]:
    """The answer a typed line gives: options by number or text, else the text itself."""
    text = line.strip()
    options: Sequence[str] = [str(option) for option in question.get("options") or ()]
    many = bool(question.get("multi_select"))
    chosen: list[str] = []
    for part in (piece.strip() for piece in text.split(",")) if options else ():
        if part.isdigit() and 1 <= int(part) <= len(options):
            chosen.append(options[int(part) - 1])
        else:
            match = next((option for option in options if option.lower() == part.lower()), None)
            if match is None:
                chosen = []
                break
            chosen.append(match)
    if chosen and (many or len(chosen) == 1):
        return chosen if many else chosen[0]
    return [text] if many else text


class NobodyToAsk:
    """No terminal, no page: nobody can be asked."""

    question_by = "cli"

    async def ask(self, execution: ToolExecution, question: PendingQuestion) -> Mapping[str, Any] | None:
        return None


class TerminalQuestions:
    """Asks on stderr and reads each answer from stdin (``dsh run`` at a terminal)."""

    question_by = "cli"

    def __init__(self, stdin: TextIO | None = None, stream: TextIO | None = None) -> None:
        self._reader = TerminalPrompter(stdin, stream)
        self._stream = stream

    async def ask(self, execution: ToolExecution, question: PendingQuestion) -> Mapping[str, Any] | None:
        stream = self._stream or sys.stderr
        answers: dict[str, Any] = {}
        for item in question.questions:
            stream.write("\n".join(question_lines(item)) + f"\n  ({_HINT}), then Enter: ")
            stream.flush()
            line = await self._reader._read_line()  # the approval prompter's reader: no thread left behind
            if line is None:
                return None
            answers[str(item["id"])] = parse_reply(item, line)
        return answers


class ChatQuestions:
    """In ``dsh chat``: prints each question and takes the next line typed as its answer."""

    question_by = "cli"

    def __init__(self, screen: ChatScreen) -> None:
        self._screen = screen
        self._waiting: tuple[anyio.Event, list[str]] | None = None

    def offer(self, line: str) -> bool:
        """Take ``line`` as the answer to the open question; ``False`` when none is open."""
        if self._waiting is None:
            return False
        done, box = self._waiting
        box.append(line)
        done.set()
        return True

    async def ask(self, execution: ToolExecution, question: PendingQuestion) -> Mapping[str, Any] | None:
        answers: dict[str, Any] = {}
        for item in question.questions:
            self._screen.end_stream()
            for number, line in enumerate(question_lines(item)):
                self._screen.print(Text(line, style="bold yellow" if number == 0 else ""))
            self._screen.print(Text(f"  ({_HINT}, then Enter)", style="dim"))
            done, box = anyio.Event(), list[str]()
            self._waiting = (done, box)
            try:
                await done.wait()
            finally:
                self._waiting = None
            answers[str(item["id"])] = parse_reply(item, box[0])
            self._screen.print(Text(f"  ↳ {answers[str(item['id'])]}", style="dim"))
        return answers
