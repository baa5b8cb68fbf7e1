"""The run loop: one task per agent that waits for work and drives turns, forever.

Seed 000's lifecycle: idle wait → ``turn/start`` → prompt-submit per queued prompt → steps until
the turn stops → ``turn/end`` → flush → idle unless more is queued. A raising plugin ends the
turn (``error``), never this loop.
"""

from __future__ import annotations

import logging

import anyio
import attrs

from dsh_core.llm import Failure
from dsh_core.session_log import (
    ContextMessageEvent,
    InboxClearedEvent,
    ParkedTurn,
    PromptBlockedEvent,
    SteeringMessageEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
)
from dsh_core.vocabulary import (
    Allow,
    AssistantMessage,
    Block,
    CancelSignal,
    ContinuationDecision,
    ContinuationStop,
    TurnOutcome,
    UserMessage,
)

from ._agent import Agent
from ._interrupt import Aborted, TurnInterrupts, check
from ._machine import AgentState
from ._step import ModelFailed, log_step_items, resume_parked_step, run_step
from ._tool_calls import TurnParked
from ._turn_end import TurnEnd, strongest

__all__ = ["drive"]

logger = logging.getLogger("dsh.agent_loop")

#: how long a turn-end flush may take before the driver moves on (a stuck disk must not hang disposal)
FLUSH_TIMEOUT = 30.0


async def drive(agent: Agent) -> None:
    """Run ``agent`` until its teardown asks the driver to stop.

    Each pass reads the state and does what it asks; every state change goes through the
    agent's machine (``_machine.py``), whose table says which ones are legal.
    """
    machine = agent.machine
    events = agent.ctx.events
    while True:
        state = machine.state
        if state is AgentState.IDLE:
            await machine.wait_for_work()
        elif state is AgentState.RUNNING:  # a turn just ended (or the running flip was cancelled)
            if machine.inbox.queued:
                await run_turn(agent, machine.begin_turn())
            else:
                machine.end_of_work()
                await events.notify("agent/status", agent=agent, status="idle")
                machine.settle()  # a listener may have sent something: then the driver goes on
        elif state is AgentState.WOKEN:
            if machine.inbox.queued or machine.parked is not None:
                signal = machine.begin_turn()
                await events.notify("agent/status", agent=agent, status="running")
                if not signal.cancelled:  # a cancel during the running flip drops the turn
                    await run_turn(agent, signal)
            else:  # an idle injection to make durable (or a cancel took the prompts)
                machine.idle_work()
                await _flush(agent)
                machine.settle()
        elif state is AgentState.DRAINING:
            await _flush(agent)
            machine.drained()
        else:  # STOPPING, or DISPOSED after a teardown that stopped waiting for this driver
            return


async def _flush(agent: Agent) -> None:
    """Make the session durable. A failure is reported as ``agent/error`` (the turn already ended)."""
    if not agent.ctx.events.has_listeners("session/flush"):
        return  # nothing makes the session durable: no timer to arm
    failure: Exception | None = None
    with anyio.move_on_after(FLUSH_TIMEOUT, shield=True) as scope:
        try:
            await agent.ctx.sessions.flush(agent.session)
        except Exception as exc:
            logger.exception("agent %r: flushing session failed", agent.id)
            failure = exc
    if scope.cancelled_caught:
        logger.error("agent %r: flushing session took over %ss; moved on", agent.id, FLUSH_TIMEOUT)
        failure = TimeoutError(f"flushing session {agent.id!r} took over {FLUSH_TIMEOUT}s")
    if failure is not None:
        await agent.ctx.events.notify(
            "agent/error", agent=agent, turn=agent.session.last_turn, step=0, error=failure
        )


@attrs.define
class _TurnState:
    turn: int
    signal: CancelSignal
    step: int = 0
    end: TurnEnd | None = None
    consumed: list[str] = attrs.Factory(list)
    #: prompts taken from the inbox whose consuming event is not yet logged
    unlogged: list[str] = attrs.Factory(list)
    last_message: AssistantMessage | None = None
    #: an agent/turn-stop ended the turn: leftover steering is discarded, whatever reason wins
    terminal: bool = False


