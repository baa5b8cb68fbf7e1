"""The terminal of ``dsh chat``: finished output scrolls above, a live area and the input line stay below.

Finished lines (prompts, answers, tool summaries) are printed with rich through prompt_toolkit's
``patch_stdout``, so they scroll up above the prompt. The prompt's message is the live area, redrawn
ten times a second while a turn runs: the line of answer still streaming, an approval question, and
a spinner with the elapsed time and token usage. Typing goes on meanwhile: a line entered while the
agent works steers it.

Keys: Enter submits; Alt-Enter or Ctrl-J inserts a newline; Tab completes slash commands and
``@`` paths; Esc, like Ctrl-C, denies an open question or cancels a running turn (idle, Esc does
nothing); Ctrl-C answers "deny" to a question,
else cancels a running turn, else clears the line, else (twice in a row on an empty prompt) exits;
Ctrl-D on an empty prompt exits. Between two input lines (a line just entered is being handled) the
terminal is not in raw mode and Ctrl-C arrives as SIGINT: ``interrupts`` routes it to the same
logic, so it cancels the turn there too instead of raising ``KeyboardInterrupt`` at a random point. An approval question is modal and explicit: the arrow keys choose
once / always / deny and Enter confirms, or a typed word (``yes``, ``always``, ``no``, and after
``no`` a reason the model is told) and Enter; no single key answers by itself. The question of an
``ask_user`` call opens a chooser the same way (``_chooser``): arrows and Enter, Space to tick in a
multi-select question, or typed text.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app_or_none
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import Completer
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from rich.console import Console, RenderableType
from rich.text import Text

from ._approval import CHOICES, Answer, closing_words, parse_answer
from ._chooser import Chooser
from ._markdown import render_block
from ._render import PROMPT_MARK, describe_call, format_tokens, question_lines
from ._sanitize import clean_line

if TYPE_CHECKING:
    from dsh_core import ToolExecution
    from dsh_core.session_log import ApprovalResolvedEvent

__all__ = ["ChatScreen", "history_path"]

_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
#: lines of an unfinished Markdown block shown in the live area
_PENDING_LINES = 8
_CHOICE_LABELS = {"once": "once", "always": "always (this session)", "deny": "deny"}
_DIM = "fg:ansibrightblack"


def history_path(environ: dict[str, str] | os._Environ[str]) -> Path:
    """``$XDG_STATE_HOME/dsh/history`` (``~/.local/state/dsh/history``): the prompts typed in ``dsh chat``."""
    base = environ.get("XDG_STATE_HOME", "")
    if not base or not os.path.isabs(base):
        base = os.path.join(environ.get("HOME") or str(Path.home()), ".local", "state")
    return Path(base) / "dsh" / "history"


class _Question:
    """An approval question on screen, waiting for its answer; ``selected`` is the highlighted choice."""

    def __init__(self, call: str, reason: str, asked: tuple[str, str, str]) -> None:
        self.call = call
        self.reason = reason
        #: the tool's name, its arguments and the raw reason: the question shows them whole
        self.asked = asked
        self.answered = anyio.Event()
        self.result = Answer("deny")
        self.selected = 0
        #: a hint shown under the choices (a typed line that is no answer)
        self.hint = ""

    def answer(self, answer: Answer) -> None:
        if not self.answered.is_set():
            self.result = answer
            self.answered.set()

    def move(self, step: int) -> None:
        self.selected = (self.selected + step) % len(CHOICES)


class ChatScreen:
    """Input, live area and output of ``dsh chat``; ``on_cancel`` is called when Ctrl-C should stop the turn."""

    def __init__(
        self,
        *,
        on_cancel: Callable[[], None],
        toolbar: Callable[[], str],
        history: History | None = None,
        completer: Completer | None = None,
    ) -> None:
        self.console = Console(force_terminal=True, highlight=False)
        self._on_cancel = on_cancel
        self._toolbar = toolbar
        self._partial = ""
        self._partial_style = ""
        self._pending_markdown = False
        self._thinking = 0  # characters of collapsed reasoning streamed in the open block
        self._running_since: float | None = None
        self._tokens = [0, 0]
        #: characters of answer streamed since the last usage report: the live estimate of output tokens
        self._streamed = 0
        self._activity = ""
        self._hint = ""
        self._armed = False  # one Ctrl-C on an empty, idle prompt: the next one exits
        self._question: _Question | None = None
        self._chooser: Chooser | None = None  # an ask_user question waiting for its answer
        self._next_input = ""  # put back while no input line was open: the next one starts with it
        #: lines shown above the live area, e.g. the todo checklist (``_todo_list``)
        self.above: Callable[[], StyleAndTextTuples] = list
        self._session: PromptSession[str] = PromptSession(
            message=self._message,
            key_bindings=self._bindings(),
            erase_when_done=True,
            history=history or InMemoryHistory(),
            bottom_toolbar=self._bottom,
            completer=completer,
            complete_while_typing=False,
        )
        self._session.default_buffer.on_text_changed += self._disarm

    # ------------------------------------------------------------------ state the controller sets

    @property
    def running(self) -> bool:
        return self._running_since is not None

    def turn_started(self) -> None:
        if self._running_since is None:
            self._running_since = time.monotonic()
            self._tokens = [0, 0]
            self._streamed = 0
        self._hint = ""
        self._armed = False
        self.refresh()

    def turn_finished(self) -> None:
        self._running_since = None
        self._activity = ""
        self.refresh()

    def add_tokens(self, input_tokens: int, output_tokens: int) -> None:
        self._tokens[0] += input_tokens
        self._tokens[1] += output_tokens
        self._streamed = 0  # the request's real count replaces the estimate

    def count_streamed(self, characters: int) -> None:
        """Answer or reasoning text arrived: the spinner's output tokens grow with it (about 4 characters a token)."""
        self._streamed += characters

    @property
    def tokens(self) -> tuple[int, int]:
        return (self._tokens[0], self._tokens[1])

    @property
    def elapsed(self) -> float | None:
        return None if self._running_since is None else time.monotonic() - self._running_since

    def set_activity(self, text: str) -> None:
        self._activity = text
        self.refresh()

    def set_hint(self, text: str) -> None:
        self._hint = text
        self.refresh()

    # ------------------------------------------------------------------ output

    def print(self, renderable: RenderableType = "") -> None:
        """Print a finished line above the live area (the streaming line is finished first)."""
        self.end_stream()
        self.console.print(renderable)

    def markdown(self, block: str, *, first: bool) -> None:
        """Print one finished Markdown block of the answer (a blank line before all but the first)."""
        if not first and not getattr(block, "continues", False):
            self.console.print()
        self.console.print(render_block(block))

    def set_pending(self, text: str) -> None:
        """The answer's unfinished Markdown block, shown as it arrives in the live area (its last lines)."""
        self._partial = (
            "\n".join(text.splitlines()[-_PENDING_LINES:]) if text.count("\n") >= _PENDING_LINES else text
        )
        self._partial_style = ""
        self._pending_markdown = bool(text)
        self.refresh()

    def note(self, renderable: RenderableType) -> None:
        """Print a line above the live area without finishing the streaming line (no word is split)."""
        self.console.print(renderable)

    def stream(self, text: str, style: str = "") -> None:
        """Add streamed text: whole lines are printed, the rest stays in the live area."""
        if style != self._partial_style and self._partial:
            self.end_stream()
        self._partial_style = style
        self._partial += text
        if "\n" in self._partial:
            done, _, self._partial = self._partial.rpartition("\n")
            self.console.print(Text(done, style=style or ""))
        self.refresh()

    def end_stream(self) -> None:
        """Print the streaming line, if any, as a finished line (pending Markdown is the controller's)."""
        if self._pending_markdown:
            self._partial = ""
            self._pending_markdown = False
        if self._partial:
            partial, self._partial = self._partial, ""
            self.console.print(Text(partial, style=self._partial_style or ""))
        self._thinking = 0

    def thinking(self, characters: int) -> None:
        """Collapsed reasoning is streaming: count it in the live area instead of showing it."""
        self._thinking += characters
        self.refresh()

    async def animate(self) -> None:
        """Redraw the live area ten times a second while a turn runs (the spinner and the clock)."""
        while True:
            await anyio.sleep(0.1)
            if self._running_since is not None:
                self.refresh()

    def refresh(self) -> None:
        app = get_app_or_none()
        if app is not None and app.is_running:
            app.invalidate()

    # ------------------------------------------------------------------ input

    async def read(self) -> str | None:
        """The next line typed; ``None`` when the user exits (Ctrl-D, or Ctrl-C twice)."""
        text, self._next_input = self._next_input, ""
        try:
            return await self._session.prompt_async(default=Document(text, len(text)))
        except EOFError:
            return None

    def interrupt(self, buffer: Buffer | None = None) -> bool:
        """Ctrl-C, pressed in the input line (``buffer``) or between two of them (SIGINT).

        Denies the open question and cancels the turn, else cancels the running turn, else clears
        the line being typed, else arms the exit ("press Ctrl-C again"). Returns ``True`` when the
        exit was armed already: the caller ends the chat.
        """
        if self._question is not None:
            self._question.answer(Answer("deny"))
            self._on_cancel()
        elif self._running_since is not None:
            self._on_cancel()
        elif buffer is not None and buffer.text:
            buffer.reset()
        elif self._armed:
            return True
        else:
            self._armed = True
            self._hint = "press Ctrl-C again to exit"
        self.refresh()
        return False

    @contextmanager
    def interrupts(self, *, stop_command: Callable[[], bool], on_exit: Callable[[], None]) -> Iterator[None]:
        """Within: a SIGINT (Ctrl-C while no input line reads keys) is handled like the key, in the event loop.

        The input line reads Ctrl-C as a key while it is open (raw mode); between two input lines
        the terminal sends SIGINT instead. Then Ctrl-C cancels the running turn, else
        ``stop_command()`` (cancel the line being handled, e.g. ``/compact``; ``False``: none is),
        else arms the exit, and ``on_exit`` runs when it was armed. The handler only schedules that
        in the event loop, so no code is interrupted half-way; the input line puts it back when it
        closes.
        """
        loop = asyncio.get_running_loop()

        def interrupted() -> None:
            if self._question is None and self._running_since is None and stop_command():
                return
            if self.interrupt():
                on_exit()

        def handler(signum: int, frame: object) -> None:
            loop.call_soon_threadsafe(interrupted)

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    async def ask(self, execution: ToolExecution, reason: str) -> Answer:
        """Ask whether a tool call may run; cancellation (Ctrl-C) propagates as cancellation.

        What was being typed is set aside while the question is open, and put back after it.
        """
        question = _Question(
            describe_call(execution.name, execution.arguments),
            clean_line(reason),
            (execution.name, execution.arguments, reason),
        )
        with self._modal():
            self._question = question
            try:
                await question.answered.wait()
            finally:
                self._question = None
        answer = question.result
        label = {"once": "allowed once", "always": "allowed for this session", "deny": "denied"}[
            answer.choice
        ]
        style = "red" if answer.choice == "deny" else "green"
        line = Text.assemble(("  ? ", "dim"), (f"{label}: ", style), (question.call, "dim"))
        if answer.reason:
            line.append(f"  (told the model: {answer.reason})", style="dim")
        self.console.print(line)
        return answer

    async def choose(self, question: Mapping[str, Any]) -> str | list[str]:
        """Ask one question of an ``ask_user`` call in a chooser; its answer (an option, options or text).

        Cancellation (Ctrl-C, or another answerer won) propagates; what was being typed is set
        aside while the chooser is open, and put back after it.
        """
        chooser = Chooser(question)
        with self._modal():
            self._chooser = chooser
            try:
                await chooser.answered.wait()
            finally:
                self._chooser = None
        return chooser.result

    @contextmanager
    def _modal(self) -> Iterator[None]:
        """Within: a question is open in the live area; what was being typed is set aside, and put back after."""
        buffer = self._session.default_buffer
        typed = buffer.document
        buffer.reset()
        self.end_stream()
        self.refresh()
        try:
            yield
        finally:
            buffer.document = typed
            self.refresh()

    def closed(self, execution: ToolExecution, resolved: ApprovalResolvedEvent) -> None:
        """Another answerer won while the question was open (it is gone): say who answered."""
        call = describe_call(execution.name, execution.arguments)
        style = "red" if resolved.decision in ("deny", "cancelled") else "green"
        line = Text.assemble(("  ? ", "dim"), (f"{closing_words(resolved)}: ", style), (call, "dim"))
        self.console.print(line)

    def set_input(self, text: str) -> None:
        """Put ``text`` in the input line (in front of what is there), the cursor at its end.

        Between two input lines the next one starts with it (a new prompt resets the buffer).
        """
        if not self._session.app.is_running:
            self._next_input = "\n".join(part for part in (text, self._next_input) if part)
            return
        buffer = self._session.default_buffer
        joined = "\n".join(part for part in (text, buffer.text) if part)
        buffer.text = joined
        buffer.cursor_position = len(text)
        self.refresh()

    # ------------------------------------------------------------------ prompt_toolkit parts

    def _disarm(self, _: object) -> None:
        if self._armed:
            self._armed = False
            self._hint = ""

    def _message(self) -> StyleAndTextTuples:
        app = get_app_or_none()
        if app is not None and app.is_done:
            return []
        parts: StyleAndTextTuples = list(self.above())
        if self._partial:
            style = "italic fg:ansibrightblack" if self._partial_style else ""
            parts += [(style, self._partial), ("", "\n")]
        if self._thinking:
            parts += [("italic " + _DIM, f"✻ thinking… ({self._thinking} characters)"), ("", "\n")]
        question = self._question
        if question is not None:
            name, arguments, reason = question.asked
            lines = question_lines(name, arguments, reason, self._width(app))
            for index, line in enumerate(lines.call):
                if index == 0:
                    parts += [("bold fg:ansiyellow", "? "), ("bold", f"allow {line}"), ("", "\n")]
                else:
                    parts += [("bold", f"{' ' * 8}{line}"), ("", "\n")]
            for index, line in enumerate(lines.reason):
                parts += [(_DIM, "  why:  " if index == 0 else " " * 8), (_DIM, line), ("", "\n")]
            parts.append(("", "  "))
            for index, choice in enumerate(CHOICES):
                label = _CHOICE_LABELS[choice]
                if index == question.selected:
                    parts += [("reverse bold", f" > {label} "), ("", "  ")]
                else:
                    parts += [("", f"   {label} "), ("", "  ")]
            parts += [
                ("", "\n"),
                (_DIM, "  ←/→ choose, Enter confirms · or type yes / always / no (a reason may follow no)"),
                ("", "\n"),
            ]
            if question.hint:
                parts += [("fg:ansiyellow", f"  {question.hint}"), ("", "\n")]
        chooser = self._chooser
        if chooser is not None:
            parts += chooser.lines(self._width(app))
        if self._running_since is not None:
            elapsed = time.monotonic() - self._running_since
            frame = _SPINNER[int(elapsed * 10) % len(_SPINNER)]
            facts = [self._activity or "working", f"{elapsed:.1f}s"]
            estimate = self._streamed // 4
            if any(self._tokens) or estimate:
                down = format_tokens(self._tokens[1] + estimate)
                facts.append(f"↑{format_tokens(self._tokens[0])} ↓{'~' if estimate else ''}{down} tokens")
            parts += [
                ("fg:ansicyan", f"{frame} "),
                ("", " · ".join(facts)),
                (_DIM, "  (type to steer · esc or ctrl-c cancels)"),
                ("", "\n"),
            ]
        if self._hint:
            parts += [(_DIM, self._hint), ("", "\n")]
        if question is not None or chooser is not None:
            parts.append(("bold fg:ansiyellow", f"answer {PROMPT_MARK}"))
        elif self._running_since is not None:
            parts.append(("fg:ansicyan", "↳ "))
        else:
            parts.append(("bold fg:ansigreen", PROMPT_MARK))
        return parts

    @staticmethod
    def _width(app: Any) -> int:
        """The terminal's columns (the live area is not wrapped by prompt_toolkit: lines are cut to fit)."""
        try:
            return int(app.output.get_size().columns) if app is not None else 80
        except (OSError, ValueError, AttributeError):
            return 80

    def _bottom(self) -> StyleAndTextTuples:
        return [("", f" {self._toolbar()} ")]

    def _bindings(self) -> KeyBindings:
        bindings = KeyBindings()
        asking = Condition(lambda: self._question is not None)

        empty = Condition(lambda: not self._session.default_buffer.text)

        def move(step: int) -> Callable[[KeyPressEvent], None]:
            def handler(event: KeyPressEvent) -> None:
                if self._question is not None:
                    self._question.move(step)
                    self.refresh()

            return handler

        for key in ("left", "up", "s-tab"):
            bindings.add(key, filter=asking & empty)(move(-1))
        for key in ("right", "down", "tab"):
            bindings.add(key, filter=asking & empty)(move(1))

        choosing = Condition(lambda: self._chooser is not None and self._question is None)

        def step(by: int) -> Callable[[KeyPressEvent], None]:
            def handler(event: KeyPressEvent) -> None:
                if self._chooser is not None:
                    self._chooser.move(by)
                    self.refresh()

            return handler

        for key in ("up", "left", "s-tab"):
            bindings.add(key, filter=choosing & empty)(step(-1))
        for key in ("down", "right", "tab"):
            bindings.add(key, filter=choosing & empty)(step(1))

        @bindings.add(" ", filter=choosing & empty & Condition(lambda: bool(self._chooser and self._chooser.many)))
        def _(event: KeyPressEvent) -> None:
            if self._chooser is not None:
                self._chooser.tick()
                self.refresh()

        @bindings.add("enter", filter=choosing, eager=True)
        def _(event: KeyPressEvent) -> None:
            chooser = self._chooser
            if chooser is None:
                return
            buffer = event.app.current_buffer
            if chooser.confirm(buffer.text):
                buffer.reset()
            self.refresh()

        @bindings.add("enter", filter=asking, eager=True)
        def _(event: KeyPressEvent) -> None:
            question = self._question
            if question is None:
                return
            buffer = event.app.current_buffer
            if not buffer.text.strip():
                question.answer(Answer(CHOICES[question.selected]))
                return
            answer = parse_answer(buffer.text)
            if answer is None:
                question.hint = (
                    f"{buffer.text.strip()[:40]!r} is no answer: type yes, always or no (then Enter)"
                )
                self.refresh()
                return
            buffer.reset()
            question.answer(answer)

        @bindings.add("escape", "enter")
        @bindings.add("c-j")
        def _(event: KeyPressEvent) -> None:
            event.app.current_buffer.insert_text("\n")

        @bindings.add("c-c", eager=True)
        @bindings.add("<sigint>", eager=True)  # a SIGINT while the input line is open (kill -INT)
        def _(event: KeyPressEvent) -> None:
            if self.interrupt(event.app.current_buffer):
                event.app.exit(exception=EOFError())

        busy = Condition(lambda: self._question is not None or self._running_since is not None)

        @bindings.add("escape", filter=busy)
        def _(event: KeyPressEvent) -> None:
            # Esc interrupts like Ctrl-C (denies an open question, cancels the turn); idle it does nothing.
            self.interrupt()

        @bindings.add("c-d", filter=Condition(lambda: not self._session.default_buffer.text), eager=True)
        def _(event: KeyPressEvent) -> None:
            event.app.exit(exception=EOFError())

        return bindings


def file_history(environ: Any) -> History:
    """The prompt history file, or an in-memory one when it cannot be created."""
    path = history_path(environ)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    except OSError:
        return InMemoryHistory()
    return FileHistory(str(path))
