"""The turn activity: resume the session from the shared store, feed it its messages, run, summarise.

One ``dsh.run_turn`` activity runs every turn the pending messages need, on the worker's harness
(the full plugin set, anyio on the worker's asyncio loop). After the turn the agent stays warm on
this worker, and the workflow sends the session's next turn to this worker's own task queue, so a
turn reloads the log only after a worker was lost (or the agent sat idle for ``WARM_IDLE``).
A cold start resumes from the store, whose crash repair runs first: a turn retried after its
worker died finds the in-flight tool call flagged ``TOOL_OUTCOME_UNKNOWN``, and the activity then
runs one more turn so the model decides what to do about it. While the turn runs the activity heartbeats at least every second (so a cancel
reaches it quickly) and, from the second second on, asks the workflow for messages that arrived
meanwhile (steering reaches the running turn at its next step). It returns a small summary.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from dsh_core import AgentHandle, AgentOptions, ApprovalNotPendingError, UserMessage

from ._log_reading import inject_key, injects_after, interrupted_turn, outcomes_of, turns_started
from ._types import ApprovalRequest, PendingMessage, TurnInput, TurnSummary
from ._workflow import RUN_TURN

if TYPE_CHECKING:
    from collections import Counter

    from dsh_core import Context, Session
    from dsh_core.vocabulary import Agent


class _Stop:
    """Set when the engine cancels the activity; ``hand_back`` when this worker is shutting down;
    ``parked`` when a call waits for approval (the activity lets go of the parked turn)."""

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.hand_back = False
        self.parked = anyio.Event()

__all__ = ["TurnRunner"]

logger = logging.getLogger("dsh.temporal")

#: how often the running turn asks the workflow for messages that arrived meanwhile
POLL_INTERVAL = 1.0

#: a warm agent idle this long is disposed, releasing its session to any worker
WARM_IDLE = 60.0

#: the source of the prompt a retried turn sends so the model sees what the lost worker left
RESUMED_SOURCE = {"kind": "plugin", "plugin": "temporal"}
RESUMED_TEXT = (
    "The worker running the previous turn stopped before it ended; the turn was interrupted. "
    "Tool calls whose outcome is unknown are marked so. Check their effects, then continue."
)


def heartbeat_interval(heartbeat_timeout: float) -> float:
    """At least every second, and well inside the timeout (SPEC §9.7: a cancel arrives within 2 s)."""
    return min(1.0, heartbeat_timeout / 3)


def takes_inject_id(agent: Agent) -> bool:
    """Whether ``agent.inject`` takes a caller-chosen ``id`` (idempotent per id, like ``send``)."""
    try:
        return "id" in inspect.signature(agent.inject).parameters
    except (TypeError, ValueError):
        return False


class _Fed:
    """What this attempt handed the agent, and (on a retry) the injects the lost attempt logged."""

    def __init__(self, logged_injects: Counter[str] | None) -> None:
        self.ids: set[str] = set()
        #: injects after the turn's ``after_seq`` in the log, still to be matched (a retry only)
        self._logged = logged_injects

    def feed(self, agent: Agent, message: PendingMessage) -> None:
        """Hand one engine message to the agent under its id, once.

        Sends and steers are idempotent per id in the agent, and so are injects where
        ``agent.inject`` takes an ``id``. Where it does not, a retried attempt skips an inject the
        lost attempt already logged (same content and source after the turn's ``after_seq``), one
        logged copy for each.
        """
        if message.id in self.ids:
            return
        self.ids.add(message.id)
        data: dict[str, Any] = {"role": "user", "id": message.id, "content": message.content}
        content = UserMessage.from_json(data, field=f"{message.kind}.message").content
        if message.kind == "steer":
            agent.steer(content, message.source, id=message.id)
        elif message.kind == "inject":
            if takes_inject_id(agent):  # the agent is idempotent per id: the log has our id
                inject: Any = agent.inject
                inject(content, message.source, id=message.id)
                return
            key = inject_key(message.content, message.source)
            if self._logged and self._logged[key] > 0:
                self._logged[key] -= 1
                return
            agent.inject(content, message.source)
        else:
            agent.send(content, message.source, id=message.id)


class _Warm:
    """An agent kept live after its turn, and since when it is idle."""

    __slots__ = ("handle", "since")

    def __init__(self, handle: AgentHandle, since: float) -> None:
        self.handle = handle
        self.since = since


class TurnRunner:
    """Holds the worker's harness and client; ``run_turn`` is the registered activity."""

    def __init__(
        self, ctx: Context, client: Client, *, warm_queue: str | None = None, warm_idle: float = WARM_IDLE
    ) -> None:
        self._ctx = ctx
        self._client = client
        #: this worker's own task queue: a session's next turn comes there while its agent is warm
        self.warm_queue = warm_queue
        self._warm_idle = warm_idle
        self._warm: dict[str, _Warm] = {}
        #: the agents running a turn on this worker, by session id
        self._running: dict[str, AgentHandle] = {}

    def live_session(self, session_id: str) -> Session | None:
        """The session if its agent is live on this worker (running a turn, or warm), else ``None``."""
        handle = self._running.get(session_id)
        if handle is None:
            warm = self._warm.get(session_id)
            handle = None if warm is None else warm.handle
        if handle is None or handle.agent.status == "disposed":
            return None
        return handle.agent.session

    @activity.defn(name=RUN_TURN)
    async def run_turn(self, turn: TurnInput) -> TurnSummary:
        """Run the session's pending work; a cancel from the engine aborts the running turn."""
        stop = _Stop()
        body = asyncio.ensure_future(self._run(turn, stop))
        try:
            return await asyncio.shield(body)
        except asyncio.CancelledError:
            if body.done():
                raise
            # Cancelled by the engine (a user's cancel: the turn ends `aborted`) or by this
            # worker shutting down past its grace period (the agent is disposed, its turn ends
            # `disposed`, and the retried activity continues it on another worker).
            stop.hand_back = activity.is_worker_shutdown()
            stop.event.set()
            summary = await body
            if stop.hand_back:
                msg = "the worker shut down while the turn ran; another worker continues the session"
                raise ApplicationError(msg, type="WorkerShutdown") from None
            return summary

    async def _run(self, turn: TurnInput, stop: _Stop) -> TurnSummary:
        spec = turn.spec
        info = activity.info()
        warm = self._warm.pop(spec.session_id, None)
        if warm is not None and warm.handle.agent.status != "disposed":
            handle, cold = warm.handle, False  # this worker ran the last turn: no reload
        else:
            handle, cold = await self._open(turn), True
        keep = False
        self._running[spec.session_id] = handle
        try:
            agent = handle.agent
            start_seq = len(agent.session.events) - 1
            lost = interrupted_turn(agent.session.events) if cold else None
            retried = info.attempt > 1
            fed = _Fed(injects_after(agent.session.events, turn.after_seq) if retried else None)
            for message in turn.messages:
                fed.feed(agent, message)
            if lost is not None:  # the model decides what to do about the lost worker's turn
                agent.send(RESUMED_TEXT, RESUMED_SOURCE, id=f"{info.workflow_id}/resumed-turn-{lost}")
            await _answer_parked(agent, turn)
            waiting: list[ApprovalRequest] = []
            forget = self._on_wait(spec.session_id, stop.parked.set)
            try:
                await self._drive(handle, turn, fed, stop)
            finally:
                forget()
            if stop.parked.is_set() and not stop.event.is_set():
                waiting = [
                    ApprovalRequest(p.call_id, p.tool, dict(p.arguments), p.reason, p.seq)
                    for p in agent.pending_approvals()
                ]
                await handle.dispose()  # the turn stays parked in the log; no slot is held while it waits
            if not stop.hand_back and agent.status != "disposed":
                await self._ctx.sessions.flush(agent.session)
            keep = self.warm_queue is not None and not stop.hand_back and agent.status != "disposed"
            events = agent.session.events
            return TurnSummary(
                last_seq=len(events) - 1,
                logged=sorted(fed.ids),
                outcomes=outcomes_of(events, set(turn.awaited)),
                turns=turns_started(events, start_seq),
                cwd=str(agent.session.meta.cwd or turn.cwd or os.getcwd()),
                cancelled=stop.event.is_set(),
                warm_queue=self.warm_queue if keep else None,
                approvals=waiting,
            )
        finally:
            self._running.pop(spec.session_id, None)
            if keep:
                self._warm[spec.session_id] = _Warm(handle, anyio.current_time())
            else:
                await handle.dispose()

    def _on_wait(self, session_id: str, park: Callable[[], None]) -> Callable[[], None]:
        """Have the worker's ``approval`` service call ``park`` when a call of this session waits."""
        asks = self._ctx.get_service("approval")
        on_wait = getattr(asks, "on_wait", None)
        if on_wait is None:
            return lambda: None
        remove: Callable[[], None] = on_wait(session_id, park)
        return remove

    async def _open(self, turn: TurnInput) -> AgentHandle:
        """Resume the session from the store (its crash repair runs first), or create it."""
        ctx = self._ctx
        spec = turn.spec
        persistence = ctx.get_service("session_persistence")
        if persistence is None:
            msg = (
                "a dsh worker needs a shared session store: enable a persistence plugin "
                "(persistence-postgres across hosts, persistence-jsonl on one host)"
            )
            raise ApplicationError(msg, type="ConfigError", non_retryable=True)
        try:
            options = AgentOptions(**spec.agent_options)
        except (TypeError, ValueError) as exc:
            raise ApplicationError(f"agent_options: {exc}", type="ConfigError", non_retryable=True) from exc
        handle: AgentHandle
        if await persistence.exists(spec.session_id):
            handle = await ctx.agents.resume(spec.session_id, agent_options=options, run_pending=True)
            return handle
        cwd = turn.cwd or os.getcwd()
        meta: dict[str, Any] = {"cwd": cwd, "extra": spec.meta} if spec.meta else {"cwd": cwd}
        handle = await ctx.agents.create(spec.session_id, meta=meta, agent_options=options)
        return handle

    # ------------------------------------------------------------------ warm agents

    async def evict_idle(self) -> None:
        """Dispose warm agents idle for ``warm_idle`` seconds (their sessions are free again); forever."""
        while True:
            await anyio.sleep(self._warm_idle / 4)
            now = anyio.current_time()
            for session_id, warm in list(self._warm.items()):
                if now - warm.since >= self._warm_idle and self._warm.get(session_id) is warm:
                    del self._warm[session_id]
                    await warm.handle.dispose()

    async def close(self) -> None:
        """Dispose every warm agent (the worker is stopping)."""
        while self._warm:
            _, warm = self._warm.popitem()
            await warm.handle.dispose()

    async def _drive(self, handle: AgentHandle, turn: TurnInput, fed: _Fed, stop: _Stop) -> None:
        """Wait for the agent to go idle while heartbeating, polling and listening for a cancel."""
        agent = handle.agent
        beat = heartbeat_interval(turn.spec.heartbeat_timeout)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_every, beat, lambda: _heartbeat(agent))
            tg.start_soon(_cancel_on, stop, handle)
            async with anyio.create_task_group() as polls:
                polls.start_soon(_every, POLL_INTERVAL, lambda: self._take_new(agent, fed), True)
                polls.start_soon(_cancel_when, stop.parked, polls.cancel_scope)
                await agent.when_idle()
                polls.cancel_scope.cancel()
            if not stop.parked.is_set():
                await agent.when_idle()  # a message the last poll fed just before it stopped
            tg.cancel_scope.cancel()

    async def _take_new(self, agent: Agent, fed: _Fed) -> None:
        info = activity.info()
        handle = self._client.get_workflow_handle(str(info.workflow_id), run_id=info.workflow_run_id)
        try:
            pending = await handle.query("pending", result_type=list[PendingMessage])
        except Exception:  # noqa: BLE001 - a failed poll is retried at the next tick
            logger.warning("session %s: asking the workflow for new messages failed", info.workflow_id)
            return
        for message in pending:
            fed.feed(agent, message)


async def _answer_parked(agent: Agent, turn: TurnInput) -> None:
    """Apply what the engine accepted for the parked turn: its answers, or its cancel."""
    for answer in turn.resolutions:
        try:
            await agent.resolve_approval(
                answer.call_id, answer.decision, reason=answer.reason, arguments=answer.arguments, by=answer.by
            )
        except ApprovalNotPendingError:
            logger.info("session %s: call %s was resolved already", agent.id, answer.call_id)
        except (TypeError, ValueError) as exc:  # an edit the tool refuses: the call keeps waiting
            logger.warning("session %s: the answer for call %s was refused: %s", agent.id, answer.call_id, exc)
    if turn.cancel_parked:
        agent.cancel()


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def _every(interval: float, action: Callable[[], Awaitable[None] | None], delay: bool = False) -> None:
    if delay:
        await anyio.sleep(interval)
    while True:
        result = action()
        if result is not None:
            await result
        await anyio.sleep(interval)


def _heartbeat(agent: Agent) -> None:
    activity.heartbeat(len(agent.session.events) - 1)


async def _cancel_on(stop: _Stop, handle: AgentHandle) -> None:
    await stop.event.wait()
    if stop.hand_back:
        await handle.dispose()
    else:
        handle.agent.cancel()
