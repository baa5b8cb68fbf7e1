"""The session workflow: one per session, the engine-side owner that schedules its turns.

It holds only small state (``SessionState``): the sends the log does not have yet, whether a turn
runs, the last committed seq, which worker keeps the agent warm. Each turn is one ``dsh.run_turn``
activity: on the warm worker's own task queue when there is one (falling back to any worker on
the shared queue when it does not take the turn within ``warm_start_timeout``), else on any worker. ``send``,
``steer`` and ``run`` are Updates whose validator refuses malformed content before the engine
accepts it; ``cancel`` is a Signal that cancels the running activity; ``status`` is a Query. The
workflow continues as new when its history grows, carrying its state.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError, TimeoutType
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    from dsh_core import UserMessage

    from ._types import (
        ApprovalRequest,
        ApprovalResolution,
        PendingMessage,
        SessionSpec,
        SessionState,
        SessionStatus,
        StartInput,
        TurnInput,
        TurnSummary,
    )

__all__ = ["RUN_TURN", "WARM_QUEUE_MEMO", "SessionWorkflow", "check_message", "turn_retry_policy", "workflow_task_timeout"]

#: the turn activity's name (registered by every worker)
RUN_TURN = "dsh.run_turn"

#: the memo key naming the task queue of the worker that holds the session's agent (no worker is
#: needed to read a memo: ``events()`` of a store-less client reads it with ``describe()``)
WARM_QUEUE_MEMO = "dsh.warm_queue"

#: continue as new past this many history events (Temporal caps a run at 51,200)
HISTORY_LIMIT = 2_000

#: a turn may run for a day; a dead worker is noticed through the heartbeat timeout, not this
TURN_START_TO_CLOSE = timedelta(days=1)


def turn_retry_policy() -> RetryPolicy:
    """A lost worker's turn moves on at once: first retry after 0.5 s (SPEC §9.7), then backs off."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=0.5),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=5),
        non_retryable_error_types=["ConfigError", "SessionCorruptError", "SessionFormatError"],
    )


def warm_start_timeout(heartbeat_timeout: float) -> timedelta:
    """How long a turn waits for the warm worker before any worker takes it (a live worker polls)."""
    return timedelta(seconds=min(2.0, heartbeat_timeout))


