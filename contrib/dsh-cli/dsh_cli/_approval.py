"""The ``approval`` service of the ``dsh`` command: ask a human once, always (for this session) or deny.

``SessionApproval`` is the service the tool runtime calls for an ``Ask`` decision. It remembers the
"always" answers per session and tool name, and asks a ``Prompter`` for the rest: the chat screen
(``_chat``), a plain terminal question on stderr (``TerminalPrompter``, for ``dsh run`` at a
terminal), or nobody (``RefusingPrompter``, when stdin is not a terminal: the call is denied and
the user is told how to allow it).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING, Literal, Protocol, TextIO, TypeAlias

from ._render import describe_call

if TYPE_CHECKING:
    from dsh_core import ToolExecution

__all__ = [
    "Approver",
    "Choice",
    "Prompter",
    "RefusingPrompter",
    "SessionApproval",
    "TerminalPrompter",
    "parse_choice",
]

#: A human's answer: allow this call, allow this tool for the rest of the session, or deny.
Choice: TypeAlias = Literal["once", "always", "deny"]


class Approver(Protocol):
    """What the tool runtime calls as ``ctx.approval`` (``dsh_core``'s ``ApprovalService``)."""

    async def approve(self, execution: ToolExecution, reason: str) -> bool: ...


class Prompter(Protocol):
    """Asks a human about one call; cancellation (the turn was cancelled) propagates."""

    async def ask(self, execution: ToolExecution, reason: str) -> Choice: ...


def parse_choice(answer: str) -> Choice | None:
    """``y``/``o``/``yes``/``once`` -> once, ``a``/``always`` -> always, ``n``/``d``/``no``/``deny`` -> deny."""
    word = answer.strip().lower()
    if word in {"y", "o", "yes", "once"}:
        return "once"
    if word in {"a", "always"}:
        return "always"
    if word in {"n", "d", "no", "deny"}:
        return "deny"
    return None


class SessionApproval:
    """``ctx.approval``: remembers "always" per (session, tool) and asks ``prompter`` for the rest."""

    def __init__(self, prompter: Prompter) -> None:
        self.prompter = prompter
        self._always: set[tuple[str, str]] = set()

    def allowed_always(self, execution: ToolExecution) -> bool:
        """Whether the user already said "always" for this tool in this session."""
        return self._key(execution) in self._always

    async def approve(self, execution: ToolExecution, reason: str) -> bool:
        """Ask (unless "always" was answered before); ``True`` allows the call."""
        if self.allowed_always(execution):
            return True
        choice = await self.prompter.ask(execution, reason)
        if choice == "always":
            self._always.add(self._key(execution))
        return choice != "deny"

    @staticmethod
    def _key(execution: ToolExecution) -> tuple[str, str]:
        return (execution.session_id or execution.agent_id or "", execution.name)


class RefusingPrompter:
    """Nobody can answer: deny, and say on ``stream`` how to allow such calls without asking."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    async def ask(self, execution: ToolExecution, reason: str) -> Choice:
        stream = self._stream or sys.stderr
        stream.write(
            f"dsh: denied {describe_call(execution.name, execution.arguments)}: {reason} "
            "(no terminal to ask on; allow it with --mode or a [plugins.permissions] rule)\n"
        )
        stream.flush()
        return "deny"


class TerminalPrompter:
    """Asks on stderr and reads the answer from stdin (a terminal), without blocking the event loop.

    The answer is read with ``loop.add_reader`` rather than in a thread, so a cancelled question
    (Ctrl-C cancels the turn) leaves no thread behind waiting for a line.
    """

    def __init__(self, stdin: TextIO | None = None, stream: TextIO | None = None) -> None:
        self._stdin = stdin
        self._stream = stream

    async def ask(self, execution: ToolExecution, reason: str) -> Choice:
        stream = self._stream or sys.stderr
        question = (
            f"? {describe_call(execution.name, execution.arguments)} — {reason}\n"
            "  allow [y] once, [a] always for this session, [n] deny: "
        )
        while True:
            stream.write(question)
            stream.flush()
            line = await self._read_line()
            if line is None:
                stream.write("\n")
                return "deny"
            choice = parse_choice(line or "n")
            if choice is not None:
                return choice
            question = "  please answer y, a or n: "

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
