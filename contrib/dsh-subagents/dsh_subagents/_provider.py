"""The in-process sub-agent provider: a child agent created through the parent's own context.

The child is created with ``parent_ctx.agents.create(...)``, so the parent's context owns it: when
the parent is disposed, so is the child. Its session names the parent session (``parent_id``),
inherits the parent's cwd, and records its depth (``extra.depth``) and, when restricted, the tools
it may use (``extra.tools``). A restriction narrows: a grandchild may use at most what its parent may.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Generator
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from dsh_core import AgentDisposedError, AgentOptions, ToolExecution
from dsh_core.llm import Failure
from dsh_core.services.subagents import SubagentRefusedError, SubagentRequest, SubagentResult

from ._config import SubagentsConfig

if TYPE_CHECKING:
    from dsh_core import AgentHandle, Context, Disposer, TurnOutcome
    from dsh_core.vocabulary import Agent

__all__ = ["PROVIDER_NAME", "InProcessProvider", "InProcessRun", "depth_of", "tools_of"]

#: the name the provider is registered under in ``ctx.subagents``
PROVIDER_NAME = "in-process"

_SECTION = (
    "You are a sub-agent: another agent delegated this task to you: {{subagent_task}}. Work on it on "
    "your own; you cannot ask the agent that delegated it any questions. When you are done, reply with "
    "your final answer. Only that last reply is returned to the other agent, so make it complete and "
    "self-contained: state what you found or did, and anything you could not do."
)


def depth_of(agent: Agent | None) -> int:
    """An agent's sub-agent depth, from its session meta (``extra.depth``); 0 for a top-level agent."""
    if agent is None:
        return 0
    depth = agent.session.meta.extra.get("depth", 0)
    return depth if type(depth) is int and depth >= 0 else 0


def tools_of(agent: Agent | None) -> tuple[str, ...] | None:
    """The tools an agent was restricted to (``extra.tools``), or ``None`` when it is not restricted."""
    if agent is None:
        return None
    tools = agent.session.meta.extra.get("tools")
    if not isinstance(tools, tuple):  # frozen JSON: an array is a tuple
        return None
    return tuple(name for name in tools if isinstance(name, str))


class _Result:
    """The awaitable behind ``run.result``: settled once, awaited by any number of tasks."""

    __slots__ = ("_done", "_value")

    def __init__(self) -> None:
        self._done = anyio.Event()
        self._value: SubagentResult | None = None

    @property
    def settled(self) -> bool:
        return self._value is not None

    def settle(self, value: SubagentResult) -> None:
        """Set the result; the first one stays."""
        if self._value is None:
            self._value = value
            self._done.set()

    async def wait(self) -> SubagentResult:
        await self._done.wait()
        assert self._value is not None
        return self._value

    def __await__(self) -> Generator[Any, None, SubagentResult]:
        return self.wait().__await__()


def result_of(outcome: TurnOutcome) -> SubagentResult:
    """The result of the child's turn: its final text, its turn-end kind, and its failure if any."""
    raw = outcome.reason.get("failure")
    failure = Failure.from_json(raw) if raw is not None else None
    return SubagentResult(outcome.text, outcome.kind, failure)


class InProcessRun:
    """A child agent in this process, running one prompt. Made by ``InProcessProvider.start``.

    The prompt is sent by a task that belongs to the child's own context, as soon as it starts;
    ``cancel()`` before that means the prompt is never sent (the result says ``aborted``).
    """

    def __init__(self, handle: AgentHandle, prompt: str) -> None:
        self._handle = handle
        self._prompt = prompt
        self._result = _Result()
        self._cancelled = False
        self._stop_task: Disposer | None = None

    @property
    def id(self) -> str:
        return self._handle.agent.id

    @property
    def agent(self) -> Agent:
        return self._handle.agent

    @property
    def result(self) -> Awaitable[SubagentResult]:
        return self._result

    def begin(self) -> None:
        """Start the task that sends the prompt and settles the result when the child's turn ends."""
        agent = self._handle.agent
        self._stop_task = agent.ctx.start_task(self._drive, name=f"subagent:{agent.id}")

    async def _drive(self) -> None:
        agent = self._handle.agent
        try:
            if self._cancelled:
                self._result.settle(SubagentResult("", "aborted"))
                return
            source = {"kind": "plugin", "plugin": "subagents"}
            self._result.settle(result_of(await agent.run(self._prompt, source)))
        except AgentDisposedError:
            self._result.settle(SubagentResult("", "disposed"))
        except Exception as exc:  # noqa: BLE001 - a broken child is a result for the parent, not a crash
            failure = Failure(f"the sub-agent could not run: {type(exc).__name__}: {exc}", "UNKNOWN")
            self._result.settle(SubagentResult("", "error", failure))
        finally:
            # Cancelled with the child's context before its turn ended: the child is gone.
            self._result.settle(SubagentResult("", "disposed"))

    def cancel(self) -> None:
        """Stop the child's turn (it ends ``aborted``) and drop its queued prompt. Never raises."""
        self._cancelled = True
        self._handle.agent.cancel()

    async def dispose(self) -> None:
        """Dispose the child agent (idempotent); an unfinished result settles as ``disposed``."""
        with anyio.CancelScope(shield=True):
            await self._handle.dispose()
            if self._stop_task is not None:
                stopped = self._stop_task()
                if inspect.isawaitable(stopped):
                    await stopped
        self._result.settle(SubagentResult("", "disposed"))

    def __repr__(self) -> str:
        state = "settled" if self._result.settled else "running"
        return f"<InProcessRun {self.id!r} {state}>"


