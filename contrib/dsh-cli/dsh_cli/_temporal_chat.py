"""``dsh chat --temporal``: the chat driving a session hosted on Temporal (``[plugins.temporal]``).

The turns run on ``dsh worker`` processes; this process only talks to the engine through
``dsh_temporal.TemporalAgents``: a prompt is a ``send`` Update, typing while a turn runs a
``steer``, Ctrl-C the ``cancel`` Signal, and the screen follows the session log through
``events()`` read through a worker (the chat needs no access to the workers' store). The local
harness is opened only for the configuration and the model's context window (status line); no
agent runs here, so nothing asks for approval here (a worker parks a call that waits for approval;
it is answered through ``TemporalAgents.resolve_approval``).
Leaving the chat leaves the session and any running turn on Temporal: resume it with
``dsh chat --temporal --resume ID``.
"""

from __future__ import annotations

import os
import sys
from contextlib import AsyncExitStack, aclosing
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from rich.console import Console
from rich.text import Text

from dsh_core import AgentOptions, ConfigError, DuplicateRegistrationError, SessionEvent
from dsh_core.session_log import InboxClearedEvent, TurnEndEvent, TurnStartEvent

from ._chat import ChatController
from ._config import EffectiveConfig
from ._errors import CliError
from ._exit import ExitCode
from ._launch import new_session_id, open_harness
from ._render import EventFeed, user_line
from ._screen import ChatScreen, file_history

if TYPE_CHECKING:
    from anyio.abc import TaskGroup, TaskStatus
    from dsh_temporal import RemoteSession, TemporalAgents

    from dsh_core import Context

__all__ = ["RemoteChatController", "temporal_chat_command"]

#: commands that act on a local agent or store, and what to do instead over Temporal
_LOCAL_ONLY = {
    "/sessions": "the sessions live in the workers' store: `dsh sessions list` where it is reachable",
    "/model": "the model is fixed when the session is created on Temporal: start the chat with --model",
    "/mode": "permissions are the workers' configuration ([plugins.permissions] on each worker)",
    "/compact": "compaction runs on the workers (a compaction plugin in their configuration)",
}


class RemoteChatController(ChatController):
    """The chat's controller with a ``RemoteSession`` in place of a local agent."""

    def __init__(
        self,
        ctx: Context,
        config: EffectiveConfig,
        *,
        cwd: Path,
        screen: ChatScreen,
        agents: TemporalAgents,
        tasks: TaskGroup,
    ) -> None:
        super().__init__(ctx, config, cwd=cwd, screen=screen)
        self.agents = agents
        self.remote: RemoteSession | None = None
        self._tasks = tasks
        self._tail: anyio.CancelScope | None = None
        self._feed = EventFeed(live=True)
        self._turn_running = False
        self._has_turn = False
        #: held while a message is on its way to the engine: they arrive in the order typed
        self._sending = anyio.Lock()

    # ------------------------------------------------------------------ the session

    @property
    def session_id(self) -> str:
        return self.remote.id if self.remote is not None else "-"

    @property
    def running(self) -> bool:
        return self.remote is not None and (self._turn_running or self.screen.running)

    async def open(self, resume: str | None) -> None:
        """Follow a new session on Temporal, or the live session ``resume`` (its recent history first)."""
        from dsh_temporal import TemporalError

        try:
            if resume is not None:
                remote = await self.agents.get(resume)
            else:
                options = AgentOptions(model=self.model) if self.model else None
                remote = await self.agents.create(new_session_id(), agent_options=options)
        except (TemporalError, DuplicateRegistrationError) as exc:
            raise CliError(str(exc)) from exc
        await self.close()
        self.remote = remote
        after = -1
        if resume is not None:
            last = (await remote.status()).last_seq
            history = await self._history(remote, last)
            self._has_turn = any(event.type == TurnStartEvent.type for event in history)
            self._print_history(history)
            after = history[-1].seq if history else -1
        await self._tasks.start(self._follow, remote, after)
        verb = "resumed" if resume is not None else "new"
        self.screen.print(
            Text.assemble(
                (f"● {verb} session ", "dim"),
                (remote.id, "bold"),
                (f"  ·  on Temporal at {self.agents.config.address}", "dim"),
            )
        )

    async def _history(self, remote: RemoteSession, last_seq: int) -> tuple[SessionEvent, ...]:
        """The session's events up to ``last_seq`` (the last one the engine knows was committed)."""
        events: list[SessionEvent] = []
        if last_seq < 0:
            return ()
        async with aclosing(remote.events()) as stream:
            async for event in stream:
                events.append(event)
                if event.seq >= last_seq:
                    break
        return tuple(events)

    async def _follow(
        self, remote: RemoteSession, after_seq: int, *, task_status: TaskStatus[None]
    ) -> None:
        from dsh_temporal import TemporalError

        with anyio.CancelScope() as scope:
            self._tail = scope
            task_status.started()
            try:
                async with aclosing(remote.events(after_seq)) as stream:
                    async for event in stream:
                        self._on_event(event)
            except TemporalError as exc:
                self.screen.print(Text(f"✗ the session log can no longer be followed: {exc}", style="red"))

    def _on_event(self, event: SessionEvent) -> None:
        if event.type == TurnStartEvent.type:
            self._turn_running = self._has_turn = True
            self.screen.turn_started()
        elif event.type == InboxClearedEvent.type:
            ids = event.data.get("ids")
            self.cleared([str(ident) for ident in ids] if isinstance(ids, tuple | list) else [])
        for note in self._feed.feed(event):
            self.show(note)
        if event.type == TurnEndEvent.type:
            self._turn_running = False
            self.screen.turn_finished()

    async def close(self) -> None:
        """Stop following the session; it (and a running turn) stays on Temporal."""
        if self._tail is not None:
            self._tail.cancel()
            self._tail = None
        self.remote = None
        self._turn_running = False
        self._feed = EventFeed(live=True)
        self.screen.turn_finished()

    def resumable(self) -> str | None:
        return self.remote.id if self.remote is not None and self._has_turn else None

    def cancel(self) -> None:
        remote = self.remote
        if remote is not None:
            self._tasks.start_soon(self._send_cancel, remote)

    async def _send_cancel(self, remote: RemoteSession) -> None:
        from dsh_temporal import TemporalError

        try:
            await remote.cancel()
        except (TemporalError, OSError) as exc:
            self.screen.print(Text(f"✗ the cancel did not reach the engine: {exc}", style="red"))

    # ------------------------------------------------------------------ input

    async def submit(self, line: str) -> bool:
        text = line.strip()
        if not text:
            return True
        if text.startswith("/"):
            name = text.partition(" ")[0]
            if name in _LOCAL_ONLY and not (name == "/model" and text == name):
                self.screen.print(Text(f"{name} is not available over Temporal: {_LOCAL_ONLY[name]}", style="yellow"))
                return True
            return await self.command(text)
        remote = self.remote
        if remote is None:
            self.screen.print(Text("no session: /new or /resume ID", style="red"))
            return True
        steer = self.running
        if not steer:
            self.screen.print(user_line(text, "user"))
            self.screen.turn_started()
        # The Update returns once the engine accepted the message; the input line comes back at
        # once (so Ctrl-C stays a cancel of the turn), and the messages go out in the order typed.
        self._tasks.start_soon(self._deliver, remote, text, steer)
        return True

    async def _deliver(self, remote: RemoteSession, text: str, steer: bool) -> None:
        from dsh_temporal import TemporalError

        async with self._sending:
            try:
                if steer:
                    self.steering[await remote.steer(text)] = text
                    self.screen.note(
                        Text.assemble(("↳ ", "cyan"), (text, "cyan"), ("  (steering: seen at the next step)", "dim"))
                    )
                else:
                    await remote.send(text)  # durable in the engine once this returns
            except (TemporalError, ValueError, TimeoutError) as exc:
                if not steer:
                    self.screen.turn_finished()
                self.screen.print(Text(f"✗ not sent: {exc}", style="red"))

    def status(self) -> str:
        return f"temporal · {super().status()}"

    def _help(self) -> None:
        super()._help()
        self.screen.print(
            Text(
                "On Temporal: the turns run on dsh workers; /sessions, /mode and /compact belong to their "
                "configuration, and the model is fixed at /new.",
                style="dim",
            )
        )


