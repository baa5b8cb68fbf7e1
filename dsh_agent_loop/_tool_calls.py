"""Running a step's tool calls: in model order, parallel-safe neighbours overlapping, results in order.

Every tool call the model made ends with a ``tool/result``: a cancel gives the calls that never
started a synthetic ``tool/call`` + ``tool/result`` pair coded ``ABORTED``, and a failing tool
pipeline (a plugin that raised) closes the calls it left open, so the next request is valid.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from dsh_core.session_log import ToolCallEvent, ToolResultEvent
from dsh_core.vocabulary import (
    CancelSignal,
    Text,
    ToolCall,
    ToolErrorCode,
    ToolExecution,
    ToolResult,
    ToolResultMessage,
    freeze_json_object,
)

from ._agent import Agent

__all__ = ["TurnParked", "run_tool_calls"]


class TurnParked(Exception):
    """The agent was disposed while a call of this step waited for approval: the turn is left open
    (parked, SPEC §10.1) for a resume to re-open; nothing more is logged for it."""

_NOT_STARTED = "Error: the tool call was cancelled before it started; it did not run."


async def run_tool_calls(
    agent: Agent,
    turn: int,
    step: int,
    calls: Sequence[ToolCall],
    signal: CancelSignal,
    *,
    logged: frozenset[str] = frozenset(),
) -> list[str]:
    """Execute ``calls``; returns the additional context their results asked to add.

    ``logged`` are calls whose ``tool/call`` is in the log already (a parked step re-opened).
    """
    contexts: list[str] = []
    started: set[str] = set(logged)
    finished: set[str] = set()
    index = 0
    try:
        while index < len(calls):
            if signal.reason is not None:
                break
            group = _next_group(agent, calls, index)
            executions = [_execution(agent, turn, step, call, signal) for call in group]
            for call in group:
                if call.id not in started:
                    _log_call(agent, turn, step, call)
                    started.add(call.id)
            results = await _execute_group(agent, executions)
            parked = agent.parked_calls()
            for call, result in zip(group, results, strict=True):
                if call.id in parked:
                    continue
                _log_result(agent, turn, step, call, result)
                finished.add(call.id)
                contexts.extend(result.additional_context)
            if parked and any(call.id in parked for call in group):
                raise TurnParked
            index += len(group)
    except TurnParked:
        raise
    except BaseException as exc:
        # A plugin raised inside the pipeline (or the harness is shutting down): close every call.
        failed = _error(f"Error: the tool pipeline failed ({type(exc).__name__}: {exc}); outcome unknown.", "TOOL_ERROR")
        _close_calls(agent, turn, step, calls, started, finished, failed)
        raise
    if len(finished) < len(calls):
        _close_calls(agent, turn, step, calls, started, finished, _error(_NOT_STARTED, "ABORTED"))
    return contexts


def _close_calls(
    agent: Agent,
    turn: int,
    step: int,
    calls: Sequence[ToolCall],
    started: set[str],
    finished: set[str],
    open_result: ToolResult,
) -> None:
    """Give every call without a result one: the open ones ``open_result``, the rest ABORTED pairs."""
    for call in calls:
        if call.id in finished:
            continue
        if call.id not in started:
            _log_call(agent, turn, step, call)
            _log_result(agent, turn, step, call, _error(_NOT_STARTED, "ABORTED"))
        else:
            _log_result(agent, turn, step, call, open_result)


def _next_group(agent: Agent, calls: Sequence[ToolCall], start: int) -> list[ToolCall]:
    """The call at ``start``, plus the parallel-safe calls right after it if it is parallel-safe."""
    group = [calls[start]]
    if start + 1 == len(calls) or not _parallel_safe(agent, calls[start]):
        return group  # the last call is a group of one whatever it is: no need to parse its arguments
    for call in calls[start + 1 :]:
        if not _parallel_safe(agent, call):
            break
        group.append(call)
    return group


def _parallel_safe(agent: Agent, call: ToolCall) -> bool:
    # The tool runtime parses the model's arguments as execute does, so nothing in them can raise here.
    return agent.ctx.tools.is_parallel_safe(call.name, call.arguments, agent) is True


def _execution(agent: Agent, turn: int, step: int, call: ToolCall, signal: CancelSignal) -> ToolExecution:
    return ToolExecution(
        call_id=call.id,
        name=call.name,
        arguments=call.arguments,
        agent_id=agent.id,
        session_id=agent.session.id,
        turn=turn,
        step=step,
        cwd=agent.session.meta.cwd,
        ctx=agent.ctx,
        signal=signal,
    )


async def _execute_group(agent: Agent, executions: list[ToolExecution]) -> list[ToolResult]:
    tools = agent.ctx.tools
    if len(executions) == 1:
        return [await tools.execute(executions[0])]
    results: list[ToolResult | None] = [None] * len(executions)
    failures: list[Exception] = []

    async def run(position: int, execution: ToolExecution) -> None:
        try:
            results[position] = await tools.execute(execution)
        except Exception as exc:  # noqa: BLE001 - a plugin raised: stop the group, report its error
            failures.append(exc)
            tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        for position, execution in enumerate(executions):
            tg.start_soon(run, position, execution)
    if failures:
        raise failures[0]
    return [result for result in results if result is not None]


def _error(text: str, code: ToolErrorCode) -> ToolResult:
    return ToolResult(content=(Text(text),), is_error=True, error_code=code)


def _log_call(agent: Agent, turn: int, step: int, call: ToolCall) -> None:
    agent.session.append(ToolCallEvent.trusted(turn, step, call))


def _log_result(agent: Agent, turn: int, step: int, call: ToolCall, result: ToolResult) -> None:
    # a plugin that stored the full output aside says where (the spill plugin): logged with the result
    spilled = result.metadata.get("spilled") if result.metadata else None
    if result.__class__ is ToolResult and spilled is None:  # its fields were checked when it was made
        message = ToolResultMessage.trusted(call.id, result.content, result.is_error)
        agent.session.append(ToolResultEvent.trusted(turn, step, message, result.error_code))
    else:  # from a replacement tools service, or with a spill record: the constructors check it
        message = ToolResultMessage(call_id=call.id, content=result.content, is_error=result.is_error)
        agent.session.append(
            ToolResultEvent(
                turn=turn,
                step=step,
                message=message,
                error_code=result.error_code,
                spilled=None if spilled is None else freeze_json_object(spilled, where=ToolResultEvent.type, root="spilled"),
            )
        )
