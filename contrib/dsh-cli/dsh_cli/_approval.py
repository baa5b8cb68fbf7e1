"""The ``approval`` service of the ``dsh`` command: ask a human once, always (for this session) or deny.

``SessionApproval`` is the service the tool runtime calls for a call waiting for approval (SPEC
§10.1): one answerer among several (a server, a policy, the API) racing for the first
``approval/resolved``. It asks a ``Prompter``: the chat screen (``_chat``), a plain terminal
question on stderr (``TerminalPrompter``, for ``dsh run`` at a terminal), or nobody
(``RefusingPrompter``, when stdin is not a terminal: the call is denied and the user is told how to
allow it). When another answerer wins, the question is cancelled and closes saying who answered
(``Prompter.closed``). "Always" is remembered by the log (the tool runtime reads it), not here.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Literal, Protocol, TextIO, TypeAlias

import attrs

from ._render import describe_call
from ._sanitize import clean_line

if TYPE_CHECKING:
    from dsh_core import ApprovalAnswer, Deny, ToolExecution
    from dsh_core.session_log import ApprovalResolvedEvent

__all__ = [
    "CHOICES",
    "Answer",
    "Approver",
    "Choice",
    "Prompter",
    "RefusingPrompter",
    "SessionApproval",
    "TerminalPrompter",
    "closing_words",
    "parse_answer",
    "parse_choice",
]

#: A human's answer: allow this call, allow this tool for the rest of the session, or deny.
Choice: TypeAlias = Literal["once", "always", "deny"]

#: The answers in the order a question shows them.
CHOICES: Final[tuple[Choice, ...]] = ("once", "always", "deny")

_WORDS: Final[Mapping[str, Choice]] = {
    "y": "once",
    "yes": "once",
    "o": "once",
    "once": "once",
    "allow": "once",
    "a": "always",
    "always": "always",
    "n": "deny",
    "no": "deny",
    "d": "deny",
    "deny": "deny",
}


#: ``no`` or ``deny``, then a reason (``no, run the tests first``)
_DENIAL: Final = re.compile(r"(?:no|deny)\b[\s,:;.!-]*(\S.*)", re.IGNORECASE | re.DOTALL)


@attrs.frozen
class Answer:
    """What a prompter got: the choice, the reason a denial gives the model, and whether anyone was asked."""

    choice: Choice
    #: the user's words after ``deny``/``no`` (``no, run the tests first``): told to the model
    reason: str = ""
    #: ``False`` when nobody could be asked (no terminal): the model is told so, not "the user rejected"
    asked: bool = True


class Approver(Protocol):
    """What the tool runtime calls as ``ctx.approval`` (``dsh_core``'s ``ApprovalService``)."""

    async def approve(self, execution: ToolExecution, reason: str) -> bool | Deny | ApprovalAnswer: ...


class Prompter(Protocol):
    """Asks a human about one call; cancellation (the turn was cancelled, or another answerer won) propagates.

    A prompter may also have ``closed(execution, resolved)``: called when its question was
    cancelled because someone else answered (``resolved`` is that ``approval/resolved``), to say so.
    """

    async def ask(self, execution: ToolExecution, reason: str) -> Answer: ...


def parse_choice(answer: str) -> Choice | None:
    """A whole answer word: ``y``/``yes``/``once`` -> once, ``a``/``always`` -> always, ``n``/``no``/``deny`` -> deny."""
    return _WORDS.get(answer.strip().lower())


def parse_answer(line: str) -> Answer | None:
    """A typed answer: a choice word, or ``deny``/``no`` followed by a reason for the model; else ``None``.

    ``no, run the tests first`` and ``deny: use pytest -x`` deny with that reason; ``yes please``
    is no answer (only a denial carries words).
    """
    text = line.strip()
    choice = parse_choice(text)
    if choice is not None:
        return Answer(choice)
    denial = _DENIAL.match(text)
    if denial is not None:
        return Answer("deny", reason=denial.group(1).strip())
    return None


class SessionApproval:
    """``ctx.approval``: asks ``prompter``, and closes its question when another answerer wins."""

    #: the ``by`` of the ``approval/resolved`` records its answers become
    approval_by = "cli"

    def __init__(self, prompter: Prompter) -> None:
        self.prompter = prompter

    async def approve(self, execution: ToolExecution, reason: str) -> Deny | ApprovalAnswer:
        """Ask; the answer as the tool runtime logs it (a ``Deny`` when nobody could be asked)."""
        from dsh_core import ApprovalAnswer, Deny

        try:
            answer = await self.prompter.ask(execution, reason)
        except BaseException:
            resolved = _resolution_of(execution)
            closed = getattr(self.prompter, "closed", None)
            if resolved is not None and resolved.by != self.approval_by and closed is not None:
                closed(execution, resolved)
            raise
        if not answer.asked:
            return Deny(
                f"not run: it needs approval ({reason}) and nobody could be asked (dsh runs without a "
                "terminal); do not retry it, say what you would run instead"
            )
        return ApprovalAnswer(answer.choice, reason=answer.reason or None)


def _resolution_of(execution: ToolExecution) -> ApprovalResolvedEvent | None:
    """The ``approval/resolved`` of ``execution``'s call, if someone logged one."""
    from dsh_core.services.approvals import ApprovalBook

    ctx = execution.ctx
    session = ctx.sessions.get(execution.session_id) if ctx is not None and execution.session_id else None
    return None if session is None else ApprovalBook.of(session).log.answer_of(execution.call_id)


def closing_words(resolved: ApprovalResolvedEvent) -> str:
    """``answered by serve: allowed once`` — what a closed question says."""
    words = {"once": "allowed once", "always": "allowed for this session", "deny": "denied", "cancelled": "cancelled"}
    said = f" ({resolved.reason})" if resolved.reason else ""
    return f"answered by {resolved.by}: {words.get(resolved.decision, resolved.decision)}{said}"


class RefusingPrompter:
    """Nobody can answer: deny, and say on ``stream`` how to allow such calls without asking."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    async def ask(self, execution: ToolExecution, reason: str) -> Answer:
        stream = self._stream or sys.stderr
        # Only an `ask` rule asks (no mode does), so --mode cannot help: the rule is the way out.
        stream.write(
            f"dsh: denied {describe_call(execution.name, execution.arguments)}: {reason} "
            "(no terminal to ask on; an ask rule in [plugins.permissions] covers this call: make it "
            'action = "allow" to run such calls unasked, or run dsh at a terminal)\n'
        )
        stream.flush()
        return Answer("deny", asked=False)


class TerminalPrompter:
    """Asks on stderr and reads the answer from stdin (a terminal), without blocking the event loop.

    The answer is read with ``loop.add_reader`` rather than in a thread, so a cancelled question
    (Ctrl-C cancels the turn) leaves no thread behind waiting for a line.
    """

    def __init__(self, stdin: TextIO | None = None, stream: TextIO | None = None) -> None:
        self._stdin = stdin
        self._stream = stream

    async def ask(self, execution: ToolExecution, reason: str) -> Answer:
        stream = self._stream or sys.stderr
        question = (
            f"? {describe_call(execution.name, execution.arguments)} — {clean_line(reason)}\n"
            "  allow? yes (once) / always (this session) / no (deny; a reason may follow: no, use X), then Enter: "
        )
        while True:
            stream.write(question)
            stream.flush()
            line = await self._read_line()
            if line is None:
                stream.write("\n")
                return Answer("deny")
            answer = parse_answer(line or "no")
            if answer is not None:
                return answer
            question = "  please answer yes, always or no (then Enter): "

    def closed(self, execution: ToolExecution, resolved: ApprovalResolvedEvent) -> None:
        """Another answerer won: end the question's line, saying who answered."""
        stream = self._stream or sys.stderr
        stream.write(f"\n  {closing_words(resolved)}\n")
        stream.flush()

    async def _read_line(self) -> str | None:
        """One line from stdin; ``None`` at end of input."""
        fd = (self._stdin or sys.stdin).fileno()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str | None] = loop.create_future()
        pending = bytearray()

        def readable() -> None:
            data = os.read(fd, 1024)
            if not data:
                if not done.done():
                    done.set_result(pending.decode(errors="replace") or None)
                return
            pending.extend(data)
            if b"\n" in pending and not done.done():
                done.set_result(pending.split(b"\n", 1)[0].decode(errors="replace"))

        loop.add_reader(fd, readable)
        try:
            return await done
        finally:
            loop.remove_reader(fd)
