"""One step: steering in, system prompt, pre-step, request, stream, assistant message, tool calls."""

from __future__ import annotations

import attrs
import anyio

from dsh_core._assembler import BlockAssembler
from dsh_core._content import AssistantMessage, UserMessage
from dsh_core._decisions import Retry
from dsh_core._defaults.agents import assemble_context_for
from dsh_core._llm_types import Failure, LlmCallConfig, LlmRequest
from dsh_core._signal import CancelSignal

from ._agent import Agent
from ._interrupt import check, interruptible
from ._tool_calls import run_tool_calls

__all__ = ["ModelFailed", "StepOutcome", "log_step_items", "run_step"]


class ModelFailed(Exception):
    """The model request failed and no ``agent/request-error`` listener retried it."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"{failure.code}: {failure.message}")
        self.failure = failure


@attrs.frozen
class StepOutcome:
    message: AssistantMessage
    ran_tools: bool
    max_tokens: bool


def log_step_items(agent: Agent, turn: int, step: int) -> bool:
    """Log the steering and injected context waiting for a step; True if there was steering."""
    items = agent.inbox.take_step()
    steered = False
    for item in items:
        data = {"message": item.message.to_json()}
        if item.durable:
            data["queued_id"] = item.id
        if item.kind == "inject":
            agent.session.append("context/message", data)
        else:
            agent.session.append("steering/message", data)
            steered = True
    return steered


def _call_config(agent: Agent) -> LlmCallConfig:
    model = agent.options.model
    if not model or "/" not in model:
        msg = (
            f"agent {agent.id!r} has no model: set AgentOptions(model='provider/model') or "
            "return a config from an agent/request listener"
        )
        raise ValueError(msg)
    provider, _, name = model.partition("/")
    return LlmCallConfig(
        provider=provider, model=name, max_tokens=agent.options.max_tokens, temperature=agent.options.temperature
    )


async def run_step(agent: Agent, turn: int, step: int, signal: CancelSignal) -> StepOutcome:
    ctx = agent.ctx
    events = ctx.events
    session = agent.session
    log_step_items(agent, turn, step)
    prompt = ctx.system_prompt
    with interruptible(signal):
        assembly = await prompt.assemble(assemble_context_for(agent))
        if agent.prefix is None:
            agent.prefix = tuple(await events.waterfall("agent/session-prefix", (), agent=agent))
        prefix = agent.prefix
        await events.serial("agent/pre-step", agent=agent, turn=turn, step=step, prefix=prefix, signal=signal)
    check(signal)
    system = prompt.render(assembly)
    boundary = session.derive_messages()
    session.append("step/start", {"turn": turn, "step": step})
    with interruptible(signal):
        config = await events.waterfall(
            "agent/request", _call_config(agent), agent=agent, turn=turn, step=step, signal=signal
        )
    check(signal)
    tools = ctx.tools.schemas(agent)
    agent.header.record(session, config, system, tools, prefix)
    request = LlmRequest(
        provider=config.provider,
        model=config.model,
        messages=tuple(boundary) if not prefix else (*prefix, *boundary),
        system=system or None,
        tools=tuple(tools),
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        reasoning_effort=config.reasoning_effort,
        session_id=session.id,
        signal=signal,
    )
    llm = ctx.llm
    attempt = 1
    while True:
        assembler = BlockAssembler(provider=config.provider, model=config.model)
        append = session.append
        add = assembler.add
        with interruptible(signal):
            async for chunk in llm.stream(request):
                append("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk.to_json()})
                add(chunk)
        if signal.reason is not None:
            partial = assembler.interrupted()
            if partial.content:
                data = {"turn": turn, "step": step, "message": partial.to_json(), "interrupted": True}
                if assembler.usage is not None:
                    data["usage"] = assembler.usage.to_json()
                session.append("assistant/message", data)
            check(signal)
        finish = assembler.finish
        if finish is not None and finish.reason not in ("error", "aborted"):
            break
        failure = (finish.error if finish is not None else None) or Failure(
            message="the model stream ended without a finish", code="EMPTY_RESPONSE"
        )
        with interruptible(signal):
            decision = await events.waterfall(
                "agent/request-error",
                None,
                agent=agent,
                failure=failure,
                turn=turn,
                step=step,
                attempt=attempt,
                signal=signal,
            )
            if isinstance(decision, Retry) and decision.delay > 0:
                await anyio.sleep(decision.delay)
        check(signal)
        if not isinstance(decision, Retry):
            raise ModelFailed(failure)
        attempt += 1
    message = await events.waterfall("agent/step-result", assembler.message(), agent=agent, turn=turn, step=step)
    data = {"turn": turn, "step": step, "message": message.to_json()}
    if assembler.usage is not None:
        data["usage"] = assembler.usage.to_json()
    session.append("assistant/message", data)
    max_tokens = finish.reason == "max-tokens"
    calls = () if max_tokens else message.tool_calls
    if calls:
        contexts = await run_tool_calls(agent, turn, step, calls, signal)
        for text in contexts:
            context = UserMessage(content=text, source={"kind": "context"})
            session.append("context/message", {"message": context.to_json()})
    return StepOutcome(message=message, ran_tools=bool(calls), max_tokens=max_tokens)
