"""One step: steering in, system prompt, pre-step, request, stream, assistant message, tool calls."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.lowlevel
import attrs

from dsh_core.llm import BlockAssembler, Failure, LlmCallConfig, LlmRequest, Usage
from dsh_core.services.agents import assemble_context_for
from dsh_core.services.questions import closed_question, question_log
from dsh_core.session_log import (
    ApprovalResolvedEvent,
    AssistantChunkEvent,
    AssistantMessageEvent,
    ContextMessageEvent,
    ParkedTurn,
    SteeringMessageEvent,
    StepStartEvent,
)
from dsh_core.vocabulary import AssistantMessage, CancelSignal, Message, Retry, ToolResultMessage, UserMessage

from ._agent import Agent
from ._interrupt import TurnInterrupts, check
from ._tool_calls import run_tool_calls

__all__ = ["ModelFailed", "StepOutcome", "log_step_items", "resume_parked_step", "run_step"]


class ModelFailed(Exception):
    """The model request failed and no ``agent/request-error`` listener retried it."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"{failure.code}: {failure.message}")
        self.failure = failure


class StepOutcome:
    """What a step left for the turn to decide on."""

    __slots__ = ("max_tokens", "message", "ran_tools")

    def __init__(self, message: AssistantMessage, ran_tools: bool, max_tokens: bool) -> None:
        self.message = message
        self.ran_tools = ran_tools
        self.max_tokens = max_tokens


def log_step_items(agent: Agent, turn: int, step: int) -> bool:
    """Log the steering and injected context waiting for a step; True if there was steering."""
    items = agent.machine.inbox.take_step()
    steered = False
    for item in items:
        queued_id = item.id if item.durable else None
        if item.kind == "inject":
            agent.session.append(ContextMessageEvent(message=item.message, queued_id=queued_id))
        else:
            agent.session.append(SteeringMessageEvent(message=item.message, queued_id=queued_id))
            steered = True
    return steered


def _checked_prefix(prefix: object) -> tuple[Message, ...]:
    """The session prefix must be a sequence of messages; anything else fails this turn only."""
    if isinstance(prefix, str | bytes) or not isinstance(prefix, Sequence):
        msg = f"agent/session-prefix must return a sequence of messages, got {type(prefix).__name__}"
        raise TypeError(msg)
    for index, message in enumerate(prefix):
        if not isinstance(message, UserMessage | AssistantMessage | ToolResultMessage):
            msg = f"agent/session-prefix: item {index} is a {type(message).__name__}, not a message"
            raise TypeError(msg)
    return tuple(prefix)


def _call_config(agent: Agent) -> LlmCallConfig:
    """The agent's options as the seed of ``agent/request`` (empty provider/model: none chosen yet).

    Built once per agent: the options are frozen, and so is the config.
    """
    config = agent.call_config
    if config is None:
        provider, _, name = (agent.options.model or "").partition("/")
        options = agent.options
        config = agent.call_config = LlmCallConfig(
            provider=provider, model=name, max_tokens=options.max_tokens, temperature=options.temperature
        )
    return config


def _check_route(agent: Agent, config: object) -> LlmCallConfig:
    if not isinstance(config, LlmCallConfig):
        msg = f"agent/request must return an LlmCallConfig (or None), got {type(config).__name__}"
        raise TypeError(msg)
    if not (config.provider and config.model):
        msg = (
            f"agent {agent.id!r} has no model: set AgentOptions(model='provider/model') or "
            "return a config with provider and model from an agent/request listener"
        )
        raise ValueError(msg)
    return config


class _Attempt:
    """What the model has streamed so far in this step (kept if the step is cancelled)."""

    __slots__ = ("assembler",)

    def __init__(self) -> None:
        self.assembler: BlockAssembler | None = None


async def run_step(agent: Agent, turn: int, step: int, interrupts: TurnInterrupts) -> StepOutcome:
    """One step. Everything up to the assistant message is a stretch that ``cancel()`` interrupts;
    the tool calls run outside it and see the cancel through the signal, so each one still ends
    with a result."""
    session = agent.session
    signal = interrupts.signal
    log_step_items(agent, turn, step)
    attempt = _Attempt()
    try:
        with interrupts:
            message, finish, usage = await _call_model(agent, turn, step, signal, attempt)
    except BaseException as exc:
        if interrupts.cancelled_here and isinstance(exc, anyio.get_cancelled_exc_class()):
            # interrupted: keep what streamed; the turn's scope absorbs the cancellation
            interrupts.kept = _keep_interrupted(agent, turn, step, attempt.assembler)
        raise
    if signal.reason is not None:
        check(signal, _keep_interrupted(agent, turn, step, attempt.assembler))
    if message.__class__ is AssistantMessage:  # the assembler's, or a listener's checked one
        session.append(AssistantMessageEvent.trusted(turn, step, message, usage))
    else:  # whatever an agent/step-result listener returned: the payload's checks refuse it
        session.append(AssistantMessageEvent(turn=turn, step=step, message=message, usage=usage))
    max_tokens = finish == "max-tokens"
    calls = () if max_tokens else message.tool_calls
    if calls:
        contexts = await run_tool_calls(agent, turn, step, calls, signal)
        for text in contexts:
            context = UserMessage(content=text, source={"kind": "context"})
            session.append(ContextMessageEvent(message=context))
    return StepOutcome(message=message, ran_tools=bool(calls), max_tokens=max_tokens)