async def run_turn(agent: Agent, signal: CancelSignal) -> None:
    """One turn, error-contained: whatever happens, a started turn gets its ``turn/end``.

    The turn number is the session's (``session.last_turn``, kept from the log's ``turn/start``
    events), so numbering continues across resumes without a counter of the loop's own.
    """
    session = agent.session
    parked = agent.machine.take_parked()
    if parked is not None:  # re-opened where it waited for approval: no turn/start, no prompts
        state = _TurnState(parked.turn, signal, step=parked.step)
    else:
        turn = session.last_turn + 1
        try:
            session.append(TurnStartEvent(turn=turn))
        except Exception as exc:  # noqa: BLE001 - a vetoed turn/start: no turn, the prompts are dropped
            await agent.ctx.events.notify("agent/error", agent=agent, turn=session.last_turn, step=0, error=exc)
            _drop_queued(agent, exc)
            return
        state = _TurnState(turn, signal)
    turn = state.turn
    interrupts = TurnInterrupts(signal)
    try:
        with interrupts.scope:  # absorbs the cancellation the signal caused, nothing else
            interrupts.arm()
            state.end = await _turn_body(agent, state, interrupts, parked)
        if interrupts.kept is not None:  # a step cancelled while it streamed
            state.last_message = interrupts.kept
    except TurnParked:  # disposed while a call waits for approval: the log keeps the turn open
        await _flush(agent)
        agent.machine.resolve(state.consumed, TurnOutcome({"kind": "disposed"}, None))
        return
    except Aborted as aborted:
        state.last_message = aborted.message or state.last_message
    except Exception as exc:  # noqa: BLE001 - a plugin bug ends the turn, never the loop
        failure = exc.failure if isinstance(exc, ModelFailed) else _failure_of(exc)
        state.end = strongest(state.end, TurnEnd("error", failure=failure))
        await agent.ctx.events.notify("agent/error", agent=agent, turn=turn, step=state.step, error=exc)
    except BaseException:  # the harness is shutting down under us: still close the turn
        _close_turn(agent, state, TurnEnd("disposed"))
        raise
    if signal.reason is not None:
        state.end = strongest(state.end, TurnEnd("disposed" if signal.reason == "disposed" else "aborted"))
    machine = agent.machine
    if machine.state is AgentState.STOPPING:  # a cancel that disposal followed still ends `disposed`
        state.end = strongest(state.end, TurnEnd("disposed"))
    _close_turn(agent, state, state.end or TurnEnd("completed"))
    await _flush(agent)
    inbox = machine.inbox
    if state.terminal:
        discarded = [item.id for item in inbox.drop_steering() if item.durable]
        if discarded:
            session.append(InboxClearedEvent(ids=discarded))
    else:
        inbox.requeue_steering()  # leftover steering is queued: it runs as the next turn
    outcome = TurnOutcome((state.end or TurnEnd("completed")).to_json(), state.last_message)
    machine.resolve(state.consumed, outcome)


def _drop_queued(agent: Agent, exc: Exception) -> None:
    """``turn/start`` was refused: the prompts it was for are cleared, and their ``run()`` returns."""
    items = agent.machine.inbox.take_queued()
    if not items:
        return
    ids = [item.id for item in items]
    try:
        agent.session.append(InboxClearedEvent(ids=ids))
    except Exception:
        logger.exception("agent %r: could not record the dropped prompts", agent.id)
    failure = Failure(message=f"the turn could not start: {type(exc).__name__}: {exc}", code="UNKNOWN")
    agent.machine.resolve(ids, TurnOutcome(TurnEnd("error", failure=failure).to_json(), None))


def _close_turn(agent: Agent, state: _TurnState, end: TurnEnd) -> None:
    state.end = end
    session = agent.session
    if state.unlogged:  # taken for this turn but never admitted: say so, so none is pending forever
        session.append(InboxClearedEvent(ids=state.unlogged))
        state.unlogged = []
    events = agent.ctx.events
    if events.has_listeners("agent/turn-end"):
        events.notify_sync("agent/turn-end", agent=agent, turn=state.turn, reason=end)
    session.append(TurnEndEvent(turn=state.turn, reason=end))


