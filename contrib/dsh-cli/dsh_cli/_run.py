"""``dsh run PROMPT``: one turn, the answer streamed to stdout, tool activity to stderr, the outcome as exit status.

With ``--json`` stdout carries every session event of the run as one JSON line instead (the
format of ``SessionEvent.to_json()``). SIGINT (Ctrl-C) and SIGTERM cancel the turn: it ends
``aborted``, the session is flushed by the loop as at every turn end, and ``dsh`` exits 130 (143).
A second signal stops waiting for the turn to wind down.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio
from rich.console import Console
from rich.live import Live
from rich.text import Text

from dsh_core import SessionEvent, hookimpl
from dsh_core.session_log import AssistantMessageEvent

from ._approval import Answer, Prompter, RefusingPrompter, SessionApproval, TerminalPrompter
from ._config import EffectiveConfig, max_attempts
from ._diff import edit_diff
from ._exit import ExitCode, exit_code_for
from ._launch import check_model, open_agent, open_harness
from ._markdown import MarkdownBlocks, render_block
from ._plugin import CliPlugin
from ._render import (
    BlockEnded,
    EventFeed,
    RetryNote,
    StepStarted,
    TextPiece,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    describe_call,
    describe_reason,
    retry_line,
    tool_call_line,
    tool_result_line,
)
from ._stdout import json_line, silence_stdout
from ._usage import Usage, prices_from

if TYPE_CHECKING:
    from dsh_core import Context, ToolExecution
    from dsh_core.session_log import ApprovalResolvedEvent

__all__ = ["RunOutput", "run_command"]


#: the spinner's frames (stderr, while waiting for the model or a tool)
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class RunOutput:
    """Agent-scoped listener: answer text to ``out``, tool lines to ``err`` (or every event as JSON to ``out``).

    ``markdown`` (stdout a terminal) renders the answer block by block, the unfinished block shown
    live; otherwise the text is written as it streams. ``spinner`` (stderr a terminal) shows what
    the run waits for; ``tick`` redraws it and every other output clears it first.
    """

    def __init__(
        self,
        *,
        out: TextIO,
        err: Console,
        json_lines: bool,
        markdown: bool = False,
        spinner: bool = False,
        max_attempts: int | None = None,
    ) -> None:
        self._out = out
        #: stdout's reader went away (``| head``): nothing more is written, and ``on_broken`` ran
        self.broken = False
        #: called once when stdout breaks: the run stops generating what nobody reads
        self.on_broken: Callable[[], None] = lambda: None
        self._err = err
        self._json = json_lines
        self._feed = EventFeed(live=True)
        self._line_open = False  # answer text was written and its line not ended
        self._wrote_text = False
        self._out_is_terminal = out.isatty()
        self._max_attempts = max_attempts
        #: tokens and cost of this run's requests (priced once the harness is up)
        self.usage = Usage()
        self._blocks = MarkdownBlocks()
        #: where Markdown is rendered (``None``: plain text)
        self._console = Console(file=out, highlight=False) if markdown and not json_lines else None
        self._live: Live | None = None
        self._spinner = spinner and not json_lines
        self._spinning = False  # a spinner frame is on stderr's last line
        #: an approval question is on stderr: the spinner must not draw over it
        self.asking = False
        self._waiting: str | None = "waiting for the model"
        self._since = time.monotonic()
        #: the ``turn/end`` reason of the turn this run sent
        self.reason: dict[str, object] | None = None

    @hookimpl
    def dsh_session_event(self, event: SessionEvent) -> None:
        if self.broken:
            return
        self.usage.observe(event)
        try:
            self._event(event)
        except BrokenPipeError:
            self.broken = True
            self.on_broken()

    def _event(self, event: SessionEvent) -> None:
        if self._json:
            self._out.write(json_line(event.to_json()))
            self._out.flush()
        for note in self._feed.feed(event):
            if isinstance(note, TurnEnded):
                self.reason = dict(note.reason)
                self._wait(None)
            if self._json:
                continue
            if isinstance(note, TextPiece):
                self._wait(None)
                self._text(note.text)
            elif isinstance(note, BlockEnded):
                self._end_block()
                self._wait("waiting for the model")
            elif isinstance(note, StepStarted):
                self._wait("waiting for the model")
            elif isinstance(note, ToolStarted):
                self._before_stderr()
                self._err.print(tool_call_line(note.name, note.arguments))
                diff = edit_diff(note.name, note.arguments)
                if diff is not None:
                    self._err.print(diff)
                self._wait(describe_call(note.name, note.arguments, width=50))
            elif isinstance(note, ToolFinished):
                self._clear_spinner()
                self._err.print(tool_result_line(note))
                self._wait("waiting for the model")
            elif isinstance(note, RetryNote):
                self._before_stderr()
                self._err.print(retry_line(note, self._max_attempts))

    # ------------------------------------------------------------------ the answer

    def _text(self, text: str) -> None:
        if self._console is not None:
            self._markdown(self._console, text)
            return
        if not self._line_open and self._wrote_text:
            text = text.lstrip("\n")
        if not text:
            return
        self._out.write(text)
        self._out.flush()
        self._wrote_text = True
        self._line_open = not text.endswith("\n")

    def _markdown(self, console: Console, text: str) -> None:
        for block in self._blocks.feed(text):
            self._print_block(console, block)
        pending = self._blocks.pending
        if pending.strip():
            if self._live is None:
                self._live = Live(console=console, auto_refresh=False, transient=True)
                self._live.start()
            self._live.update(render_block(pending), refresh=True)

    def _print_block(self, console: Console, block: str) -> None:
        if self._wrote_text:
            console.print()
        console.print(render_block(block))
        self._wrote_text = True

    def _end_block(self) -> None:
        if self._console is None:
            self._end_line()
            return
        for block in self._blocks.flush():
            self._print_block(self._console, block)
        self._blocks = MarkdownBlocks()
        self._stop_live()

    def _stop_live(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()

    def _end_line(self) -> None:
        if self._line_open:
            self._out.write("\n")
            self._out.flush()
            self._line_open = False

    def _before_stderr(self) -> None:
        self._clear_spinner()
        # On a terminal both streams share the screen: end the answer's line before a tool line.
        if self._out_is_terminal:
            self._end_line()

    # ------------------------------------------------------------------ the spinner

    def _wait(self, what: str | None) -> None:
        """Now waiting for ``what`` (``None``: not waiting, output is coming)."""
        if what != self._waiting:
            self._since = time.monotonic()
        self._waiting = what
        if what is None:
            self._clear_spinner()

    def tick(self) -> None:
        """Redraw the spinner (stderr a terminal, something awaited, no answer line open, no question)."""
        if not self._spinner or self._waiting is None or self._line_open or self._live is not None:
            return
        if self.asking:
            return
        elapsed = time.monotonic() - self._since
        frame = _SPINNER[int(elapsed * 10) % len(_SPINNER)]
        stream = self._err.file
        stream.write(f"\r{frame} {self._waiting} · {elapsed:.1f}s\x1b[K")
        stream.flush()
        self._spinning = True

    def pause_for_question(self) -> None:
        """An approval question is about to be asked on stderr: clear the spinner and keep it off."""
        self.asking = True
        self._clear_spinner()

    def _clear_spinner(self) -> None:
        if self._spinning:
            self._err.file.write("\r\x1b[K")
            self._err.file.flush()
            self._spinning = False

    def finish(self) -> None:
        """End the answer's last line (stdout always ends with a newline when text was written)."""
        self._waiting = None
        self._clear_spinner()
        if self.broken:
            return
        try:
            self._end_block()
        except BrokenPipeError:
            self.broken = True


