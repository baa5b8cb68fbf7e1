"""The event catalogue: every event of the harness, its dispatch mode, its arguments and its value.

Hook names are ``dsh_`` + the event name with ``/`` and ``-`` turned into ``_``. A plugin
implements any of them with ``@hookimpl`` (``def`` or ``async def``, taking any subset of the
arguments). ``docs/events.md`` is generated from this module (``python -m dsh_core events``).

Modes: **notify** — every listener runs; a failure is logged and contained. **waterfall** — each
listener gets the current value and returns a replacement or ``None`` to keep it. **serial** —
awaited one by one; the first non-``None`` result wins. **around** — each listener gets
``call_next`` and wraps the rest. **parallel** — awaited together; the first failure is raised.
Tool guards (``ctx.tools.guard``) are the sixth mode and are not hooks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from dsh_core.host._markers import hookspec

if TYPE_CHECKING:
    from dsh_core.services.approvals import ApprovalAnswer, PendingApproval
    from dsh_core.services.sessions import Session
    from dsh_core.session_log._catalogue import TurnEnd
    from dsh_core.session_log._event import SessionEvent
    from dsh_core.vocabulary._agent_types import Agent
    from dsh_core.vocabulary._content import AssistantMessage, Message, UserMessage
    from dsh_core.vocabulary._decisions import (
        Accept,
        Allow,
        Ask,
        Block,
        ContinuationDecision,
        ContinuationStop,
        Deny,
        Reject,
        Retry,
    )
    from dsh_core.vocabulary._llm_types import Failure, LlmCallConfig
    from dsh_core.vocabulary._signal import CancelSignal
    from dsh_core.vocabulary._tool_types import ToolExecution, ToolResult

# ---------------------------------------------------------------------- agent lifecycle


@hookspec(mode="notify", subject="agent", vetoes=True)
def dsh_agent_created(agent: Agent) -> None:
    """An agent was entered in the registry and is about to be published.

    A listener that raises vetoes the publication: the create or resume rolls back (with the paired
    ``agent/disposed``) and re-raises.
    """


@hookspec(mode="notify", subject="agent")
def dsh_agent_disposed(agent: Agent) -> None:
    """An agent left the registry; its session follows."""


@hookspec(mode="notify", subject="agent")
def dsh_agent_session_start(agent: Agent, source: str) -> None:
    """Once per agent instance, before its first turn. ``source`` is ``startup`` or ``resume``."""


@hookspec(mode="notify", subject="agent")
def dsh_agent_status(agent: Agent, status: str) -> None:
    """The agent became ``idle``, ``running`` or ``disposed``."""


@hookspec(mode="notify", subject="agent", sync=True)
def dsh_agent_queued(agent: Agent, message: Any) -> None:
    """A ``send``, ``steer`` or ``inject`` was accepted and recorded as ``inbox/queued``.

    ``message`` is the accepted record, frozen: ``.id`` (the queued id that the consuming event
    carries), ``.kind`` (``send``, ``steer``, ``inject``) and ``.message`` (the ``UserMessage``);
    ``inbox/queued``'s data is its JSON. Fired synchronously inside the call: listeners are plain
    ``def``.
    """


@hookspec(mode="waterfall", value="decision", subject="agent")
def dsh_agent_prompt_submit(agent: Agent, decision: Allow | Block, message: UserMessage, turn: int) -> Allow | Block | None:
    """Admit or block one queued prompt at the start of a turn.

    Return ``Block(reason)`` to drop it (logged as ``prompt/blocked``), or ``Allow(additional_context)``
    to add model-visible context after it. Default ``Allow()``.
    """


@hookspec(mode="waterfall", value="prefix", subject="agent")
def dsh_agent_session_prefix(agent: Agent, prefix: tuple[Message, ...]) -> tuple[Message, ...] | None:
    """Messages sent before the history on every request, fixed once per agent instance."""


@hookspec(mode="serial", subject="agent")
def dsh_agent_turn_gate(agent: Agent, turn: int) -> ContinuationStop | None:
    """Once per turn, after its prompts were admitted and before its first step (no model call yet).

    Return ``ContinuationStop(reason)`` to end the turn ``stopped`` without any step (a budget
    already spent); ``None`` lets it run. The first result wins. Not consulted for a turn whose
    every prompt was blocked (it ends ``rejected``).
    """


@hookspec(mode="serial", subject="agent")
def dsh_agent_pre_step(agent: Agent, turn: int, step: int, prefix: tuple[Message, ...], signal: CancelSignal) -> None:
    """Before each step, outside it: the place to change the surface (compaction)."""


@hookspec(mode="waterfall", value="config", subject="agent")
def dsh_agent_request(
    agent: Agent, config: LlmCallConfig, turn: int, step: int, signal: CancelSignal
) -> LlmCallConfig | None:
    """Replace this step's call config (model, effort, limits). Return ``None`` to keep it."""


