"""The ``task`` tool: delegate a self-contained task to a child agent and return its final answer.

One call starts one child through the ``in-process`` provider, waits for it to finish and turns its
``SubagentResult`` into the tool result. The parent's session log gets ``subagent/start {call_id,
child_session_id, description, depth}`` when the child is running and ``subagent/end {call_id,
child_session_id, stop_reason, output_chars}`` when it is over, so a UI can show the delegation.
Cancelling the parent's turn cancels the child (its turn ends ``aborted``) and disposes it; the
child is disposed when the call ends in every case. Calls are parallel-safe: several ``task`` calls
in one step run side by side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Final

import anyio
import attrs

from dsh_core import Text, ToolExecution, ToolResult, tool
from dsh_core.llm import Failure
from dsh_core.services.subagents import SubagentRefusedError, SubagentRequest, SubagentResult
from dsh_core.session_log import LogEvent, log_event

from ._provider import PROVIDER_NAME, depth_of

if TYPE_CHECKING:
    from dsh_core.services.subagents import SubagentRun
    from dsh_core.vocabulary import Agent, ToolErrorCode

__all__ = ["CLEANUP_TIMEOUT", "DESCRIPTION", "SubagentEndEvent", "SubagentStartEvent", "task"]


@log_event("subagent/start", in_turn=True)
@attrs.frozen(kw_only=True)
class SubagentStartEvent(LogEvent):
    """The ``task`` call ``call_id`` started a sub-agent in session ``child_session_id`` at ``depth``."""

    call_id: str
    child_session_id: str
    description: str
    depth: int


@log_event("subagent/end", in_turn=True)
@attrs.frozen(kw_only=True)
class SubagentEndEvent(LogEvent):
    """The sub-agent of ``call_id`` is over: how its turn ended and how long its output was."""

    call_id: str
    child_session_id: str
    stop_reason: str
    output_chars: int

#: how long a cancelled call waits for its child's turn to close before disposing it anyway
CLEANUP_TIMEOUT: Final = 10.0


DESCRIPTION: Final = (
    "Delegate a self-contained task to a sub-agent that works on it alone and returns its final answer. "
    "Use it for work that takes many steps but whose outcome can be stated briefly (searching a codebase, "
    "investigating a question, making a well-specified change). The sub-agent sees none of this "
    "conversation, so put everything it needs in the prompt. Several task calls in one reply run in parallel."
)


@tool(name="task", description=DESCRIPTION, parallel_safe=True)
async def task(
    description: Annotated[str, "A short label for the task (3-7 words), shown to the user."],
    prompt: Annotated[
        str,
        "Everything the sub-agent needs: the goal, the relevant context and files, constraints, "
        "and what its answer should contain. It sees nothing of this conversation.",
    ],
    execution: ToolExecution,
    tools: Annotated[
        list[str] | None,
        "Restrict the sub-agent to these tools (by name); omit to give it every tool it may use.",
    ] = None,
) -> ToolResult:
    """Run one child to completion through the ``in-process`` provider; its answer is the result."""
    ctx = execution.ctx
    parent = None if ctx is None or execution.agent_id is None else ctx.agents.get(execution.agent_id)
    if ctx is None or parent is None:
        return _error("TOOL_ERROR", "Error: the task tool can only be called by a live agent.")
    request = SubagentRequest(
        description=description,
        prompt=prompt,
        tools=tools,
        parent_ctx=ctx,
        parent_id=parent.id,
        depth=depth_of(parent) + 1,
    )
    try:
        run = await ctx.subagents.start(PROVIDER_NAME, request)
    except SubagentRefusedError as exc:
        return _error("DENIED", f"Error: the task was refused: {exc}.")
    depth = depth_of(run.agent) if run.agent is not None else request.depth
    result: SubagentResult | None = None
    try:
        parent.session.append(
            SubagentStartEvent(
                call_id=execution.call_id, child_session_id=run.id, description=description, depth=depth
            )
        )
        try:
            result = await run.result
        except Exception as exc:  # noqa: BLE001 - a broken provider is a result for the model
            failure = Failure(f"the sub-agent provider failed: {type(exc).__name__}: {exc}", "UNKNOWN")
            result = SubagentResult("", "error", failure)
    finally:
        # Also on cancellation of the parent's turn: stop the child, then record how it ended.
        result = await _close(run, result)
        _log_end(parent, execution.call_id, run.id, result)
    return _tool_result(result, run.id)


async def _close(run: SubagentRun, result: SubagentResult | None) -> SubagentResult:
    """Cancel the child if it is still running, wait (bounded) for its result, dispose it."""
    if result is None:
        run.cancel()
        with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
            try:
                result = await run.result
            except Exception as exc:  # noqa: BLE001 - the call is ending either way
                result = SubagentResult("", "error", Failure(f"{type(exc).__name__}: {exc}", "UNKNOWN"))
    with anyio.CancelScope(shield=True):
        await run.dispose()
    return result if result is not None else SubagentResult("", "aborted")


def _log_end(parent: Agent, call_id: str, child_id: str, result: SubagentResult) -> None:
    parent.session.append(
        SubagentEndEvent(
            call_id=call_id, child_session_id=child_id, stop_reason=result.stop_reason, output_chars=len(result.output)
        )
    )


def _error(code: ToolErrorCode, text: str) -> ToolResult:
    return ToolResult(content=(Text(text),), is_error=True, error_code=code)


def _tool_result(result: SubagentResult, child_id: str) -> ToolResult:
    """What the parent's model reads: the child's answer, or why there is none."""
    metadata = {"child_session_id": child_id, "stop_reason": result.stop_reason}
    reason = result.stop_reason
    if result.ok:
        text = result.output if result.output.strip() else "(The sub-agent finished without a final answer.)"
        if reason == "max-tokens":
            text += "\n\n(The sub-agent's answer was cut off at its output token limit.)"
        return ToolResult(content=(Text(text),), metadata=metadata)
    if reason in ("aborted", "disposed"):
        code: ToolErrorCode = "ABORTED"
        text = "Error: the sub-agent was cancelled before it finished; its work may be incomplete."
    elif reason == "rejected":
        code = "TOOL_ERROR"
        text = "Error: the sub-agent's prompt was blocked before it started; rephrase the task or do it yourself."
    else:
        code = "TOOL_ERROR"
        failure = result.failure
        detail = f"{failure.message} [{failure.code}]" if failure is not None else f"it stopped ({reason})"
        text = (
            f"Error: the sub-agent failed: {detail}. Its work may be incomplete; try again, split the task, "
            "or do it yourself."
        )
    if result.output.strip():
        text += f"\n\nIts last output was:\n{result.output}"
    return ToolResult(content=(Text(text),), is_error=True, error_code=code, metadata=metadata)
