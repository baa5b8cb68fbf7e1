"""``dsh run PROMPT``: one turn, the answer streamed to stdout, tool activity to stderr, the outcome as exit status.

With ``--json`` stdout carries every session event of the run as one JSON line instead (the
format of ``SessionEvent.to_json()``). SIGINT (Ctrl-C) and SIGTERM cancel the turn: it ends
``aborted``, the session is flushed by the loop as at every turn end, and ``dsh`` exits 130 (143).
A second signal stops waiting for the turn to wind down.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio
from rich.console import Console
from rich.text import Text

from dsh_core import SessionEvent, hookimpl

from ._approval import RefusingPrompter, SessionApproval, TerminalPrompter
from ._config import EffectiveConfig
from ._exit import ExitCode, exit_code_for
from ._launch import check_model, open_agent, open_harness
from ._plugin import CliPlugin
from ._render import (
    BlockEnded,
    EventFeed,
    TextPiece,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    describe_reason,
    tool_call_line,
    tool_result_line,
)
from ._stdout import json_line, silence_stdout

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["RunOutput", "run_command"]


class RunOutput:
    """Agent-scoped listener: answer text to ``out``, tool lines to ``err`` (or every event as JSON to ``out``)."""

    def __init__(self, *, out: TextIO, err: Console, json_lines: bool) -> None:
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
        #: the ``turn/end`` reason of the turn this run sent
        self.reason: dict[str, object] | None = None

    @hookimpl
    def dsh_session_event(self, event: SessionEvent) -> None:
        if self.broken:
            return
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
            if self._json:
                continue
            if isinstance(note, TextPiece):
                self._text(note.text)
            elif isinstance(note, BlockEnded):
                self._end_line()
            elif isinstance(note, ToolStarted):
                self._before_stderr()
                self._err.print(tool_call_line(note.name, note.arguments))
            elif isinstance(note, ToolFinished):
                self._err.print(tool_result_line(note))

    def _text(self, text: str) -> None:
        if not self._line_open and self._wrote_text:
            text = text.lstrip("\n")
        if not text:
            return
        self._out.write(text)
        self._out.flush()
        self._wrote_text = True
        self._line_open = not text.endswith("\n")

    def _end_line(self) -> None:
        if self._line_open:
            self._out.write("\n")
            self._out.flush()
            self._line_open = False

    def _before_stderr(self) -> None:
        # On a terminal both streams share the screen: end the answer's line before a tool line.
        if self._out_is_terminal:
            self._end_line()

    def finish(self) -> None:
        """End the answer's last line (stdout always ends with a newline when text was written)."""
        if self.broken:
            return
        try:
            self._end_line()
        except BrokenPipeError:
            self.broken = True


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
    prompter = TerminalPrompter() if sys.stdin.isatty() else RefusingPrompter(err_stream)
    output = RunOutput(out=out, err=console, json_lines=json_lines)
    model = config.model
    received: list[int] = []
    waiting = anyio.CancelScope()

    def setup(agent_ctx: Context) -> None:
        agent_ctx.register_plugin(output, name="cli-run-output")

    async with open_harness(config, plugins=[CliPlugin(SessionApproval(prompter))]) as ctx:
        check_model(ctx, model, config)
        async with await open_agent(ctx, model=model, cwd=cwd, resume=resume, setup=setup) as handle:
            agent = handle.agent
            session_id = agent.id
            output.on_broken = agent.cancel
            async with anyio.create_task_group() as tg:
                tg.start_soon(_watch_signals, agent.cancel, received, waiting)
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
    if code == ExitCode.OK or any(event.type == "assistant/message" for event in agent.session.events):
        console.print(
            Text(f"session {session_id} · continue with: dsh run --resume {session_id} PROMPT", style="dim")
        )
    return int(code)
