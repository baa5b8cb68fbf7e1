"""``dsh chat``: an interactive session — prompts, steering, approvals, slash commands — over one agent at a time.

``ChatController`` owns the harness context and the current agent; an agent-scoped listener
(``_AgentView``) turns that agent's session events into screen output, and ``ChatScreen`` (``_screen``)
does the terminal. Commands: /help, /exit, /new, /clear, /resume ID, /sessions, /model [NAME],
/mode MODE, /compact (when a compaction plugin is loaded), /reasoning, /last, /cost, /undo; ``!cmd``
runs a shell command through the ``bash`` tool (same mode, rules and sandbox) and keeps its output
as context; ``@path`` attaches a workspace file to the prompt (``_attach``).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import attrs
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dsh_core import AgentHandle, SessionEvent, ToolExecution, hookimpl
from dsh_core import Text as TextBlock
from dsh_core.session_log import InboxClearedEvent, TurnStartEvent

from ._approval import SessionApproval
from ._args import MODES
from ._attach import ChatCompleter, attach_files
from ._config import EffectiveConfig, max_attempts
from ._diff import file_diff
from ._errors import CliError
from ._exit import ExitCode
from ._launch import (
    check_model,
    latest_session_id,
    maybe_await,
    open_agent,
    open_harness,
    resolve_session_id,
)
from ._markdown import MarkdownBlocks
from ._plugin import CliPlugin
from ._questions import ChatQuestions
from ._render import (
    PROMPT_MARK,
    BlockEnded,
    EventFeed,
    Note,
    PromptBlocked,
    ReasoningPiece,
    RetryNote,
    TextPiece,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    UsageNote,
    UserNote,
    describe_call,
    plural,
    reasoning_summary,
    retry_line,
    tool_call_line,
    tool_result_line,
    turn_end_line,
    user_line,
)
from ._sanitize import clean
from ._screen import ChatScreen, file_history
from ._sessions import print_history, stored_sessions
from ._todo_list import TodoChecklist
from ._undo import UndoJournal, undo_root
from ._usage import Usage, prices_from

if TYPE_CHECKING:
    from dsh_core import Context
    from dsh_core.llm import LlmCallConfig
    from dsh_core.vocabulary import Agent

__all__ = ["ChatController", "chat_command"]

#: lines of a ``!command``'s output shown (the model gets all of it)
_SHELL_LINES = 40
#: context the chat prints itself when it adds it (``!cmd``, ``/undo``, source plugin ``cli``): not echoed again
_SHOWN_BY_US = ("cli",)

#: turns of history printed when a session is resumed
HISTORY_TURNS = 10

_HELP = (
    ("/help", "this list"),
    ("/new", "start a new session"),
    ("/clear", "the same: a fresh conversation (the old session stays stored)"),
    ("/resume ID", "continue a stored session (an id or a unique prefix)"),
    ("/sessions", "the stored sessions, newest first"),
    ("/model [NAME]", "show or switch the model (provider/model)"),
    ("/mode [MODE]", f"show or switch the permission mode ({', '.join(MODES)})"),
    ("/compact", "compact the conversation now (needs a compaction plugin)"),
    ("/reasoning", "show the last reasoning in full"),
    ("/last", "show the last tool output in full"),
    ("/cost", "tokens and cost of this turn and of the session"),
    ("/undo", "restore the files the last turn's write_file/edit_file changed (created ones removed)"),
    ("!COMMAND", "run a shell command in the workspace (same mode and sandbox); its output joins the context"),
    ("@PATH", "in a prompt: attach that workspace file's text (Tab completes paths and commands)"),
    ("/exit", "leave (also Ctrl-D, or Ctrl-C twice on an empty prompt)"),
)


class _AgentView:
    """Agent-scoped listener: the agent's events to the screen, and the model switch of ``/model``."""

    def __init__(self, chat: ChatController) -> None:
        self._chat = chat
        self._feed = EventFeed(live=True)

    @hookimpl
    def dsh_session_event(self, event: SessionEvent) -> None:
        self._chat.usage.observe(event)
        if event.type == InboxClearedEvent.type:
            ids = event.data.get("ids")
            self._chat.cleared([str(ident) for ident in ids] if isinstance(ids, tuple | list) else [])
        for note in self._feed.feed(event):
            self._chat.show(note)

    @hookimpl
    def dsh_agent_status(self, status: str) -> None:
        if status == "running":
            self._chat.screen.turn_started()
        else:
            self._chat.screen.turn_finished()

    @hookimpl
    def dsh_agent_request(self, config: LlmCallConfig) -> LlmCallConfig | None:
        provider, _, model = self._chat.model.partition("/")
        if (config.provider, config.model) == (provider, model):
            return None
        return attrs.evolve(config, provider=provider, model=model)