def _temporal_agents(config: EffectiveConfig) -> TemporalAgents:
    """A ``TemporalAgents`` client for ``[plugins.temporal]`` (no store: events come through a worker)."""
    try:
        from dsh_temporal import TemporalAgents, TemporalConfig
    except ImportError as exc:
        from ._install_hints import install_hint

        raise CliError("dsh chat --temporal needs the temporal plugin", hint=install_hint("temporal")) from exc
    table = config.get("plugins.temporal", {})
    known = ("address", "namespace", "task_queue", "heartbeat_timeout")
    try:
        settings = TemporalConfig(**{key: table[key] for key in known if key in table})
    except (TypeError, ValueError) as exc:
        error = ConfigError(f"plugins.temporal: {exc}", path="plugins.temporal")
        raise CliError(config.explain(error)) from exc
    return TemporalAgents.connect(
        address=settings.address,
        namespace=settings.namespace,
        task_queue=settings.task_queue,
        heartbeat_timeout=settings.heartbeat_timeout,
    )


async def temporal_chat_command(config: EffectiveConfig, *, cwd: Path, resume: str | None = None) -> int:
    """Run ``dsh chat --temporal``; returns the exit status."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError("dsh chat needs a terminal; use `dsh run PROMPT` from scripts", code=ExitCode.USAGE)
    from prompt_toolkit.patch_stdout import patch_stdout

    chat: RemoteChatController | None = None

    def cancel() -> None:
        if chat is not None:
            chat.cancel()

    def toolbar() -> str:
        return "dsh · temporal" if chat is None else chat.status()

    screen = ChatScreen(on_cancel=cancel, toolbar=toolbar, history=file_history(os.environ))
    agents = _temporal_agents(config)
    resumable: str | None = None
    async with open_harness(config) as ctx, AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(agents)
        except RuntimeError as exc:  # the SDK's "Failed client connect"
            msg = f"cannot reach Temporal at {agents.config.address} ([plugins.temporal] address): {exc}"
            raise CliError(msg) from exc
        async with anyio.create_task_group() as tasks:
            chat = RemoteChatController(ctx, config, cwd=cwd, screen=screen, agents=agents, tasks=tasks)
            with patch_stdout(raw=True):
                screen.print(
                    Text.assemble(
                        ("dsh", "bold"),
                        (f" · {chat.model} · Temporal {agents.config.address} ({agents.config.task_queue})", "dim"),
                        ("\n/help for commands · type while it works to steer · Ctrl-C cancels", "dim"),
                    )
                )
                await chat.open(resume)
                try:
                    tasks.start_soon(screen.animate)
                    with screen.interrupts(stop_command=chat.stop_command, on_exit=tasks.cancel_scope.cancel):
                        await chat.loop()
                finally:
                    resumable = chat.resumable()
                    await chat.close()
                    tasks.cancel_scope.cancel()
    if resumable is not None:
        Console(highlight=False).print(Text(f"resume with `dsh chat --temporal --resume {resumable}`", style="dim"))
    return int(ExitCode.OK)