async def _turn_body(
    agent: Agent, state: _TurnState, interrupts: TurnInterrupts, parked: ParkedTurn | None = None
) -> TurnEnd:
    if parked is not None:
        return await _steps(agent, state, interrupts, parked)
    events = agent.ctx.events
    session = agent.session
    signal = state.signal
    items = agent.machine.inbox.take_queued()  # taken: only a send from now on asks for another turn
    state.consumed = [item.id for item in items]
    state.unlogged = list(state.consumed)
    admitted = 0
    with interrupts:  # the prompts' stretch
        for item in items:
            verdict: Allow | Block = await events.waterfall(
                "agent/prompt-submit", Allow(), agent=agent, message=item.message, turn=state.turn
            )
            state.unlogged.remove(item.id)
            if not isinstance(verdict, Allow | Block):
                msg = (
                    f"agent/prompt-submit must decide Allow(...) or Block(reason), got {verdict!r}; "
                    "the prompt was not admitted"
                )
                raise TypeError(msg)
            if isinstance(verdict, Block):
                session.append(PromptBlockedEvent(queued_id=item.id, reason=verdict.reason, message=item.message))
                continue
            admitted += 1
            session.append(UserMessageEvent(message=item.message, queued_id=item.id))
            for text in verdict.additional_context:
                context = UserMessage(content=text, source={"kind": "context"})
                session.append(ContextMessageEvent(message=context))
    check(signal)
    if admitted == 0:
        return TurnEnd("rejected")
    if events.has_listeners("agent/turn-gate"):
        with interrupts:  # a listener may block: cancel() must reach it
            gate = await events.serial("agent/turn-gate", agent=agent, turn=state.turn)
        check(signal)
        if isinstance(gate, ContinuationStop):
            state.terminal = True
            return TurnEnd("stopped", reason=gate.reason)
    return await _steps(agent, state, interrupts)


async def _steps(
    agent: Agent, state: _TurnState, interrupts: TurnInterrupts, parked: ParkedTurn | None = None
) -> TurnEnd:
    """The turn's steps until it stops; a ``parked`` turn first finishes the step it waited in."""
    signal = state.signal
    end: TurnEnd | None = None
    while True:
        if parked is not None:
            outcome = await resume_parked_step(agent, state.turn, state.step, interrupts, parked)
            parked = None
        else:
            check(signal)  # before each step
            state.step += 1
            outcome = await run_step(agent, state.turn, state.step, interrupts)
        state.last_message = outcome.message
        if outcome.max_tokens:
            end = strongest(end, TurnEnd("max-tokens"))
        pending = log_step_items(agent, state.turn, state.step)
        with interrupts:  # a listener may block: cancel() must reach it
            decision, stop, pending = await _continuation(agent, state, outcome.ran_tools, pending)
        check(signal)
        if isinstance(stop, ContinuationStop):
            state.terminal = True
            return strongest(end, TurnEnd("stopped", reason=stop.reason))
        if decision.action == "stop" and not pending:
            return strongest(end, TurnEnd("completed"))


_CONTINUE = ContinuationDecision(action="continue")
_STOP = ContinuationDecision(action="stop")


def _failure_of(exc: BaseException) -> Failure:
    return Failure(message=f"{type(exc).__name__}: {exc}", code="UNKNOWN")



async def _continuation(
    agent: Agent, state: _TurnState, ran_tools: bool, steered: bool
) -> tuple[ContinuationDecision, object, bool]:
    """The ordinary decision, the steering it leaves pending, and the terminal stop (if any)."""
    events = agent.ctx.events
    listening = events.has_listeners  # an event nobody hears is skipped: no coroutine, no kwargs
    decision = _CONTINUE if ran_tools else _STOP
    if listening("agent/turn-continuation"):
        decision = await events.waterfall(
            "agent/turn-continuation", decision, agent=agent, turn=state.turn, step=state.step
        )
    if decision.action == "continue" and decision.reason:
        reason = UserMessage(content=decision.reason, source={"kind": "continuation"})
        agent.session.append(SteeringMessageEvent(message=reason))
        steered = True
    pending = steered or agent.machine.inbox.has_steering
    check(state.signal)  # at the continuation gate
    stop = None
    if listening("agent/turn-stop"):
        stop = await events.serial(
            "agent/turn-stop", agent=agent, decision=decision, turn=state.turn, step=state.step
        )
    return decision, stop, pending