class _QuietWhileAsking:
    """A prompter that stops the spinner while its question is on the screen."""

    def __init__(self, prompter: Prompter, output: RunOutput) -> None:
        self._prompter = prompter
        self._output = output

    async def ask(self, execution: ToolExecution, reason: str) -> Answer:
        self._output.pause_for_question()
        try:
            return await self._prompter.ask(execution, reason)
        finally:
            self._output.asking = False

    def closed(self, execution: ToolExecution, resolved: ApprovalResolvedEvent) -> None:
        closed = getattr(self._prompter, "closed", None)
        if closed is not None:
            closed(execution, resolved)


async def _spin(output: RunOutput) -> None:
    while True:
        output.tick()
        await anyio.sleep(0.1)


async def _watch_signals(
    cancel_turn: Callable[[], None], received: list[int], waiting: anyio.CancelScope
) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            received.append(int(signum))
            if len(received) == 1:
                cancel_turn()
            else:
                waiting.cancel()  # a second signal: stop waiting for the turn to wind down


async def run_command(
    config: EffectiveConfig,
    *,
    prompt: str,
    cwd: Path,
    resume: str | None = None,
    json_lines: bool = False,
    plain: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run one turn and return the exit status (``ExitCode``)."""
    out = out or sys.stdout
    err_stream = err or sys.stderr
    console = Console(file=err_stream, highlight=False, soft_wrap=True)
    prompter: Prompter = TerminalPrompter() if sys.stdin.isatty() else RefusingPrompter(err_stream)
    markdown = out.isatty() and not plain and bool(config.get("plugins.cli.markdown", True))
    output = RunOutput(
        out=out,
        err=console,
        json_lines=json_lines,
        markdown=markdown,
        spinner=err_stream.isatty(),
        max_attempts=max_attempts(config),
    )
    model = config.model
    prompter = _QuietWhileAsking(prompter, output)
    received: list[int] = []
    waiting = anyio.CancelScope()

    def setup(agent_ctx: Context) -> None:
        agent_ctx.register_plugin(output, name="cli-run-output")

    async with open_harness(config, plugins=[CliPlugin(SessionApproval(prompter))]) as ctx:
        check_model(ctx, model, config)
        output.usage = Usage(prices_from(ctx))
        async with await open_agent(ctx, model=model, cwd=cwd, resume=resume, setup=setup) as handle:
            agent = handle.agent
            session_id = agent.id
            output.on_broken = agent.cancel
            async with anyio.create_task_group() as tg:
                tg.start_soon(_watch_signals, agent.cancel, received, waiting)
                tg.start_soon(_spin, output)
                with waiting:
                    await agent.run(prompt)
                tg.cancel_scope.cancel()
            output.finish()
    if output.broken:
        silence_stdout()
        return int(ExitCode.BROKEN_PIPE)
    reason = output.reason
    if received and (reason is None or reason.get("kind") == "aborted"):
        code = ExitCode.TERMINATED if received[0] == signal.SIGTERM else ExitCode.INTERRUPTED
    elif reason is None:
        code = ExitCode.ERROR
    else:
        code = exit_code_for(reason)
    if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
        console.print(Text("dsh: cancelled; the session is saved as it was", style="yellow"))
    elif code != ExitCode.OK:
        what = describe_reason(reason) if reason is not None else "the turn did not end"
        console.print(Text(f"dsh: {what}", style="red"))
    # The resume hint only where there is something to continue: a failed first request gets one line.
    if code == ExitCode.OK or any(event.type == AssistantMessageEvent.type for event in agent.session.events):
        cost = output.usage.cost_text()
        spent = f" · {cost}" if cost is not None else ""
        console.print(
            Text(
                f"session {session_id}{spent} · continue with: dsh run --resume {session_id} PROMPT",
                style="dim",
            )
        )
    return int(code)