async def resume_parked_step(
    agent: Agent, turn: int, step: int, interrupts: TurnInterrupts, parked: ParkedTurn
) -> StepOutcome:
    """Finish the step a turn was parked in (SPEC §10.1): its calls not yet finished run (the one
    waiting asks again for the same request, no model call is repeated), then the turn goes on."""
    message = parked.message
    if interrupts.signal.cancelled:  # cancelled before it was re-opened: its calls end as a cancel ends them
        _close_unasked(agent, parked, "cancel")
    calls = [call for call in message.tool_calls if call.id not in parked.finished]
    contexts = await run_tool_calls(agent, turn, step, calls, interrupts.signal, logged=parked.logged)
    for text in contexts:
        context = UserMessage(content=text, source={"kind": "context"})
        agent.session.append(ContextMessageEvent(message=context))
    # Not asked again: cancelled before the call was reached, a rule no longer asks, or no plugin
    # asks the question any more (``ask_user`` unknown now). Closed, not left pending forever.
    _close_unasked(agent, parked, "cancel" if interrupts.signal.cancelled else "repair")
    return StepOutcome(message=message, ran_tools=True, max_tokens=False)


def _close_unasked(agent: Agent, parked: ParkedTurn, by: str) -> None:
    """Close the parked step's approvals and questions still unanswered (and not parked again), ``by``."""
    again = agent.parked_calls()
    approvals = agent.approvals.log
    for call_id in sorted(parked.waiting):
        if approvals.answer_of(call_id) is None and call_id not in again:
            approvals.answer(ApprovalResolvedEvent(call_id=call_id, decision="cancelled", by=by))
    questions = question_log(agent.session)
    for call_id in sorted(parked.asking):
        if questions.answer_of(call_id) is None and call_id not in again:
            questions.answer(closed_question(call_id, by))


def _keep_interrupted(
    agent: Agent, turn: int, step: int, assembler: BlockAssembler | None
) -> AssistantMessage | None:
    """Text the user already saw streaming stays in the history, marked interrupted (no tool calls)."""
    if assembler is None:
        return None
    partial = assembler.interrupted()
    if not partial.content:
        return None
    agent.session.append(
        AssistantMessageEvent(turn=turn, step=step, message=partial, interrupted=True, usage=assembler.usage)
    )
    return partial


async def _call_model(
    agent: Agent, turn: int, step: int, signal: CancelSignal, attempt: _Attempt
) -> tuple[AssistantMessage, str, Usage | None]:
    """Prompt, pre-step, request, stream (retrying as ``agent/request-error`` says), step result."""
    ctx = agent.ctx
    events = ctx.events
    session = agent.session
    prompt = ctx.system_prompt
    context = agent.assembly_context
    if context is None:
        context = agent.assembly_context = assemble_context_for(agent)
    assembly = await prompt.assemble(context)
    if agent.prefix is None:
        agent.prefix = _checked_prefix(await events.waterfall("agent/session-prefix", (), agent=agent))
    prefix = agent.prefix
    # Events without listeners are skipped here rather than dispatched: no coroutine, no kwargs
    # (a step checks three of them; dispatching an event nobody hears costs more than asking).
    listening = events.has_listeners
    if listening("agent/pre-step"):
        await events.serial("agent/pre-step", agent=agent, turn=turn, step=step, prefix=prefix, signal=signal)
    system = prompt.render(assembly)
    boundary = session.derive_messages()
    session.append(StepStartEvent.trusted(turn, step))
    config = _call_config(agent)
    if listening("agent/request"):
        config = await events.waterfall("agent/request", config, agent=agent, turn=turn, step=step, signal=signal)
    config = _check_route(agent, config)
    tools = ctx.tools.schemas(agent)
    agent.header.record(session, config, system, tools, prefix)
    request = LlmRequest.for_call(
        config,
        boundary if not prefix else (*prefix, *boundary),
        system=system or None,
        tools=tools,
        session_id=session.id,
        signal=signal,
    )
    llm = ctx.llm
    append = session.append_unchecked
    number = 1
    while True:
        assembler = attempt.assembler = BlockAssembler(provider=config.provider, model=config.model)
        add = assembler.add
        chunks = llm.stream(request)
        try:
            async for chunk in chunks:
                add(chunk)  # first: it refuses anything that is not a chunk, so the append can trust it
                append(AssistantChunkEvent, turn, step, chunk)
        finally:  # closed at once, even when a listener raises (what aclosing does, one await less)
            await chunks.aclose()
        finish = assembler.finish
        if finish is not None and finish.reason not in ("error", "aborted"):
            break
        failure = (finish.error if finish is not None else None) or Failure(
            message="the model stream ended without a finish", code="EMPTY_RESPONSE"
        )
        decision: Retry | None = await events.waterfall(
            "agent/request-error",
            None,
            agent=agent,
            failure=failure,
            turn=turn,
            step=step,
            attempt=number,
            signal=signal,
        )
        if not isinstance(decision, Retry):
            if signal.reason is not None:
                await anyio.lowlevel.checkpoint()  # the cancel, not the failure, ends this turn
            raise ModelFailed(failure)
        if decision.delay > 0:
            await anyio.sleep(decision.delay)
        number += 1
        # A listener may have changed the surface (compaction after a context overflow): the
        # retry sends the history as it is now, not the one that failed.
        fresh = session.derive_messages()
        if fresh is not boundary:
            boundary = fresh
            request = attrs.evolve(request, messages=boundary if not prefix else (*prefix, *boundary))
    message = assembler.message()
    if listening("agent/step-result"):
        message = await events.waterfall("agent/step-result", message, agent=agent, turn=turn, step=step)
    return message, finish.reason, assembler.usage