def _not_started(error: ActivityError) -> bool:
    cause = error.cause
    return isinstance(cause, TemporalTimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START


def workflow_task_timeout(heartbeat_timeout: float) -> timedelta:
    """A workflow task taken by a worker that then died is retried after this (default 10 s).

    The session's workflow tasks are tiny (no message lists, no chunks), so 2 s is plenty.
    """
    return timedelta(seconds=min(2.0, heartbeat_timeout))


def check_message(message: PendingMessage) -> None:
    """Refuse malformed content before the engine accepts it.

    :raises ValueError: naming the problem (a bad kind, bad blocks, a bad source).
    """
    if message.kind not in ("send", "steer", "inject"):
        msg = f"message kind must be 'send', 'steer' or 'inject', got {message.kind!r}"
        raise ValueError(msg)
    data: dict[str, Any] = {"role": "user", "id": message.id or "check", "content": message.content}
    if message.source is not None:
        data["source"] = message.source
    UserMessage.from_json(data, field=f"{message.kind}.message")


@workflow.defn(name="dsh-session")
class SessionWorkflow:
    """The engine-side half of one session (workflow id ``dsh-session/<session id>``)."""

    @workflow.init
    def __init__(self, start: StartInput) -> None:
        self._spec: SessionSpec = start.spec
        self._state: SessionState = start.state or SessionState(cwd=start.spec.cwd)
        self._running = False
        self._closing = False
        self._turn: workflow.ActivityHandle[TurnSummary] | None = None
        #: ids whose ``run`` update waits for an outcome
        self._awaited: set[str] = set()
        #: the warm queue the memo names (the start's memo: the state's, see ``continue_as_new``)
        self._memo_queue: str | None = self._state.warm_queue

    # ------------------------------------------------------------------ the run loop

    @workflow.run
    async def run(self, start: StartInput) -> None:
        state = self._state
        while True:
            await workflow.wait_condition(lambda: self._work_due() or self._closing or self._rollover())
            if self._closing:
                await workflow.wait_condition(workflow.all_handlers_finished)
                return
            if not self._work_due():  # history is long and nothing is waiting: start afresh
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self._work_due() and not self._closing:
                    workflow.continue_as_new(
                        StartInput(self._spec, state),
                        task_timeout=workflow.info().task_timeout,
                        memo={} if state.warm_queue is None else {WARM_QUEUE_MEMO: state.warm_queue},
                    )
                continue
            await self._run_turn()

    def _work_due(self) -> bool:
        """Messages to feed, or answers (or a cancel) for a parked turn: a turn activity is due."""
        state = self._state
        return bool(state.pending) or bool(state.resolutions) or state.cancel_parked

    def _rollover(self) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() > HISTORY_LIMIT

    async def _run_turn(self) -> None:
        state = self._state
        batch = list(state.pending)
        answers = list(state.resolutions)
        cancel_parked, state.cancel_parked = state.cancel_parked, False
        warm = state.warm_queue
        self._running = True
        self._turn = workflow.start_activity(
            RUN_TURN,
            TurnInput(
                self._spec, batch, sorted(self._awaited), state.cwd, state.last_seq, answers, cancel_parked
            ),
            result_type=TurnSummary,
            task_queue=warm,  # None: the workflow's own (shared) task queue
            # On the warm worker's queue: if it does not take the turn at once, it is gone.
            schedule_to_start_timeout=None if warm is None else warm_start_timeout(self._spec.heartbeat_timeout),
            start_to_close_timeout=TURN_START_TO_CLOSE,
            heartbeat_timeout=timedelta(seconds=self._spec.heartbeat_timeout),
            retry_policy=turn_retry_policy(),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        summary: TurnSummary | None = None
        fall_back = False
        try:
            summary = await self._turn
        except ActivityError as error:
            if warm is not None and _not_started(error):
                fall_back = True  # the warm worker is gone: any worker resumes the session cold
            else:
                # Cancelled (cancel() dropped the pending sends already) or failed for good (the
                # retry policy gave up, or a worker's configuration is wrong): the batch is dropped,
                # not retried forever, and anyone waiting on it hears how the turn ended.
                self._drop_failed(batch, error)
        finally:
            self._turn = None
            self._running = False
        given = {answer.call_id for answer in answers}  # applied, or refused by the worker: not again
        state.resolutions = [answer for answer in state.resolutions if answer.call_id not in given]
        state.warm_queue = None
        if summary is not None:
            self._absorb(summary)
        self._publish_warm_queue()
        if summary is None and fall_back and state.pending and not self._closing:
            await self._run_turn()

    def _publish_warm_queue(self) -> None:
        """Name the warm worker's queue in the memo, when it changed (one history event, no round trip)."""
        queue = self._state.warm_queue
        if queue != self._memo_queue:
            self._memo_queue = queue
            workflow.upsert_memo({WARM_QUEUE_MEMO: queue})

    def _drop_failed(self, batch: list[PendingMessage], error: ActivityError) -> None:
        ids = {message.id for message in batch}
        self._state.pending = [message for message in self._state.pending if message.id not in ids]
        cause = error.cause
        if isinstance(cause, CancelledError):
            reason: dict[str, Any] = {"kind": "aborted"}
        else:
            text = getattr(cause, "message", None) or str(cause or error)
            reason = {"kind": "error", "failure": {"message": f"the turn failed on the worker: {text}", "code": "UNKNOWN"}}
        self._finish_batch(sorted(ids), reason)

    def _absorb(self, summary: TurnSummary) -> None:
        state = self._state
        logged = set(summary.logged)
        state.pending = [message for message in state.pending if message.id not in logged]
        state.last_seq = max(state.last_seq, summary.last_seq)
        state.turns_run += summary.turns
        state.cwd = state.cwd or summary.cwd
        state.warm_queue = summary.warm_queue
        answered = {answer.call_id for answer in state.resolutions}
        state.approvals = [request for request in summary.approvals if request.call_id not in answered]
        for ident, outcome in summary.outcomes.items():
            if ident in self._awaited:
                state.outcomes[ident] = outcome
        if summary.cancelled:
            self._finish_batch(list(logged), {"kind": "aborted"})

    def _finish_batch(self, ids: list[str], reason: dict[str, Any]) -> None:
        """Give every ``run`` waiting on ``ids`` an outcome, unless it has one already."""
        for ident in ids:
            if ident in self._awaited and ident not in self._state.outcomes:
                self._state.outcomes[ident] = {"reason": reason, "message": None}

    # ------------------------------------------------------------------ updates

    def _accept(self, message: PendingMessage) -> str:
        ident = workflow.current_update_info().id  # type: ignore[union-attr]  # inside an update
        known = {queued.id for queued in self._state.pending}
        if ident not in known:  # a retried update is queued once
            self._state.pending.append(
                PendingMessage(ident, message.kind, message.content, message.source)
            )
        return ident

    def _validate(self, message: PendingMessage) -> None:
        if self._closing:
            msg = f"session {self._spec.session_id!r} is closing; it takes no more messages"
            raise ValueError(msg)
        info = workflow.current_update_info()
        if info is not None and info.id in self._state.withdrawn:
            msg = f"message {info.id!r} was withdrawn by its sender (its send timed out)"
            raise ValueError(msg)
        check_message(message)

    @workflow.update(name="send")
    def send(self, message: PendingMessage) -> str:
        """Queue a prompt (or steering) for the session; returns its id (the Update's id)."""
        return self._accept(message)

    @send.validator
    def _validate_send(self, message: PendingMessage) -> None:
        self._validate(message)
        if message.kind == "inject":
            msg = "an inject goes through the 'inject' update, not 'send'"
            raise ValueError(msg)

    @workflow.update(name="inject")
    def inject(self, message: PendingMessage) -> str:
        """Add model-visible context: at the running turn's next step, or (idle) to the log at once
        without starting a turn; returns its id (the Update's id)."""
        return self._accept(PendingMessage(message.id, "inject", message.content, message.source))

    @inject.validator
    def _validate_inject(self, message: PendingMessage) -> None:
        self._validate(PendingMessage(message.id, "inject", message.content, message.source))

    @workflow.update(name="run")
    async def run_message(self, message: PendingMessage) -> dict[str, Any]:
        """Queue a prompt and wait for the turn that consumes it; returns its outcome as JSON."""
        ident = self._accept(message)
        self._awaited.add(ident)
        try:
            await workflow.wait_condition(lambda: ident in self._state.outcomes)
        finally:
            self._awaited.discard(ident)
        return self._state.outcomes.pop(ident)

    @run_message.validator
    def _validate_run(self, message: PendingMessage) -> None:
        self._validate(message)

    @workflow.update(name="wait_idle")
    async def wait_idle(self) -> int:
        """Return once nothing runs or waits to run (a parked turn waits); returns the last committed seq."""
        state = self._state
        await workflow.wait_condition(lambda: not self._running and not self._work_due() and not state.approvals)
        return state.last_seq

    @workflow.update(name="resolve_approval")
    def resolve_approval(self, answer: ApprovalResolution) -> dict[str, Any]:
        """Accept an answer for a call of the parked turn; the next turn activity applies it (SPEC §10.1).

        The first answer accepted wins: the call is no longer pending for the engine.
        """
        state = self._state
        state.approvals = [request for request in state.approvals if request.call_id != answer.call_id]
        state.resolutions.append(answer)
        return {
            "call_id": answer.call_id,
            "decision": answer.decision,
            "reason": answer.reason,
            "arguments": answer.arguments,
            "by": answer.by,
        }

    @resolve_approval.validator
    def _validate_resolve_approval(self, answer: ApprovalResolution) -> None:
        if answer.decision not in ("once", "always", "deny", "cancelled"):
            msg = f"decision must be one of once, always, deny, cancelled; got {answer.decision!r}"
            raise ValueError(msg)
        if not isinstance(answer.by, str) or not answer.by:
            msg = "by must name who answered (a non-empty str)"
            raise ValueError(msg)
        if not any(request.call_id == answer.call_id for request in self._state.approvals):
            msg = f"call {answer.call_id!r} is not pending (never requested, or already resolved)"
            raise ValueError(msg)

    @workflow.update(name="wait_approvals")
    async def wait_approvals(self) -> list[ApprovalRequest]:
        """Return the waiting calls once there is one (a long poll for an answerer)."""
        await workflow.wait_condition(lambda: bool(self._state.approvals))
        return list(self._state.approvals)

    @workflow.query(name="approvals")
    def approvals(self) -> list[ApprovalRequest]:
        """The calls waiting for approval while the turn is parked (no activity runs)."""
        return list(self._state.approvals)

    # ------------------------------------------------------------------ signals and queries

    @workflow.signal(name="cancel")
    def cancel(self) -> None:
        """Stop the running turn and drop what is pending (the engine's history keeps the record)."""
        state = self._state
        dropped = [message.id for message in state.pending]
        if self._turn is None:
            state.pending = []
            self._finish_batch(dropped, {"kind": "aborted"})
            if state.approvals:  # a parked turn: the next activity cancels it (its calls end cancelled)
                state.approvals = []
                state.cancel_parked = True
            return
        # The running turn's messages are in its log; the activity records the cancel there.
        state.pending = []
        self._finish_batch(dropped, {"kind": "aborted"})
        self._turn.cancel()

    @workflow.signal(name="withdraw")
    def withdraw(self, ident: str) -> None:
        """A sender gave up waiting: that message is never queued (unless a turn took it already)."""
        state = self._state
        if self._turn is None:
            state.pending = [message for message in state.pending if message.id != ident]
        if ident not in state.withdrawn:
            state.withdrawn.append(ident)
            del state.withdrawn[:-1000]  # bounded: only recent timeouts matter

    @workflow.signal(name="close")
    def close(self) -> None:
        """End the workflow once the running turn is done (the session log stays in the store)."""
        self._closing = True

    @workflow.query(name="status")
    def status(self) -> SessionStatus:
        state = self._state
        return SessionStatus(
            self._spec.session_id,
            self._running,
            len(state.pending),
            state.last_seq,
            state.turns_run,
            self._closing,
            state.warm_queue,
        )

    @workflow.query(name="pending")
    def pending(self) -> list[PendingMessage]:
        """What a running turn should take next (it polls this while it runs)."""
        return list(self._state.pending)
