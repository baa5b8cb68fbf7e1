"""A real server for the tests: the app under uvicorn, on a loopback port, in a thread of its own.

The harness (with the app) lives in an anyio blocking portal's thread, on the test's backend
(asyncio or trio; asyncio for a test without one), uvicorn in its own thread on asyncio, and each
test talks to it over real HTTP from its own event loop.
``Served.call`` runs a function in the server's loop (to open a gate, to read a session's log).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import attrs
import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal
from dsh_persistence_jsonl import PersistencePlugin
from dsh_questions import QuestionsPlugin
from dsh_serve import ServePlugin, open_app
from dsh_serve._server import listening
from dsh_todo import TodoPlugin

from dsh_core import Ask, Context, Harness, ToolError, ToolExecution, hookimpl, tool
from dsh_core.testing import ScriptedModel

T = TypeVar("T")

TOKEN = "test-token-0123456789"
MODEL = "scripted/any"


class Gate:
    """A tool body that waits until the test opens it: a turn that stays running on demand."""

    def __init__(self) -> None:
        self.opened: anyio.Event | None = None
        self.entered: anyio.Event | None = None

    def start(self, ctx: Context) -> None:
        self.opened = anyio.Event()
        self.entered = anyio.Event()

        @tool
        async def wait_gate() -> str:
            """Wait until the test opens the gate."""
            assert self.opened is not None
            assert self.entered is not None
            self.entered.set()
            await self.opened.wait()
            return "the gate opened"

        ctx.tools.register(wait_gate)


class _ModelPlugin:
    """The scripted model, the gate, and ``write_note``: a tool that asks for approval first."""

    name = "test-model"

    def __init__(self, model: ScriptedModel, gate: Gate, notes: list[str]) -> None:
        self.model = model
        self.gate = gate
        self.notes = notes

    def start(self, ctx: Context) -> None:
        ctx.llm.register_adapter(self.model.provider, self.model)
        self.gate.start(ctx)
        notes = self.notes

        @tool
        def write_note(text: str) -> str:
            """Write a note (asks for approval first)."""
            notes.append(text)
            return f"noted: {text}"

        ctx.tools.register(write_note)

        @tool
        def edit_file(path: str, old_text: str, new_text: str) -> str:
            """Replace text in a file (a stand-in: it fails when old_text is 'missing')."""
            if old_text == "missing":
                raise ToolError(f"{path}: old_text not found")
            return f"edited {path}"

        ctx.tools.register(edit_file)

    @hookimpl
    def dsh_tools_pre_execute(self, execution: ToolExecution) -> Ask | None:
        if execution.name == "write_note":
            return Ask("it writes a note")
        return None


@attrs.define
class Served:
    """A running server: its URL and token, its harness, and a way into its event loop."""

    url: str
    token: str
    ctx: Context
    model: ScriptedModel
    gate: Gate
    portal: BlockingPortal
    root: Path
    #: what ``write_note`` wrote, in order
    notes: list[str]

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        """A client of this server that sends the token (its own event loop's)."""
        return httpx.AsyncClient(base_url=self.url, headers=self.auth, timeout=30, **kwargs)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the server's event loop (awaited there if it is a coroutine function)."""
        return await anyio.to_thread.run_sync(self.portal.call, fn, *args)

    async def open_gate(self) -> None:
        assert self.gate.opened is not None
        await self.call(self.gate.opened.set)

    async def wait_gate_entered(self) -> None:
        assert self.gate.entered is not None
        await self.call(self.gate.entered.wait)

    def wait_gate_entered_blocking(self) -> None:
        """``wait_gate_entered`` for a test without an event loop (the browser tests)."""
        assert self.gate.entered is not None
        self.portal.call(self.gate.entered.wait)

    def open_gate_blocking(self) -> None:
        assert self.gate.opened is not None
        self.portal.call(self.gate.opened.set)

    async def append_compaction(self, session_id: str) -> int:
        """Log a ``compaction/summary`` in the session as the compaction plugin does (its facts, the
        summary message aside); returns its seq."""

        def append() -> int:
            agent = self.ctx.agents.get(session_id)
            assert agent is not None, f"session {session_id} is not live"
            facts = {"reason": "threshold", "turn": 1, "step": 1, "tokens_before": 9000, "tokens_after": 1200}
            return agent.session.append("compaction/summary", facts).seq

        seq: int = await self.call(append)
        return seq

    async def events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's live log as JSON, read in the server's loop."""

        def read() -> list[dict[str, Any]]:
            agent = self.ctx.agents.get(session_id)
            assert agent is not None, f"session {session_id} is not live"
            return [event.to_json() for event in agent.session.events]

        events: list[dict[str, Any]] = await self.call(read)
        return events


@asynccontextmanager
async def _serving(
    root: Path, model: ScriptedModel, serve: dict[str, Any], cwd: Path, notes: list[str]
) -> AsyncIterator[tuple[str, Context, Gate]]:
    gate = Gate()
    config = {"plugins": {"persistence-jsonl": {"root": str(root), "batch_delay": 0.0}, "serve": serve}}
    plugin = ServePlugin()
    plugins = [PersistencePlugin(), _ModelPlugin(model, gate, notes), TodoPlugin(), QuestionsPlugin(), plugin]
    async with Harness(config=config, plugins=plugins, autoload=False) as ctx:
        async with open_app(ctx, config=plugin.config, token=TOKEN, model=MODEL, cwd=cwd) as app:
            async with listening(app) as url:
                yield url, ctx, gate


@contextmanager
def serving(
    root: Path, cwd: Path, model: ScriptedModel | None = None, *, backend: str = "asyncio", **serve: Any
) -> Iterator[Served]:
    """Start a server over the sessions stored in ``root``; stop it (and its harness) on exit.

    The harness (and the app) run on ``backend``'s loop in a thread of their own, uvicorn on another.
    """
    model = model or ScriptedModel(checkpoints=True)
    notes: list[str] = []
    with start_blocking_portal(backend) as portal:
        with portal.wrap_async_context_manager(_serving(root, model, serve, cwd, notes)) as (url, ctx, gate):
            yield Served(url=url, token=TOKEN, ctx=ctx, model=model, gate=gate, portal=portal, root=root, notes=notes)


@asynccontextmanager
async def serving_async(root: Path, cwd: Path, model: ScriptedModel | None = None, **options: Any) -> AsyncIterator[Served]:
    """``serving`` from inside a test's event loop: the portal is entered and left in a worker thread
    (trio refuses a blocking portal call from its own thread)."""
    manager = serving(root, cwd, model, **options)
    served = await anyio.to_thread.run_sync(manager.__enter__)
    try:
        yield served
    finally:
        await anyio.to_thread.run_sync(manager.__exit__, None, None, None)


@attrs.frozen
class SseEvent:
    id: str | None
    event: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


class Follower:
    """Reads one SSE response as a browser would: events (and comment lines) as they arrive.

    It holds one line iterator for the response's life and drains it at the end, so leaving a
    stream midway abandons none of httpx's nested generators (trio reports those, encode/httpx#3686).
    """

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()
        self.comments: list[str] = []

    async def next(self) -> SseEvent | str | None:
        """The next event or comment line; ``None`` when the stream has ended."""
        fields: dict[str, list[str]] = {}
        async for line in self._lines:
            if line == "":
                if "data" in fields:
                    return SseEvent(
                        id=fields.get("id", [None])[-1],
                        event=fields.get("event", [None])[-1],
                        data="\n".join(fields["data"]),
                    )
                fields = {}
                continue
            if line.startswith(":"):
                self.comments.append(line)
                return line
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
        return None

    async def until(self, done: Callable[[SseEvent], bool]) -> list[SseEvent]:
        """The events up to and including the first one ``done`` accepts."""
        seen: list[SseEvent] = []
        while True:
            item = await self.next()
            if item is None:
                msg = f"the stream ended after {len(seen)} events without the one awaited"
                raise AssertionError(msg)
            if isinstance(item, SseEvent):
                seen.append(item)
                if done(item):
                    return seen

    async def rest(self) -> list[SseEvent]:
        """Every event until the server ends the stream."""
        seen: list[SseEvent] = []
        while (item := await self.next()) is not None:
            if isinstance(item, SseEvent):
                seen.append(item)
        return seen

    async def release(self) -> None:
        if getattr(self._lines, "ag_frame", None) is None:
            return
        await self.response.aclose()
        with contextlib.suppress(Exception):  # reading the closed response is meant to fail
            async for _ in self._lines:
                pass


@asynccontextmanager
async def follow(
    client: httpx.AsyncClient, session_id: str, *, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> AsyncIterator[Follower]:
    """Follow a session's live log (``GET /api/sessions/{id}/events``)."""
    async with client.stream("GET", f"/api/sessions/{session_id}/events", params=params, headers=headers) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        follower = Follower(response)
        try:
            yield follower
        finally:
            await follower.release()


def turn_ended(event: SseEvent) -> bool:
    return event.event == "turn/end"
