"""The ``question`` service of the ``dsh`` command: the questions of ``ask_user`` put to the human.

One answerer among several (a page, the API) racing for the first ``question/answered`` (SPEC
§10.6). ``ChatQuestions`` opens a chooser per question in ``dsh chat`` (``_chooser``: arrows and
Enter, like an approval); ``TerminalQuestions`` asks on stderr and reads stdin (``dsh run`` at a terminal);
``NobodyToAsk`` answers ``None``: nobody can be asked (``dsh run`` without a terminal), and the
model is told so at once.

A typed answer is a number (``2``), several for a multi-select question (``1,3``), an option's
text, or any other text, which is the answer as typed.
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
    """In ``dsh chat``: each question in a chooser in the live area; the answers, or who answered instead."""

    question_by = "cli"

    def __init__(self, screen: ChatScreen) -> None:
        self._screen = screen

    async def ask(self, execution: ToolExecution, question: PendingQuestion) -> Mapping[str, Any] | None:
        answers: dict[str, Any] = {}
        for item in question.questions:
            try:
                answer = await self._screen.choose(item)
            except anyio.get_cancelled_exc_class():
                self._closed(execution)
                raise
            answers[str(item["id"])] = answer
            shown = ", ".join(answer) if isinstance(answer, list) else answer
            self._screen.print(
                Text.assemble(
                    (f"  ? {clean_line(str(item.get('question', '')))}", "dim"), (f"  ↳ {clean_line(shown)}", "green")
                )
            )
        return answers

    def _closed(self, execution: ToolExecution) -> None:
        """The chooser closed without our answer: say who answered instead (a page, the API), if anyone did."""
        from dsh_core.services.questions import question_log

        ctx = execution.ctx
        session = ctx.sessions.get(execution.session_id) if ctx is not None and execution.session_id else None
        answered = None if session is None else question_log(session).answer_of(execution.call_id)
        if answered is None or answered.by == self.question_by:
            return
        if answered.by == "cancel":
            self._screen.print(Text("  ? the question was cancelled", style="yellow"))
            return
        self._screen.print(Text(f"  ? answered by {clean_line(answered.by)}", style="green"))
