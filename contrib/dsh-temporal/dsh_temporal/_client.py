"""``TemporalAgents``: the client of sessions hosted on Temporal, with the verbs of a local agent.

``create`` starts a session's workflow (``dsh-session/<id>``; a second create of a live id is
refused), ``get`` finds one. A ``RemoteSession`` sends, steers and injects through Updates (each
returns once the engine accepted the message; the returned id is the Update's id), cancels through
a Signal, asks its status through a Query, and tails the session log with ``events()``: from the
shared store when the client was given ``persistence=``, else through a worker (the
``dsh.read_events`` standalone activity, on the worker holding the session's agent when there is
one). Temporal's SDK is asyncio-only, so this client runs on asyncio.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncGenerator, Awaitable, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import anyio.lowlevel
from temporalio.client import (
    ActivityFailureError,
    Client,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import RetryPolicy, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import TimeoutError as TemporalTimeoutError
from temporalio.exceptions import TimeoutType, WorkflowAlreadyStartedError
from temporalio.service import RPCError

from dsh_core import (
    AgentOptions,
    ApprovalNotPendingError,
    AssistantMessage,
    DshError,
    DuplicateRegistrationError,
    Image,
    PendingApproval,
    SessionEvent,
    Text,
    TurnOutcome,
    UserMessage,
)
from dsh_core.vocabulary import FrozenDict

from ._config import TemporalConfig
from ._reading import READ_EVENTS
from ._store_reader import StoreReader
from ._types import (
    ApprovalRequest,
    ApprovalResolution,
    EventBatch,
    MessageKind,
    PendingMessage,
    ReadRequest,
    SessionSpec,
    SessionStatus,
    StartInput,
    workflow_id,
)
from ._workflow import WARM_QUEUE_MEMO, SessionWorkflow, workflow_task_timeout

__all__ = ["RemoteSession", "SessionNotFoundError", "TemporalAgents", "TemporalError"]

_T = TypeVar("_T")

#: how often ``events()`` looks at the store for new events
TAIL_INTERVAL = 0.1

#: how long one ``dsh.read_events`` waits on the worker for a first new event
READ_WAIT = 10.0


class TemporalError(DshError, RuntimeError):
    """The engine refused a request (the message names the session and the engine's reason)."""


class SessionNotFoundError(TemporalError, LookupError):
    """No live workflow hosts that session."""


def _content_json(content: str | Sequence[Text | Image], source: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Check content like a local send does (TypeError/ValueError) and give its blocks as JSON."""
    message = UserMessage(content=content) if source is None else UserMessage(content=content, source=source)
    return [block.to_json() for block in message.content]


class TemporalAgents:
    """Sessions on Temporal: ``async with TemporalAgents.connect(...) as agents:``.

    ``persistence`` names the shared store's plugin configuration (for example
    ``{"persistence-jsonl": {"root": "/srv/sessions"}}``); ``events()`` reads the log there.
    Without it, ``events()`` reads the log through a worker.
    """

    def __init__(
        self,
        *,
        address: str = "127.0.0.1:7233",
        namespace: str = "default",
        task_queue: str = "dsh",
        heartbeat_timeout: float = 10.0,
        persistence: Mapping[str, Mapping[str, Any]] | None = None,
        client: Client | None = None,
    ) -> None:
        self.config = TemporalConfig(
            address=address, namespace=namespace, task_queue=task_queue, heartbeat_timeout=heartbeat_timeout
        )
        self._persistence = None if persistence is None else {k: dict(v) for k, v in persistence.items()}
        self._client = client
        self._reader: StoreReader | None = None
        self._entered = False

    @classmethod
    def connect(
        cls,
        *,
        address: str = "127.0.0.1:7233",
        namespace: str = "default",
        task_queue: str = "dsh",
        heartbeat_timeout: float = 10.0,
        persistence: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> TemporalAgents:
        """A client to enter with ``async with``; it connects on entry and closes the store on exit."""
        return cls(
            address=address,
            namespace=namespace,
            task_queue=task_queue,
            heartbeat_timeout=heartbeat_timeout,
            persistence=persistence,
        )

    async def __aenter__(self) -> Self:
        if self._entered:
            msg = "this TemporalAgents is already open; connect() a new one"
            raise RuntimeError(msg)
        self._entered = True
        if self._client is None:
            self._client = await Client.connect(self.config.address, namespace=self.config.namespace)
        if self._persistence is not None:
            self._reader = StoreReader(self._persistence)
            await self._reader.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._reader is not None:
            await self._reader.close()
            self._reader = None

    @property
    def client(self) -> Client:
        if self._client is None:
            msg = "TemporalAgents is not connected: use `async with TemporalAgents.connect(...) as agents`"
            raise RuntimeError(msg)
        return self._client

    async def create(
        self,
        session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        cwd: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> RemoteSession:
        """Start the session's workflow; its ``heartbeat_timeout`` and ``cwd`` are fixed now.

        :raises DuplicateRegistrationError: a workflow for that session id exists.
        """
        if not isinstance(session_id, str) or not session_id:
            msg = f"session_id must be a non-empty str, got {session_id!r}"
            raise (TypeError if not isinstance(session_id, str) else ValueError)(msg)
        if agent_options is not None and not isinstance(agent_options, AgentOptions):
            msg = f"agent_options must be an AgentOptions or None, got {type(agent_options).__name__}"
            raise TypeError(msg)
        options = agent_options or AgentOptions()
        spec = SessionSpec(
            session_id=session_id,
            agent_options={
                key: value
                for key, value in (
                    ("model", options.model),
                    ("max_tokens", options.max_tokens),
                    ("temperature", options.temperature),
                )
                if value is not None
            },
            cwd=cwd,
            heartbeat_timeout=self.config.heartbeat_timeout,
            meta=dict(meta or {}),
        )
        try:
            handle = await self.client.start_workflow(
                SessionWorkflow.run,
                StartInput(spec),
                id=workflow_id(session_id),
                task_queue=self.config.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                # A workflow task handed to a worker that dies moves on after this, not 10 s.
                task_timeout=workflow_task_timeout(self.config.heartbeat_timeout),
            )
        except WorkflowAlreadyStartedError as exc:
            msg = (
                f"session {session_id!r} already exists on Temporal (workflow {workflow_id(session_id)!r}); "
                "use agents.get(session_id) to continue it, or pick another id"
            )
            raise DuplicateRegistrationError(msg) from exc
        return RemoteSession(self, session_id, handle)

    async def get(self, session_id: str) -> RemoteSession:
        """The live session ``session_id``.

        :raises SessionNotFoundError: no running workflow hosts it.
        """
        handle = self.client.get_workflow_handle(workflow_id(session_id))
        try:
            description = await handle.describe()
        except RPCError as exc:
            msg = f"no session {session_id!r} on Temporal (workflow {workflow_id(session_id)!r}): {exc.message}"
            raise SessionNotFoundError(msg) from exc
        if description.status is None or description.status.name != "RUNNING":
            status = "unknown" if description.status is None else description.status.name.lower()
            msg = f"session {session_id!r} is not live on Temporal (its workflow is {status})"
            raise SessionNotFoundError(msg)
        return RemoteSession(self, session_id, self.client.get_workflow_handle(workflow_id(session_id)))

    async def pending_approvals(self, session_id: str, *, wait: bool = False) -> tuple[PendingApproval, ...]:
        """The calls of session ``session_id`` waiting for approval (``wait``: once there is one)."""
        return await (await self.get(session_id)).pending_approvals(wait=wait)

    async def resolve_approval(
        self,
        session_id: str,
        call_id: str,
        decision: str,
        *,
        reason: str | None = None,
        arguments: Mapping[str, Any] | str | None = None,
        by: str = "api",
    ) -> dict[str, Any]:
        """Answer call ``call_id`` of session ``session_id`` (SPEC §10.1): a workflow update; the
        parked turn goes on on any worker. See ``RemoteSession.resolve_approval``."""
        session = await self.get(session_id)
        return await session.resolve_approval(call_id, decision, reason=reason, arguments=arguments, by=by)

    @property
    def reader(self) -> StoreReader | None:
        return self._reader


class RemoteSession:
    """One session hosted on Temporal; made by ``TemporalAgents.create`` or ``get``."""

    def __init__(self, agents: TemporalAgents, session_id: str, handle: WorkflowHandle[Any, Any]) -> None:
        self._agents = agents
        self._handle = handle
        self.id = session_id

    async def send(
        self,
        content: str | Sequence[Text | Image],
        source: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - SPEC §9.7 names it; a cancel scope alone cannot withdraw
    ) -> str:
        """Queue a prompt; returns its id once the engine accepted it.

        With no worker running this waits until one accepts it; past ``timeout`` seconds it raises
        ``TimeoutError`` and the message is not queued.
        """
        return await self._message("send", content, source, timeout)

    async def inject(
        self,
        content: str | Sequence[Text | Image],
        source: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - as send()
    ) -> str:
        """Add model-visible context without starting a turn; returns its id once the engine accepted it.

        While a turn runs it lands at that turn's next step; while idle a worker appends it to the
        log at once (``context/message``) and it rides with the next turn. ``timeout`` as ``send``.
        """
        return await self._message("inject", content, source or {"kind": "context"}, timeout)

    async def steer(
        self,
        content: str | Sequence[Text | Image],
        source: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - SPEC §9.7 names it; a cancel scope alone cannot withdraw
    ) -> str:
        """Steer the running turn at its next step (idle: like ``send``); returns the id."""
        return await self._message("steer", content, source or {"kind": "steering"}, timeout)

    async def run(self, content: str | Sequence[Text | Image], source: Mapping[str, Any] | None = None) -> TurnOutcome:
        """Send a prompt and wait for the turn that consumes it; returns how that turn ended."""
        message = PendingMessage("", "send", _content_json(content, source), None if source is None else dict(source))
        outcome = await self._update("run", message, uuid.uuid4().hex, None)
        raw = outcome.get("message")
        last = None if raw is None else AssistantMessage.from_json(raw, field="outcome.message")
        return TurnOutcome(outcome["reason"], last)

    async def pending_approvals(self, *, wait: bool = False) -> tuple[PendingApproval, ...]:
        """The calls of the session's parked turn waiting for approval (SPEC §10.1); with ``wait``,
        once there is at least one."""
        if wait:
            found = await _cancellable(
                self._handle.execute_update("wait_approvals", id=uuid.uuid4().hex, result_type=list[ApprovalRequest])
            )
        else:
            found = await self._handle.query("approvals", result_type=list[ApprovalRequest])
        return tuple(
            PendingApproval(item.call_id, item.tool, FrozenDict(item.arguments), item.reason, item.seq)
            for item in found
        )

    async def resolve_approval(
        self,
        call_id: str,
        decision: str,
        *,
        reason: str | None = None,
        arguments: Mapping[str, Any] | str | None = None,
        by: str = "api",
    ) -> dict[str, Any]:
        """Answer a waiting call through the engine (a workflow update); the next turn activity, on any
        worker, applies it and the parked turn goes on. Returns the accepted answer.

        :raises ApprovalNotPendingError: ``call_id`` is not waiting (unknown, or answered already).
        :raises ValueError: a malformed decision or ``by``.
        """
        edited = dict(arguments) if isinstance(arguments, Mapping) else arguments
        answer = ApprovalResolution(call_id, decision, reason, edited, by)
        try:
            result: dict[str, Any] = await _cancellable(
                self._handle.execute_update("resolve_approval", answer, id=uuid.uuid4().hex, result_type=dict)
            )
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            text = getattr(cause, "message", None) or str(cause or exc)
            if "is not pending" in text:
                raise ApprovalNotPendingError(text, session_id=self.id, call_id=call_id) from exc
            msg = f"session {self.id!r} refused the answer: {text}"
            raise ValueError(msg) from exc
        return result

    async def cancel(self) -> None:
        """Stop the running turn (it ends ``aborted``) and drop what is pending."""
        await self._handle.signal(SessionWorkflow.cancel)

    async def when_idle(self) -> None:
        """Return once nothing runs or waits to run."""
        await _cancellable(self._handle.execute_update("wait_idle", id=uuid.uuid4().hex, result_type=int))

    async def status(self) -> SessionStatus:
        """Whether a turn runs, how many messages wait, the last committed seq."""
        return await self._handle.query(SessionWorkflow.status)

    async def close(self) -> None:
        """End the session's workflow after its running turn (the log stays in the store)."""
        await self._handle.signal(SessionWorkflow.close)

    async def events(self, after_seq: int = -1) -> AsyncGenerator[SessionEvent, None]:
        """The session's log after ``after_seq``, then live events as they are stored, until you stop.

        Only durable events come: from the shared store when the client has ``persistence=``,
        else through a worker (the one holding the session's agent answers from memory once its
        log is durable up to there; another one reads the store). A session with no event yet
        waits for its first one; with no worker running, a store-less client waits for one.

        :raises TemporalError: a worker could not read the log (the message says why).
        """
        reader = self._agents.reader
        last = after_seq
        while True:
            if reader is None:
                batch = [SessionEvent.from_json(raw) for raw in await self._read_through_worker(last)]
            else:
                batch = await reader.read_after(self.id, last)
            for event in batch:
                if event.seq <= last:
                    continue
                last = event.seq
                yield event
            if reader is not None:
                await anyio.sleep(TAIL_INTERVAL)

    async def _read_through_worker(self, after_seq: int) -> list[dict[str, Any]]:
        """One ``dsh.read_events``: on the warm worker's queue if the memo names one, else the shared queue."""
        config = self._agents.config
        try:
            description = await self._handle.describe()
        except RPCError as exc:
            msg = f"no session {self.id!r} on Temporal (workflow {workflow_id(self.id)!r}): {exc.message}"
            raise SessionNotFoundError(msg) from exc
        warm = (await description.memo()).get(WARM_QUEUE_MEMO)
        request = ReadRequest(self.id, after_seq, READ_WAIT)
        if isinstance(warm, str):
            try:
                return await self._read_on(request, warm, within=min(2.0, config.heartbeat_timeout))
            except _NotStarted:
                pass  # the warm worker is gone: any worker reads the store
        return await self._read_on(request, config.task_queue, within=None)

    async def _read_on(self, request: ReadRequest, queue: str, *, within: float | None) -> list[dict[str, Any]]:
        config = self._agents.config
        handle = await self._agents.client.start_activity(
            READ_EVENTS,
            request,
            id=f"dsh-events/{self.id}/{uuid.uuid4().hex}",
            task_queue=queue,
            result_type=EventBatch,
            schedule_to_start_timeout=None if within is None else timedelta(seconds=within),
            start_to_close_timeout=timedelta(seconds=request.wait + 30),
            heartbeat_timeout=timedelta(seconds=config.heartbeat_timeout),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=0.5),
                maximum_interval=timedelta(seconds=5),
                non_retryable_error_types=["ConfigError", "EventTooLarge", "SessionCorruptError"],
            ),
        )
        answered = False
        try:
            batch: EventBatch = await handle.result()
            answered = True
        except ActivityFailureError as exc:
            answered = True
            cause = exc.cause
            if isinstance(cause, TemporalTimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START:
                raise _NotStarted from exc
            text = getattr(cause, "message", None) or str(cause or exc)
            msg = f"session {self.id!r}: a worker could not read its log: {text}"
            raise TemporalError(msg) from exc
        finally:
            if not answered:  # the caller stopped reading: do not leave the read waiting on a worker
                with anyio.move_on_after(5, shield=True):
                    try:
                        await handle.cancel()
                    except RPCError:  # it ended meanwhile, or the engine is gone: nothing waits
                        pass
        return batch.events

    # ------------------------------------------------------------------ plumbing

    async def _message(
        self,
        kind: MessageKind,
        content: Any,
        source: Mapping[str, Any] | None,
        timeout: float | None,  # noqa: ASYNC109 - see send()
    ) -> str:
        message = PendingMessage("", kind, _content_json(content, source), None if source is None else dict(source))
        ident = uuid.uuid4().hex
        result = await self._update("inject" if kind == "inject" else "send", message, ident, timeout)
        return str(result)

    async def _update(
        self,
        name: str,
        message: PendingMessage,
        ident: str,
        timeout: float | None,  # noqa: ASYNC109 - see send()
    ) -> Any:
        deadline = anyio.current_time() + timeout if timeout is not None else math.inf
        with anyio.CancelScope(deadline=deadline) as scope:
            try:
                return await _cancellable(self._handle.execute_update(name, message, id=ident))
            except WorkflowUpdateRPCTimeoutOrCancelledError:
                if not scope.cancel_called:  # the RPC gave up: not our deadline
                    raise
            except WorkflowUpdateFailedError as exc:
                cause = exc.cause
                text = getattr(cause, "message", None) or str(cause or exc)
                msg = f"session {self.id!r} refused the {name}: {text}"
                raise ValueError(msg) from exc
            except RPCError as exc:
                msg = f"session {self.id!r}: the engine refused the {name}: {exc.message}"
                raise TemporalError(msg) from exc
        # Not accepted in time: withdraw it, so a worker arriving later never queues it.
        with anyio.move_on_after(10, shield=True):
            await self._handle.signal(SessionWorkflow.withdraw, ident)
        msg = f"session {self.id!r}: no worker accepted the {name} within {timeout}s; it was not queued"
        raise TimeoutError(msg)


class _NotStarted(Exception):
    """A read sent to the warm worker's queue was not taken in time (that worker is gone)."""


async def _cancellable(update: Awaitable[_T]) -> _T:
    """Await an update call; a cancel stays a cancel.

    The SDK turns the cancellation of a waiting update call into its own
    ``WorkflowUpdateRPCTimeoutOrCancelledError``; a checkpoint re-raises the pending cancel, so
    the caller's cancel scopes (``fail_after``, ``move_on_after``) work as usual.
    """
    try:
        return await update
    except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
        await anyio.lowlevel.checkpoint()
        if isinstance(exc.__cause__, asyncio.CancelledError):  # a plain asyncio cancel (Ctrl-C's SIGINT)
            raise exc.__cause__ from None
        raise