@hookspec(mode="waterfall", value="decision", subject="agent")
def dsh_agent_request_error(
    agent: Agent, decision: Retry | None, failure: Failure, turn: int, step: int, attempt: int, signal: CancelSignal
) -> Retry | None:
    """A model request failed. Return ``Retry(delay)`` to stream again within the same step."""


@hookspec(mode="waterfall", value="message", subject="agent")
def dsh_agent_step_result(agent: Agent, message: AssistantMessage, turn: int, step: int) -> AssistantMessage | None:
    """Replace the assistant message of a step before it is logged and its tools run."""


@hookspec(mode="waterfall", value="decision", subject="agent")
def dsh_agent_turn_continuation(
    agent: Agent, decision: ContinuationDecision, turn: int, step: int
) -> ContinuationDecision | None:
    """Continue or stop the turn after a step. Default: continue iff the step ran tool calls.

    A ``continue`` with a reason is logged as a ``steering/message`` (source ``continuation``).
    """


@hookspec(mode="serial", subject="agent")
def dsh_agent_turn_stop(agent: Agent, decision: ContinuationDecision, turn: int, step: int) -> ContinuationStop | None:
    """After every step: return ``ContinuationStop(reason)`` to end the turn ``stopped``."""


@hookspec(mode="notify", subject="agent", sync=True)
def dsh_agent_turn_end(agent: Agent, turn: int, reason: TurnEnd) -> None:
    """A turn is closing with ``reason``; its ``turn/end`` is appended right after.

    The last moment to log into the turn (a listener may append to the session: a summary of the
    turn, such as ``budget/usage``). Fired for every turn that started, whatever ended it (cancel
    and disposal included), synchronously: listeners are plain ``def``.
    """


@hookspec(mode="notify", subject="agent")
def dsh_agent_error(agent: Agent, turn: int, step: int, error: BaseException) -> None:
    """A plugin or the model failed and the turn is ending with ``error``."""


# ---------------------------------------------------------------------- sessions


@hookspec(mode="notify", subject="session")
def dsh_session_created(session: Session) -> None:
    """A session entered the store."""


@hookspec(mode="notify", subject="session")
def dsh_session_disposed(session: Session) -> None:
    """A session left the store."""


@hookspec(mode="notify", subject="session", sync=True)
def dsh_session_event(session: Session, event: SessionEvent) -> None:
    """An event was committed to a session's log (persistence and UIs follow this).

    Fired synchronously inside ``Session.append``, in log order: listeners are plain ``def`` and
    must not append to the same session (hand work to a task instead).
    """


@hookspec(mode="parallel", subject="session")
def dsh_session_flush(session: Session) -> None:
    """Make everything appended so far durable; awaited at the end of every turn."""


# ---------------------------------------------------------------------- tools


@hookspec(mode="waterfall", value="decision", subject="execution")
def dsh_tools_pre_execute(execution: ToolExecution, decision: Allow | Deny | Ask) -> Allow | Deny | Ask | None:
    """Allow, deny or ask before a tool runs.

    ``Ask(reason)`` logs ``approval/requested`` (durable before anyone is asked) and the call waits
    for the first ``approval/resolved``: from an ``approval/answer`` listener, the ``approval``
    service (``ctx.approval``, e.g. the CLI's prompt) or ``agent.resolve_approval`` from any task.
    With no answerer it waits until resolved or cancelled. ``always`` answers for a tool before,
    read from the log, let it run unasked.
    """


@hookspec(mode="serial", subject="execution")
def dsh_approval_answer(execution: ToolExecution, request: PendingApproval) -> ApprovalAnswer | bool | Deny | None:
    """Answer a call waiting for approval at once (a policy): the first non-``None`` answer wins.

    Asked after ``approval/requested`` is durable, before the ``approval`` service. ``True`` is
    ``once``, ``False`` or a ``Deny(reason)`` a denial; an ``ApprovalAnswer`` says it all (``always``,
    edited arguments, ``by``; default ``by`` is ``policy``). Return ``None`` to leave the call to
    the other answerers; one that must take time resolves it later through
    ``agent.resolve_approval`` from a task of its own instead of blocking here.
    """


@hookspec(mode="around", subject="execution")
def dsh_tools_execute(  # type: ignore[empty-body]  # a spec: the listeners return the result
    execution: ToolExecution, call_next: Callable[[], Awaitable[ToolResult]]
) -> ToolResult:
    """Wrap the tool body: ``return await call_next()`` runs the rest of the chain."""


@hookspec(mode="waterfall", value="decision", subject="execution")
def dsh_tools_post_execute(
    execution: ToolExecution, result: ToolResult, decision: Accept | Reject
) -> Accept | Reject | None:
    """Accept (optionally replacing content, adding context) or reject a tool's result."""


@hookspec(mode="notify", subject="execution")
def dsh_tools_result(execution: ToolExecution, result: ToolResult) -> None:
    """The final result of a tool call, after every decision."""