class InProcessProvider:
    """Runs a ``SubagentRequest`` in a child agent of the asking agent, in this process.

    Refuses (``SubagentRefusedError``, before any child is published) a request deeper than
    ``max_depth``, one whose tools the child would not see or its parent may not use, and one
    with no model to use. The child's options are the parent's, with the configured ``model``
    if any.
    """

    def __init__(self, config: SubagentsConfig | None = None) -> None:
        self.config = config if config is not None else SubagentsConfig()

    async def start(self, request: SubagentRequest) -> InProcessRun:
        """Create the child (owned by ``request.parent_ctx``), send it the prompt, return its run.

        :raises TypeError: when the request has no ``parent_ctx`` (the child needs an owner).
        :raises SubagentRefusedError: see the class docstring.
        """
        parent_ctx = request.parent_ctx
        if parent_ctx is None:
            msg = (
                "the in-process sub-agent provider needs SubagentRequest.parent_ctx: the context that "
                "will own the child (the asking agent's ctx, such as ToolExecution.ctx)"
            )
            raise TypeError(msg)
        parent = self._parent(parent_ctx, request.parent_id or parent_ctx.agent_scope)
        depth = max(request.depth, depth_of(parent) + 1)  # a request cannot understate its depth
        limit = self.config.max_depth
        if depth > limit:
            msg = (
                f"a sub-agent at depth {depth} would exceed the depth limit of {limit} "
                f"(plugins.subagents.max_depth); do this task yourself instead of delegating it"
            )
            raise SubagentRefusedError(msg)
        inherited = tools_of(parent)
        allowed = request.tools if request.tools is not None else inherited
        options = self._options(parent)
        extra: dict[str, Any] = {"depth": depth}
        if allowed is not None:
            extra["tools"] = list(allowed)
        meta = {
            "cwd": parent.session.meta.cwd if parent is not None else None,
            "parent_id": parent.session.id if parent is not None else None,
            "extra": extra,
        }
        stem = parent.id if parent is not None else "subagent"
        child_id = f"{stem}-sub-{uuid.uuid4().hex[:12]}"

        def setup(child_ctx: Context) -> None:
            if request.tools is not None:
                _check_tools(child_ctx, request.tools, inherited)
            _set_up_child(child_ctx, request.description, allowed, can_delegate=depth < limit)

        handle = await parent_ctx.agents.create(child_id, meta=meta, agent_options=options, setup=setup)
        run = InProcessRun(handle, request.prompt)
        try:
            run.begin()
        except Exception:
            await handle.dispose()
            raise
        return run

    def _parent(self, parent_ctx: Context, parent_id: str | None) -> Agent | None:
        if parent_id is None:
            return None
        parent: Agent | None = parent_ctx.agents.get(parent_id)
        if parent is None:
            msg = f"the parent agent {parent_id!r} is not live in this harness, so it cannot have a sub-agent"
            raise SubagentRefusedError(msg)
        return parent

    def _options(self, parent: Agent | None) -> AgentOptions:
        base = parent.options if parent is not None else AgentOptions()
        model = self.config.model or base.model
        if model is None:
            msg = (
                "the sub-agent has no model: its parent has none in its AgentOptions and "
                "plugins.subagents.model is not set"
            )
            raise SubagentRefusedError(msg)
        return attrs.evolve(base, model=model)


def _check_tools(child_ctx: Context, requested: tuple[str, ...], inherited: tuple[str, ...] | None) -> None:
    """Refuse tools the child would not see, or that its parent may not use (a restriction narrows)."""
    available = child_ctx.tools.names()
    if inherited is not None:
        available = tuple(name for name in available if name in inherited)
    unknown = [name for name in requested if name not in available]
    if unknown:
        msg = (
            f"unknown or unavailable tool(s) for the sub-agent: {', '.join(unknown)}; "
            f"choose from: {', '.join(available) or 'none'} (or omit tools to give it all of them)"
        )
        raise SubagentRefusedError(msg)


def _set_up_child(
    child_ctx: Context, description: str, allowed: tuple[str, ...] | None, *, can_delegate: bool
) -> None:
    """Composition of a new child: its prompt section and, when restricted, the guard on its tools."""
    prompt = child_ctx.get_service("system_prompt")
    if prompt is not None:
        prompt.variable("subagent_task", lambda _assembly: description)
        text = _SECTION
        if allowed is not None:
            text += f" You may use only these tools: {', '.join(allowed) or 'none'}."
        if not can_delegate:
            text += (
                " You are at the deepest level of delegation: you cannot hand tasks to further sub-agents."
            )
        prompt.section("subagent", text, order=50)
    if allowed is not None:
        child_ctx.tools.restrict(allowed)  # the child sees only these schemas
        permitted = frozenset(allowed)
        listed = ", ".join(allowed) or "none"

        def only_allowed(execution: ToolExecution) -> str | None:
            if execution.name in permitted:
                return None
            return f"this sub-agent may use only these tools: {listed}"

        child_ctx.tools.guard(only_allowed)