class ChatController:
    """One chat: the harness context, the current agent, the screen and the commands."""

    def __init__(self, ctx: Context, config: EffectiveConfig, *, cwd: Path, screen: ChatScreen) -> None:
        self.ctx = ctx
        self.config = config
        self.cwd = cwd
        self.screen = screen
        self.model = config.model
        self.reasoning = str(config.get("plugins.cli.reasoning", "collapsed"))
        self.handle: AgentHandle | None = None
        self.last_reasoning = ""
        self._reasoning_open = False
        self.prices_of = prices_from(ctx)
        #: the current session's tokens and cost, folded from its log
        self.usage = Usage(self.prices_of)
        #: the last tool call and its whole output, for /last
        self.last_output: tuple[str, str] | None = None
        self._calls: dict[str, str] = {}
        #: render the answer as Markdown (``[plugins.cli] markdown``)
        self.markdown = bool(config.get("plugins.cli.markdown", True))
        self._blocks = MarkdownBlocks()
        #: the steering typed, by inbox id: what ``inbox/cleared`` names was dropped unseen
        self.steering: dict[str, str] = {}
        #: the scope of the line being handled (``loop``), which a Ctrl-C between input lines cancels
        self._handling: anyio.CancelScope | None = None
        #: what the file tools changed, per turn, for /undo
        self.journal = UndoJournal(lambda session_id: undo_root(ctx, session_id))
        #: where a ``!command`` runs while the input line stays open (its approval is asked there)
        self.tasks: anyio.abc.TaskGroup | None = None
        #: the scope of the ``!command`` running, which Ctrl-C cancels
        self._shell: anyio.CancelScope | None = None

    # ------------------------------------------------------------------ the agent

    @property
    def session_id(self) -> str:
        return self.handle.agent.id if self.handle is not None else "-"

    @property
    def running(self) -> bool:
        return self.handle is not None and (self.handle.agent.status == "running" or self.screen.running)

    async def open(self, resume: str | None) -> None:
        """Dispose the current agent (if any) and create a new one or resume ``resume``.

        A session to resume is looked up first, so a wrong id leaves the current agent as it is.
        """
        if resume is not None:
            resume = await resolve_session_id(self.ctx, resume)
        await self.close()

        def setup(agent_ctx: Context) -> None:
            agent_ctx.register_plugin(_AgentView(self), name="cli-chat-view")
            agent_ctx.register_plugin(self.journal, name="cli-undo-journal")

        self.handle = await open_agent(self.ctx, model=self.model, cwd=self.cwd, resume=resume, setup=setup)
        session = self.handle.agent.session
        # what this session spent: a fork's inherited events (its seed) were spent by another one
        self.usage = Usage.from_events(session.events[session.meta.seed_length :], self.prices_of)
        if resume is not None:
            self._print_history(tuple(session.events))
        cwd = session.meta.cwd or str(self.cwd)
        verb = "resumed" if resume is not None else "new"
        self.screen.print(
            Text.assemble((f"● {verb} session ", "dim"), (session.id, "bold"), (f"  ·  {cwd}", "dim"))
        )

    async def close(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            if not handle.agent.pending_approvals():  # a call waiting for a yes stays parked for --resume
                handle.agent.cancel()
            await handle.dispose()
            self.screen.turn_finished()

    @property
    def workspace(self) -> str:
        """The current session's workspace (where its tools run), else the chat's directory."""
        if self.handle is not None and self.handle.agent.session.meta.cwd:
            return str(self.handle.agent.session.meta.cwd)
        return str(self.cwd)

    def resumable(self) -> str | None:
        """The current session's id when it has a turn to come back to."""
        if self.handle is None:
            return None
        session = self.handle.agent.session
        return session.id if any(event.type == TurnStartEvent.type for event in session.events) else None

    def cancel(self) -> None:
        if self._shell is not None:
            self._shell.cancel()
        if self.handle is not None:
            self.handle.agent.cancel()

    def _print_history(self, events: tuple[SessionEvent, ...]) -> None:
        starts = [i for i, event in enumerate(events) if event.type == TurnStartEvent.type]
        shown = events
        if len(starts) > HISTORY_TURNS:
            shown = events[starts[-HISTORY_TURNS] :]
            self.screen.print(Text(f"… {len(starts) - HISTORY_TURNS} earlier turns not shown", style="dim"))
        print_history(
            self.screen.console,
            shown,
            reasoning="collapsed" if self.reasoning != "hidden" else "hidden",
            markdown=self.markdown,
        )

    # ------------------------------------------------------------------ output of the agent's events

    def show(self, note: Note) -> None:
        """Put one note of the agent's event stream on the screen."""
        screen = self.screen
        if isinstance(note, TextPiece | ReasoningPiece):
            screen.count_streamed(len(note.text))
        if isinstance(note, TextPiece):
            self._end_reasoning()
            if not self.markdown:
                screen.stream(note.text)
                return
            for block in self._blocks.feed(note.text):
                screen.markdown(block, first=self._blocks.count == 1)
            screen.set_pending(self._blocks.pending)
        elif isinstance(note, ReasoningPiece):
            if not self._reasoning_open:
                self._reasoning_open = True
                self.last_reasoning = ""
            self.last_reasoning += note.text
            if self.reasoning == "shown":
                screen.stream(note.text, style="dim italic")
            elif self.reasoning == "collapsed":
                screen.thinking(len(note.text))
        elif isinstance(note, BlockEnded):
            self._end_reasoning()
            self._end_markdown()
            screen.end_stream()
            if note.interrupted:
                screen.print(Text("  (interrupted)", style="dim"))
        elif isinstance(note, UsageNote):
            screen.add_tokens(note.input_tokens, note.output_tokens)
        elif isinstance(note, ToolStarted):
            self._end_reasoning()
            screen.print(tool_call_line(note.name, note.arguments))
            diff = file_diff(note.name, note.arguments, self.workspace)
            if diff is not None:
                screen.print(diff)
            screen.set_activity(describe_call(note.name, note.arguments, width=50))
            self._calls[note.call_id] = describe_call(note.name, note.arguments)
        elif isinstance(note, ToolFinished):
            screen.print(tool_result_line(note))
            screen.set_activity("")
            self.last_output = (self._calls.pop(note.call_id, note.name), note.text)
        elif isinstance(note, RetryNote):
            screen.print(retry_line(note, max_attempts(self.config)))
        elif isinstance(note, UserNote) and note.kind not in ("user", "steering", *_SHOWN_BY_US):
            screen.print(Text(f"  [{note.kind}] {note.text[:200]}", style="dim"))
        elif isinstance(note, PromptBlocked):
            screen.print(Text(f"✗ prompt blocked: {note.reason}", style="red"))
        elif isinstance(note, TurnEnded):
            self._end_reasoning()
            line = turn_end_line(note.reason, seconds=screen.elapsed, tokens=screen.tokens)
            cost = self.usage.turn_cost_text()
            if cost is not None:
                line.append(f"  {cost}", style="dim")
            screen.print(line)

    def cleared(self, ids: list[str]) -> None:
        """``inbox/cleared``: steering the model never saw was dropped (a cancel): say so, and put it back."""
        lost = [self.steering.pop(ident) for ident in ids if ident in self.steering]
        if not lost:
            return
        count = "message was" if len(lost) == 1 else f"{len(lost)} messages were"
        self.screen.print(
            Text(
                f"↳ not delivered: the steering {count} dropped with the turn; "
                "it is back in the input line (Enter sends it as a prompt)",
                style="yellow",
            )
        )
        self.screen.set_input("\n".join(lost))

    def _end_markdown(self) -> None:
        for block in self._blocks.flush():
            self.screen.markdown(block, first=self._blocks.count == 1)
        self.screen.set_pending("")
        self._blocks = MarkdownBlocks()

    def _end_reasoning(self) -> None:
        if not self._reasoning_open:
            return
        self._reasoning_open = False
        self.screen.end_stream()
        if self.reasoning == "collapsed" and self.last_reasoning.strip():
            summary = reasoning_summary(self.last_reasoning, width=70)
            self.screen.print(Text(f"✻ {summary}  (/reasoning expands)", style="dim italic"))

    # ------------------------------------------------------------------ input

    async def submit(self, line: str) -> bool:
        """Handle one typed line; ``False`` means: leave the chat."""
        text = line.strip()
        if not text:
            return True
        if text.startswith("/"):
            self.screen.print(Text(f"{PROMPT_MARK}{text}", style="bold dim"))  # outputs stay apart
            return await self.command(text)
        if self.handle is None:
            self.screen.print(Text("no session: /new or /resume ID", style="red"))
            return True
        if self._shell is not None:
            self.screen.print(Text("a !command is running: wait for it, or press Ctrl-C", style="yellow"))
            return True
        if text.startswith("!"):
            self._start_shell(text[1:].strip())
            return True
        agent = self.handle.agent
        if self.running:
            self.steering[agent.steer(text)] = text
            await self._stored(agent)
            self.screen.note(
                Text.assemble(("↳ ", "cyan"), (text, "cyan"), ("  (steering: seen at the next step)", "dim"))
            )
        else:
            # The prompt starts a turn at once, whose output follows its echo; the next line is read
            # only once the prompt is on disk.
            self.screen.print(user_line(text, "user"))
            prompt, attached = attach_files(text, Path(self.workspace))
            for file in attached:
                cut = "; cut to its start" if file.cut else ""
                self.screen.print(Text(f"  📎 {file.path} ({plural(file.lines, 'line')}{cut})", style="dim"))
            agent.send(prompt)
            self.screen.turn_started()
            await self._stored(agent)
        return True

    async def _stored(self, agent: Agent) -> None:
        """Wait until the message just queued is on disk (SPEC §9.1): steering is shown as queued
        only after it."""
        try:
            await self.ctx.sessions.flush(agent.session)
        except Exception as exc:  # noqa: BLE001 - shown, not fatal: the message is queued all the same
            self.screen.print(Text(f"the message is queued but could not be stored: {exc}", style="red"))

    async def command(self, text: str) -> bool:
        name, _, argument = text.partition(" ")
        argument = argument.strip()
        screen = self.screen
        try:
            if name in ("/exit", "/quit"):
                return False
            if name == "/help":
                self._help()
            elif name in ("/new", "/clear", "/resume"):
                if self.running:
                    screen.print(
                        Text("the agent is working: wait, or press Ctrl-C to cancel first", style="yellow")
                    )
                elif name == "/resume" and not argument:
                    screen.print(Text("usage: /resume ID  (/sessions lists them)", style="yellow"))
                else:
                    await self.open(argument if name == "/resume" else None)
            elif name == "/sessions":
                await self._sessions()
            elif name == "/model":
                self._switch_model(argument)
            elif name == "/mode":
                await self._mode(argument)
            elif name == "/compact":
                await self._compact()
            elif name == "/last":
                self._last()
            elif name == "/cost":
                for line in self.usage.report():
                    screen.print(Text(line, style="dim"))
            elif name == "/undo":
                await self._undo()
            elif name == "/reasoning":
                if self.last_reasoning:
                    screen.print(Text(self.last_reasoning.strip(), style="dim italic"))
                else:
                    screen.print(Text("no reasoning yet", style="dim"))
            else:
                screen.print(Text(f"unknown command {name}; /help lists the commands", style="yellow"))
        except CliError as exc:
            screen.print(Text(f"✗ {exc}", style="red"))
        return True

    def _start_shell(self, command: str) -> None:
        """``!command``: run it in the background, so that the input line (and an approval question) stays open."""
        if not command:
            self.screen.print(Text("usage: !COMMAND  (e.g. !git status)", style="yellow"))
            return
        if self.handle is None or self.running:
            self.screen.print(Text("the agent is working: run the command when it is idle", style="yellow"))
            return
        self.screen.print(Text.assemble(("! ", "bold magenta"), (command, "bold")))
        if self.tasks is None:
            return
        self._shell = anyio.CancelScope()
        self.screen.turn_started()
        self.screen.set_activity(f"! {command[:40]}")
        self.tasks.start_soon(self._run_shell, command, self._shell)

    async def _run_shell(self, command: str, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                await self._shell_command(command)
            if scope.cancelled_caught:
                self.screen.print(Text("cancelled", style="yellow"))
        except Exception as exc:  # noqa: BLE001 - shown: a failing command never ends the chat
            self.screen.print(Text(f"✗ {exc}", style="red"))
        finally:
            self._shell = None
            self.screen.turn_finished()

    async def _shell_command(self, command: str) -> None:
        """Run ``command`` through the ``bash`` tool (its mode, rules, sandbox, approval), show its
        output, and keep it as context for the next turn; the model is not called."""
        screen = self.screen
        if self.handle is None:
            return
        agent = self.handle.agent
        execution = ToolExecution(
            call_id=f"user-shell-{secrets.token_hex(4)}",
            name="bash",
            arguments=json.dumps({"command": command}),
            agent_id=agent.id,
            session_id=agent.session.id,
            cwd=self.workspace,
            ctx=agent.ctx,
        )
        result = await agent.ctx.tools.execute(execution)
        output = clean("".join(block.text for block in result.content if isinstance(block, TextBlock)))
        lines = output.rstrip().splitlines()
        style = "red" if result.is_error else "dim"
        for line in lines[:_SHELL_LINES]:
            screen.print(Text(f"  {line}", style=style))
        if len(lines) > _SHELL_LINES:
            screen.print(Text(f"  … {len(lines) - _SHELL_LINES} more lines (all of it goes to the model)", style="dim"))
        if result.error_code == "DENIED":
            return  # not run: nothing to tell the model
        agent.inject(
            f"The user ran a shell command in the workspace:\n$ {command}\n<output>\n{output.rstrip()}\n</output>",
            source={"kind": "plugin", "plugin": "cli", "cli": "shell"},
        )
        await self._stored(agent)
        screen.print(Text("  (kept as context for the next prompt)", style="dim"))

    async def _undo(self) -> None:
        """``/undo``: put back the files the latest kept turn's file tools changed, and tell the model."""
        if self.handle is None:
            raise CliError("no session: /new or /resume ID")
        if self.running:
            raise CliError("the agent is working: undo when it is idle (Ctrl-C cancels the turn)")
        agent = self.handle.agent
        undone = await anyio.to_thread.run_sync(self.journal.undo_last, agent.session.id)
        if undone is None:
            self.screen.print(Text("nothing to undo: no file changes of write_file/edit_file are kept", style="dim"))
            return
        turn, files = undone
        shown = [self._relative(file.path) for file in files]
        words = ", ".join(f"{path} ({'removed' if file.removed else 'restored'})" for path, file in zip(shown, files, strict=True))
        self.screen.print(Text(f"↶ undid turn {turn}: {words}", style="yellow"))
        agent.inject(
            f"The user undid the file changes of turn {turn}; these files are back as they were before it: "
            + ", ".join(shown),
            source={"kind": "plugin", "plugin": "cli", "cli": "undo"},
        )
        await self._stored(agent)

    def _relative(self, path: str) -> str:
        try:
            return str(Path(path).relative_to(self.workspace))
        except ValueError:
            return path

    def _last(self) -> None:
        if self.last_output is None:
            self.screen.print(Text("no tool output yet", style="dim"))
            return
        call, text = self.last_output
        self.screen.print(Text.assemble(("⏺ ", "yellow"), (call, "bold")))
        self.screen.print(Text(text.rstrip() or "(no output)"))

    def status(self) -> str:
        """The bottom line: model, session, context-window use and cost."""
        parts = [self.model, f"session {self.session_id}"]
        try:
            window: int | None = self.ctx.llm.model_info(self.model).context_window
        except (TypeError, ValueError, LookupError):
            window = None
        share = self.usage.context_share(window)
        if share is not None:
            parts.append(f"context {share}")
        cost = self.usage.cost_text()
        if cost is not None:
            parts.append(f"session {cost}")
        parts.append("/help")
        return " · ".join(parts)

    def _help(self) -> None:
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(style="bold cyan")
        table.add_column()
        has_compaction = self.ctx.get_service("compaction") is not None
        for command, what in _HELP:
            if command == "/compact" and not has_compaction:
                continue
            table.add_row(command, what)
        self.screen.print(table)
        self.screen.print(
            Text(
                "Type while the agent works to steer it. Ctrl-C cancels the turn; twice on an empty prompt exits.",
                style="dim",
            )
        )

    async def _sessions(self) -> None:
        persistence = self.ctx.get_service("session_persistence")
        if persistence is None:
            raise CliError("no session persistence plugin is loaded (pip install dsh-harness-persistence-jsonl)")
        summaries = await stored_sessions(persistence)
        if not summaries:
            self.screen.print(Text("no stored sessions", style="dim"))
            return
        table = Table(show_header=True, box=None, pad_edge=False)
        table.add_column("id", no_wrap=True, min_width=max(len(s.id) for s in summaries) + 2)
        table.add_column("turns", justify="right", no_wrap=True)
        table.add_column("first prompt", no_wrap=True, overflow="ellipsis")
        for s in summaries[:20]:
            marker = " ◂" if s.id == self.session_id else ""
            table.add_row(f"{s.id}{marker}", str(s.turns), s.title or "-")
        self.screen.print(table)

    def _switch_model(self, name: str) -> None:
        if not name:
            self.screen.print(Text.assemble(("model ", "dim"), (self.model, "bold")))
            return
        check_model(self.ctx, name, self.config, given_by="/model")
        self.model = name
        self.screen.print(
            Text.assemble(("model → ", "dim"), (name, "bold"), ("  (from the next request)", "dim"))
        )

    async def _mode(self, mode: str) -> None:
        permissions = self.ctx.get_service("permissions")
        if permissions is None:
            raise CliError("no permissions plugin is loaded (pip install dsh-harness-permissions)")
        if self.handle is None:
            raise CliError("no session: /new or /resume ID")
        if not mode:
            current = getattr(permissions, "mode_for", None)
            shown = current(self.handle.agent.id) if current is not None else "?"
            self.screen.print(
                Text.assemble(("mode ", "dim"), (str(shown), "bold"), (f"  ({', '.join(MODES)})", "dim"))
            )
            return
        if mode not in MODES:
            raise CliError(f"usage: /mode {'|'.join(MODES)}")
        await maybe_await(permissions.set_mode(self.handle.agent.id, mode))
        self.screen.print(Text.assemble(("mode → ", "dim"), (mode, "bold")))

    async def _compact(self) -> None:
        compaction = self.ctx.get_service("compaction")
        if compaction is None:
            raise CliError("no compaction plugin is loaded (pip install dsh-harness-compaction)")
        if self.handle is None:
            raise CliError("no session: /new or /resume ID")
        if self.running:
            raise CliError("the agent is working: compact when it is idle")
        self.screen.print(Text("compacting…", style="dim"))
        result = await maybe_await(compaction.compact_now(self.handle.agent))
        self.screen.print(Text(f"✓ compacted{f': {result}' if isinstance(result, str) else ''}", style="dim"))

    async def loop(self) -> None:
        """Read and handle lines until the user leaves; ``stop_command`` cancels the line being handled."""
        while True:
            line = await self.screen.read()
            if line is None:
                return
            keep = True
            with anyio.CancelScope() as self._handling:
                keep = await self.submit(line)
            handling, self._handling = self._handling, None
            if handling.cancelled_caught:
                self.screen.print(Text("cancelled", style="yellow"))
            elif not keep:
                return

    def stop_command(self) -> bool:
        """Cancel the handling of the line just entered (a command such as ``/compact``); ``False`` when none is."""
        if self._handling is None:
            return False
        self._handling.cancel()
        return True


async def chat_command(
    config: EffectiveConfig, *, cwd: Path, resume: str | None = None, continue_latest: bool = False
) -> int:
    """Run ``dsh chat``; returns the exit status."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError("dsh chat needs a terminal; use `dsh run PROMPT` from scripts", code=ExitCode.USAGE)
    chat: ChatController | None = None

    def cancel() -> None:
        if chat is not None:
            chat.cancel()

    def toolbar() -> str:
        if chat is None:
            return "dsh"
        return chat.status()

    commands = [*(command.split()[0] for command, _ in _HELP if command.startswith("/")), "/quit"]
    screen = ChatScreen(
        on_cancel=cancel,
        toolbar=toolbar,
        history=file_history(os.environ),
        completer=ChatCompleter(commands, lambda: Path(chat.workspace) if chat is not None else cwd),
    )
    approval = SessionApproval(screen)
    questions = ChatQuestions(screen)
    async with open_harness(config, plugins=[CliPlugin(approval, questions, workspace=cwd)]) as ctx:
        check_model(ctx, config.model, config)
        if continue_latest:
            resume = await latest_session_id(ctx, cwd)
        chat = ChatController(ctx, config, cwd=cwd, screen=screen)
        screen.above = TodoChecklist(lambda: chat.handle.agent.session if chat and chat.handle else None).lines
        with patch_stdout(raw=True):
            screen.print(
                Text.assemble(
                    ("dsh", "bold"),
                    (f" · {chat.model} · {cwd}", "dim"),
                    ("\n/help for commands · type while it works to steer · Ctrl-C cancels", "dim"),
                )
            )
            await chat.open(resume)
            try:
                async with anyio.create_task_group() as tasks:
                    chat.tasks = tasks
                    tasks.start_soon(screen.animate)
                    with screen.interrupts(stop_command=chat.stop_command, on_exit=tasks.cancel_scope.cancel):
                        await chat.loop()
                    tasks.cancel_scope.cancel()
            finally:
                resumable = chat.resumable()
                here = chat.workspace == str(cwd)
                summary = chat.usage.summary(chat.session_id)
                await chat.close()
    if summary is not None:
        Console(highlight=False).print(Text(summary, style="dim"))
    if resumable is not None:
        also = " (or `dsh chat -c` here)" if here else ""  # -c picks this directory's latest session
        Console(highlight=False).print(Text(f"resume with `dsh chat --resume {resumable}`{also}", style="dim"))
    return int(ExitCode.OK)
