"""The default tool runtime: a scoped tool registry, the schemas the model sees, and the call pipeline.

A tool registered through a plugin's context is global; one registered through ``agent.ctx`` (or
a context below it) is seen only by that agent, shadows a global tool of the same name, and
vanishes with the context. ``execute`` runs one call through SPEC §4:

    parse -> validate -> tools/pre-execute (Ask -> approval) -> guards
          -> tools/execute around the body -> tools/post-execute -> tools/result

and returns a ``ToolResult``. It never raises for a tool-level problem (each becomes an error
result with a code the model can read); a listener that raises is a plugin bug and propagates.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias, runtime_checkable

import anyio
import attrs

from dsh_core.host._dispatch import check_guards
from dsh_core.services.approvals import ApprovalAnswer, ApprovalBook, denial_text, settle_approval
from dsh_core.tools._arguments import parse_arguments
from dsh_core.tools._definition import Tool, tool
from dsh_core.tools._errors import ToolError
from dsh_core.tools._schema_check import Acceptor, compile_acceptor
from dsh_core.tools._validator import LazyValidator, check_schema
from dsh_core.vocabulary._content import Image, Text
from dsh_core.vocabulary._decisions import Accept, Allow, Ask, Deny, Reject
from dsh_core.vocabulary._errors import DuplicateRegistrationError
from dsh_core.vocabulary._json import FrozenDict, dumps_json, freeze_json, thaw_json
from dsh_core.vocabulary._signal import CancelSignal
from dsh_core.vocabulary._tool_types import ToolErrorCode, ToolExecution, ToolResult

if TYPE_CHECKING:
    from dsh_core.host._context import Context, Disposer
    from dsh_core.vocabulary._agent_types import Agent

__all__ = ["ApprovalService", "Guard", "ToolRuntime", "ToolsPlugin", "ToolsService", "ToolsView"]

#: A monotonic policy: returns a reason to deny the call, or ``None``; sync or async.
Guard: TypeAlias = "Callable[[ToolExecution], str | Awaitable[str | None] | None]"
#: Which agent's view of the tools: an agent, its id, or ``None`` for the global tools only.
AgentRef: TypeAlias = "Agent | str | None"


@runtime_checkable
class ApprovalService(Protocol):
    """``ctx.approval``: asks someone (a user, a policy) whether a call that needs approval may run."""

    async def approve(self, execution: ToolExecution, reason: str) -> bool | Deny:
        """``True`` allows the call; ``False`` denies it as rejected by the user; a ``Deny`` denies it
        with that reason (what the model is told: the user's own words, or that nobody could be asked)."""
        ...


_ALLOW = Allow()
_ACCEPT = Accept()


class ToolsService(Protocol):
    """What ``ctx.tools`` offers, and what a replacement ``tools`` service must provide (after ``bind(ctx)``).

    Registrations made through a bound view belong to its context: they are undone when it is
    disposed, and through an agent's context they are that agent's own.
    """

    def register(self, tool_or_function: Tool | Callable[..., Any]) -> Disposer: ...

    def guard(self, guard: Guard) -> Disposer: ...

    def restrict(self, names: Iterable[str]) -> Disposer: ...

    def get(self, name: str, agent: AgentRef = None) -> Tool | None: ...

    def names(self, agent: AgentRef = None) -> tuple[str, ...]: ...

    def schemas(self, agent: AgentRef = None) -> tuple[FrozenDict, ...]: ...

    def is_parallel_safe(self, name: str, arguments: str | Mapping[str, Any], agent: AgentRef = None) -> bool: ...

    async def execute(self, execution: ToolExecution) -> ToolResult: ...


@attrs.frozen
class _Entry:
    """A registered tool with what the pipeline precomputes for it."""

    tool: Tool
    owner: str
    scope: str | None
    #: the full validator, built (and jsonschema imported) only when ``accept`` cannot vouch for a value
    validator: LazyValidator = attrs.field(eq=False, repr=False)
    #: a fast check that is True only for valid arguments (None: the schema is outside its subset)
    accept: Acceptor | None = attrs.field(eq=False, repr=False)
    schema: FrozenDict = attrs.field(eq=False, repr=False)


def _agent_id(agent: AgentRef) -> str | None:
    if agent is None or isinstance(agent, str):
        return agent
    return agent.id


def _where(scope: str | None) -> str:
    return "globally" if scope is None else f"for agent {scope!r}"


class ToolRuntime:
    """The ``tools`` service: registry, schemas and the execution pipeline.

    Seen through ``ctx.tools`` as a ``ToolsView`` that scopes registrations to that context;
    ``add`` / ``add_guard`` here take the scope explicitly.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._tools: dict[str | None, dict[str, _Entry]] = {None: {}}
        self._guards: dict[str | None, dict[int, Guard]] = {}
        self._next_guard = 0
        self._schema_cache: dict[str | None, tuple[FrozenDict, ...]] = {}
        self._guard_cache: dict[str | None, tuple[Guard, ...]] = {}
        #: per agent: allowlists it was narrowed to (it sees a tool only if every list names it)
        self._allowlists: dict[str, dict[int, frozenset[str]]] = {}
        self._next_allowlist = 0

    def bind(self, ctx: Context) -> ToolsView:
        return ToolsView(self, ctx)

    # ------------------------------------------------------------------ registry

    def add(self, tool: Tool, *, scope: str | None = None, owner: str = "?") -> Callable[[], None]:
        """Register ``tool`` in ``scope`` (an agent id, or ``None`` for global); returns its exact remover.

        The schema is checked here, once: by the fast acceptor when the schema is within its
        subset (no ``jsonschema`` import), else by ``jsonschema``'s ``check_schema``.

        :raises DuplicateRegistrationError: when ``scope`` already has a tool of that name.
        :raises ValueError: when ``tool.parameters`` is not a valid JSON Schema.
        """
        if not isinstance(tool, Tool):
            msg = f"tools.register takes a Tool (make one with @tool), got {type(tool).__name__}"
            raise TypeError(msg)
        layer = self._tools.setdefault(scope, {})
        if (taken := layer.get(tool.name)) is not None:
            msg = (
                f"tool {tool.name!r} is already registered {_where(scope)} by {taken.owner!r}; "
                "pass name= to @tool to rename yours, or register it through an agent's context to shadow it there"
            )
            raise DuplicateRegistrationError(msg)
        schema = thaw_json(tool.parameters)
        accept = compile_acceptor(schema)
        if accept is None:  # outside the acceptor's subset, so not vouched for as well-formed
            check_schema(tool.name, schema)
        entry = _Entry(
            tool=tool,
            owner=owner,
            scope=scope,
            validator=LazyValidator(schema),
            accept=accept,
            schema=FrozenDict(
                {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
            ),
        )
        layer[tool.name] = entry
        self._schema_cache.clear()

        def remove() -> None:
            if layer.get(tool.name) is entry:
                del layer[tool.name]
                if not layer and scope is not None and self._tools.get(scope) is layer:
                    del self._tools[scope]  # an agent's layer leaves with its last tool
                self._schema_cache.clear()

        return remove

    def add_guard(self, guard: Guard, *, scope: str | None = None) -> Callable[[], None]:
        """Add a guard for every call (``scope=None``) or for one agent's calls; returns its remover."""
        if not callable(guard):
            msg = f"a tool guard must be a callable of the ToolExecution, got {guard!r}"
            raise TypeError(msg)
        key = self._next_guard
        self._next_guard += 1
        self._guards.setdefault(scope, {})[key] = guard
        self._guard_cache.clear()

        def remove() -> None:
            layer = self._guards.get(scope)
            if layer is not None and layer.pop(key, None) is not None:
                if not layer and scope is not None:
                    del self._guards[scope]
                self._guard_cache.clear()

        return remove

    def restrict(self, names: Iterable[str], *, scope: str) -> Callable[[], None]:
        """Let agent ``scope`` see only the tools in ``names``; returns the exact remover.

        Restrictions narrow: with several, the agent sees what all of them allow. A tool it does
        not see is neither in its schemas nor callable (the model gets ``UNKNOWN_TOOL``).
        """
        allowed = frozenset(names)
        if not all(isinstance(name, str) for name in allowed):
            msg = f"tools.restrict takes tool names (str), got {sorted(map(repr, allowed))}"
            raise TypeError(msg)
        key = self._next_allowlist
        self._next_allowlist += 1
        self._allowlists.setdefault(scope, {})[key] = allowed
        self._schema_cache.clear()

        def remove() -> None:
            lists = self._allowlists.get(scope)
            if lists is not None and lists.pop(key, None) is not None:
                if not lists:
                    del self._allowlists[scope]
                self._schema_cache.clear()

        return remove

    def _allows(self, scope: str | None, name: str) -> bool:
        lists = self._allowlists.get(scope) if scope is not None else None
        return not lists or all(name in allowed for allowed in lists.values())

    def _entry(self, name: str, scope: str | None) -> _Entry | None:
        if not self._allows(scope, name):
            return None
        if scope is not None:
            layer = self._tools.get(scope)
            if layer is not None and (entry := layer.get(name)) is not None:
                return entry
        return self._tools[None].get(name)

    def _visible(self, scope: str | None) -> dict[str, _Entry]:
        visible = dict(self._tools[None])
        if scope is not None:
            visible.update(self._tools.get(scope, {}))
            if self._allowlists.get(scope):
                visible = {name: entry for name, entry in visible.items() if self._allows(scope, name)}
        return visible

    def get(self, name: str, agent: AgentRef = None) -> Tool | None:
        """The tool ``name`` as ``agent`` sees it (its own shadows a global one), or ``None``."""
        entry = self._entry(name, _agent_id(agent))
        return None if entry is None else entry.tool

    def names(self, agent: AgentRef = None) -> tuple[str, ...]:
        """The names of the tools ``agent`` sees, sorted."""
        return tuple(sorted(self._visible(_agent_id(agent))))

    def schemas(self, agent: AgentRef = None) -> tuple[FrozenDict, ...]:
        """What the model sees: ``{"name", "description", "parameters"}`` per visible tool, sorted by name.

        Cached per agent until the next register or unregister.
        """
        scope = _agent_id(agent)
        if scope not in self._tools and scope not in self._allowlists:
            scope = None  # an agent with no layer of its own sees the global view (one cache entry)
        cached = self._schema_cache.get(scope)
        if cached is None:
            visible = self._visible(scope)
            cached = tuple(visible[name].schema for name in sorted(visible))
            self._schema_cache[scope] = cached
        return cached

    def is_parallel_safe(self, name: str, arguments: str | Mapping[str, Any], agent: AgentRef = None) -> bool:
        """Whether a call may run alongside others; ``False`` for an unknown tool or unparsable arguments."""
        entry = self._entry(name, _agent_id(agent))
        if entry is None:
            return False
        if isinstance(arguments, str):
            parsed = _parse(entry, arguments)
            if not isinstance(parsed, FrozenDict):
                return False
            arguments = parsed
        return entry.tool.is_parallel_safe(arguments)

    def _guards_for(self, scope: str | None) -> tuple[Guard, ...]:
        if scope not in self._guards:
            scope = None  # no guards of its own: the global ones (one cache entry for all such agents)
        cached = self._guard_cache.get(scope)
        if cached is None:
            found = list(self._guards.get(None, {}).values())
            if scope is not None:
                found.extend(self._guards.get(scope, {}).values())
            cached = self._guard_cache[scope] = tuple(found)
        return cached

    # ------------------------------------------------------------------ the pipeline

    async def execute(self, execution: ToolExecution) -> ToolResult:
        """Run one tool call through the whole pipeline and return its result.

        Never raises for a tool-level problem: an unknown tool, arguments that are not JSON or
        break the schema, a body that raises (a ``ToolError`` gives ``"Error: <its message>"`` as
        the text), a timeout, a cancelled ``execution.signal`` and a denial each become an error
        result (``UNKNOWN_TOOL``, ``INVALID_ARGS``, ``TOOL_ERROR``,
        ``TIMEOUT``, ``ABORTED``, ``DENIED``). A listener that raises, or returns something that
        is not a decision, propagates. Cancellation from outside (not through the signal) propagates.

        Unknown tools and invalid arguments skip the policy events; an abort skips
        ``tools/post-execute``; every result reaches ``tools/result``. A ``Reject`` from
        post-execute is reported as ``DENIED``.

        :raises TypeError: when ``execution`` is not a ``ToolExecution``.
        """
        if not isinstance(execution, ToolExecution):
            msg = f"tools.execute takes a ToolExecution, got {type(execution).__name__}"
            raise TypeError(msg)
        entry = self._entry(execution.name, execution.agent_id)
        if entry is None:
            return await self._finish(execution, self._unknown_tool(execution))
        parsed = _parse(entry, execution.arguments)
        if isinstance(parsed, ToolResult):
            return await self._finish(execution, parsed)
        execution = _with_parsed(execution, parsed)
        signal = execution.signal
        if signal is not None and signal.cancelled:
            return await self._finish(execution, _aborted(execution))
        events = self._ctx.events
        listening = events.has_listeners  # an event nobody hears is skipped: no coroutine, no kwargs
        gated = bool(self._guards_for(execution.agent_id)) or listening("tools/pre-execute") or listening("tools/execute")
        tool = entry.tool
        if signal is None or not (gated or tool.is_async or tool.timeout is not None):
            # Nothing up to the body can wait (no listener, no guard, a plain function without a
            # timeout): no cancel scope to arm (~5 us of a tool step); a plain function that
            # returns an awaitable is awaited in one (``_run_body``).
            try:
                if gated:
                    result = await self._gate_and_run(entry, execution, unscoped=signal)
                else:  # no policy to ask: what _gate_and_run comes down to
                    result = await _run_body(tool, execution, signal)
            except _BodyAborted:
                return await self._finish(execution, _aborted(execution))
        else:
            with anyio.CancelScope() as scope:
                forget = signal.on_cancel(scope.cancel)
                try:
                    result = await self._gate_and_run(entry, execution)
                finally:
                    forget()
            if scope.cancelled_caught:
                return await self._finish(execution, _aborted(execution))
        if listening("tools/post-execute"):
            result = await self._post_execute(execution, result)
        if listening("tools/result"):
            await events.notify("tools/result", execution=execution, result=result)
        return result

    async def _gate_and_run(
        self, entry: _Entry, execution: ToolExecution, *, unscoped: CancelSignal | None = None
    ) -> ToolResult:
        """Policy events, guards, then the body under ``tools/execute``; ``unscoped`` is the signal
        when no cancel scope is armed around this (see ``_run_body``)."""
        events = self._ctx.events
        decision = await events.waterfall("tools/pre-execute", _ALLOW, execution=execution)
        if isinstance(decision, Ask):
            decision, execution = await self._ask(execution, decision)
        if isinstance(decision, Deny):
            return _denied(execution, decision.reason)
        if not isinstance(decision, Allow):
            msg = f"a tools/pre-execute listener returned {decision!r}; expected Allow(), Deny(reason), Ask(reason) or None"
            raise TypeError(msg)
        guards = self._guards_for(execution.agent_id)
        if guards:
            reason = await check_guards(guards, execution)
            if reason is not None:
                return _denied(execution, reason)

        result = await events.around("tools/execute", functools.partial(_run_body, entry.tool, execution, unscoped), execution=execution)
        if not isinstance(result, ToolResult):
            msg = f"a tools/execute wrapper returned {result!r}; it must return the ToolResult of call_next() or its own"
            raise TypeError(msg)
        if decision.additional_context:
            result = attrs.evolve(
                result, additional_context=(*result.additional_context, *decision.additional_context)
            )
        return result

    async def _ask(self, execution: ToolExecution, ask: Ask) -> tuple[Allow | Deny, ToolExecution]:
        """An ``Ask``: logged as ``approval/requested``, decided by the first ``approval/resolved``
        (SPEC §10.1, ``approvals.settle_approval``); edited arguments replace the model's.

        A call outside any live session (``execution.session_id`` unknown here) has no log to
        wait on: the ``approval`` service decides alone, and with none the call is denied.
        """
        ctx = execution.ctx if execution.ctx is not None else self._ctx
        reason = ask.reason or f"tool {execution.name!r} needs approval"
        session_id = execution.session_id
        session = ctx.sessions.get(session_id) if session_id is not None else None
        if session is None:
            return await self._ask_unlogged(ctx, execution, reason), execution
        book = ApprovalBook.of(session)
        if book.always_allows(execution.name) and book.request_of(execution.call_id) is None:
            return _ALLOW, execution  # (a parked call's own request is still answered)
        request, resolved = await settle_approval(ctx, session, execution, reason)
        if resolved.decision in ("deny", "cancelled"):
            return Deny(denial_text(request, resolved)), execution
        edited = resolved.arguments
        if edited is not None:
            execution = _with_arguments(execution, dumps_json(edited), edited)
        return _ALLOW, execution

    async def _ask_unlogged(self, ctx: Context, execution: ToolExecution, reason: str) -> Allow | Deny:
        approval = ctx.get_service("approval")
        if approval is None:
            return Deny(
                f"{reason}; it needs approval, but this harness has no approval channel (no 'approval' service)"
            )
        try:
            approved = await approval.approve(execution, reason)
        except Exception as exc:  # noqa: BLE001 - a failing approval channel fails closed, never allows
            return Deny(f"{reason}; asking for approval failed ({type(exc).__name__}: {exc})")
        if approved is True or (isinstance(approved, ApprovalAnswer) and approved.decision in ("once", "always")):
            return _ALLOW
        if isinstance(approved, Deny):  # the channel says why: the user's reason, or that nobody was asked
            return approved
        return Deny(f"the user rejected the call ({reason})")

    def check_arguments(self, name: str, arguments: str, agent: AgentRef = None) -> FrozenDict:
        """``arguments`` (JSON text) parsed and checked against tool ``name``'s schema, as a call's are.

        :raises ValueError: with the ``INVALID_ARGS`` text the model would get, or naming an unknown tool.
        """
        entry = self._entry(name, _agent_id(agent))
        if entry is None:
            msg = f"there is no tool named {name!r} to check arguments for"
            raise ValueError(msg)
        parsed = _parse(entry, arguments)
        if isinstance(parsed, ToolResult):
            text = parsed.content[0].text if parsed.content and isinstance(parsed.content[0], Text) else "invalid"
            raise ValueError(text.removeprefix("Error: "))
        return parsed

    async def _post_execute(self, execution: ToolExecution, result: ToolResult) -> ToolResult:
        decision = await self._ctx.events.waterfall(
            "tools/post-execute", _ACCEPT, execution=execution, result=result
        )
        if decision is _ACCEPT:
            return result
        if isinstance(decision, Accept):
            if decision.content is not None:
                result = attrs.evolve(result, content=decision.content)
            if decision.additional_context:
                result = attrs.evolve(
                    result, additional_context=(*result.additional_context, *decision.additional_context)
                )
            return result
        if isinstance(decision, Reject):
            return _error(
                "DENIED",
                f"Error: the result of tool {execution.name!r} was rejected: {decision.feedback}",
            )
        msg = f"a tools/post-execute listener returned {decision!r}; expected Accept(...), Reject(feedback) or None"
        raise TypeError(msg)

    async def _finish(self, execution: ToolExecution, result: ToolResult) -> ToolResult:
        await self._ctx.events.notify("tools/result", execution=execution, result=result)
        return result

    def _unknown_tool(self, execution: ToolExecution) -> ToolResult:
        available = self.names(execution.agent_id)
        if available:
            hint = f"Available tools: {', '.join(available)}. Call one of these by its exact name."
        else:
            hint = "No tools are available; answer without calling a tool."
        return _error("UNKNOWN_TOOL", f"Error: there is no tool named {execution.name!r}. {hint}")


# ---------------------------------------------------------------------- pipeline steps


def _error(code: ToolErrorCode, message: str) -> ToolResult:
    return ToolResult(content=(Text(message),), is_error=True, error_code=code)


def _denied(execution: ToolExecution, reason: str) -> ToolResult:
    return _error(
        "DENIED",
        f"Error: the call to tool {execution.name!r} was denied: {reason.rstrip('. ')}. Do not repeat the same call; "
        "try another approach, or ask the user.",
    )


def _aborted(execution: ToolExecution) -> ToolResult:
    return _error(
        "ABORTED",
        f"Error: the call to tool {execution.name!r} was aborted because the turn was cancelled; "
        "it may not have finished. Check its effects before calling it again.",
    )


def _with_parsed(execution: ToolExecution, parsed: FrozenDict) -> ToolExecution:
    """``attrs.evolve(execution, parsed=parsed)`` spelt out: a third of evolve's cost, once per call
    (a test checks that it keeps every field)."""
    return ToolExecution(
        call_id=execution.call_id,
        name=execution.name,
        arguments=execution.arguments,
        parsed=parsed,
        agent_id=execution.agent_id,
        session_id=execution.session_id,
        turn=execution.turn,
        step=execution.step,
        cwd=execution.cwd,
        ctx=execution.ctx,
        signal=execution.signal,
    )


def _with_arguments(execution: ToolExecution, arguments: str, parsed: FrozenDict) -> ToolExecution:
    """The call with arguments an approval edited (text and parsed)."""
    return attrs.evolve(execution, arguments=arguments, parsed=parsed)


def _parse(entry: _Entry, arguments: str) -> FrozenDict | ToolResult:
    """The arguments as a frozen object, or the ``INVALID_ARGS`` result that explains why not."""
    return parse_arguments(entry.tool.name, arguments, entry.validator, entry.accept)


async def _run_body(tool: Tool, execution: ToolExecution, unscoped: CancelSignal | None = None) -> ToolResult:
    """Call the body (with its timeout) and turn what it returns or raises into a result.

    ``unscoped`` is the signal when ``execute`` armed no cancel scope (a plain function): an
    awaitable it returns is then awaited in a scope of its own.
    """
    try:
        kwargs = tool.keyword_arguments(execution.parsed or FrozenDict(), execution)
    except (TypeError, ValueError) as exc:
        return _error(
            "INVALID_ARGS",
            f"Error: invalid arguments for tool {tool.name!r}: {exc}. Fix them and call the tool again.",
        )
    try:
        if tool.timeout is None:
            value = tool.function(**kwargs)
            if tool.is_async:
                value = await value
            elif value.__class__ is not str and inspect.isawaitable(value):  # a plain function's awaitable
                value = await _interruptible(value, unscoped)
        else:
            with anyio.move_on_after(tool.timeout) as deadline:
                value = tool.function(**kwargs)
                if tool.is_async or inspect.isawaitable(value):
                    value = await value
            if deadline.cancelled_caught:
                return _error(
                    "TIMEOUT",
                    f"Error: tool {tool.name!r} did not finish within its timeout of {tool.timeout:g} s and was "
                    "stopped. Try a smaller or simpler request, or a different approach.",
                )
    except _BodyAborted:
        raise
    except ToolError as exc:  # the body answers the model with an error, in its own words
        return _error("TOOL_ERROR", f"Error: {exc}")
    except Exception as exc:  # noqa: BLE001 - a failing body is a result for the model; cancellation passes
        return _error(
            "TOOL_ERROR",
            f"Error: tool {tool.name!r} failed: {type(exc).__name__}: {exc}. Check the arguments, or try a "
            "different approach; the same call will likely fail again.",
        )
    return _to_result(tool, value)


class _BodyAborted(Exception):
    """Internal: the turn was cancelled while the body's awaitable ran outside a cancel scope."""


async def _interruptible(value: Awaitable[object], signal: CancelSignal | None) -> object:
    """Await what a plain function returned, interrupted by ``signal`` (then ``_BodyAborted``).

    ``signal`` is ``None`` under ``execute``'s own scope, which a cancel already reaches.
    """
    if signal is None:
        return await value
    with anyio.CancelScope() as scope:
        forget = signal.on_cancel(scope.cancel)
        try:
            return await value
        finally:
            forget()
    raise _BodyAborted  # reached only when the scope caught its cancellation


def _to_result(tool: Tool, value: object) -> ToolResult:
    """A body's return value as a result: str -> text, blocks -> themselves, other JSON -> JSON text."""
    if type(value) is str:
        return ToolResult.of_text(value)
    if isinstance(value, ToolResult):
        if value.is_error and value.error_code is None:
            return attrs.evolve(value, error_code="TOOL_ERROR")
        return value
    if isinstance(value, Text | Image):
        return ToolResult(content=(value,))
    if isinstance(value, Sequence) and value and all(isinstance(item, Text | Image) for item in value):
        return ToolResult(content=tuple(value))
    try:
        text = dumps_json(freeze_json(value, where=f"tool {tool.name}", root="result"))
    except ValueError as exc:
        return _error(
            "TOOL_ERROR",
            f"Error: tool {tool.name!r} returned a value that cannot be sent to the model ({exc}). "
            "This is a bug in the tool; try a different approach.",
        )
    return ToolResult(content=(Text(text),))


# ---------------------------------------------------------------------- the view and the plugin


def _owned_by(ctx: Context, remove: Callable[[], None]) -> Disposer:
    """Record ``remove`` as an effect of ``ctx``; if ``ctx`` is already disposed, undo and re-raise."""
    try:
        return ctx.effect(remove)
    except BaseException:
        remove()
        raise


class ToolsView:
    """``ctx.tools``: the runtime seen from one context, which owns what is registered through it.

    Reads (``get``, ``names``, ``schemas``) default to this context's agent, if it has one.
    """

    def __init__(self, runtime: ToolRuntime, ctx: Context) -> None:
        self._runtime = runtime
        self._ctx = ctx

    @property
    def runtime(self) -> ToolRuntime:
        return self._runtime

    def register(self, tool_or_function: Tool | Callable[..., Any]) -> Disposer:
        """Register a tool (or a typed function, made a tool with ``@tool``) in this context's scope.

        Through ``agent.ctx`` it is that agent's own and shadows a global tool of the same name.
        Undone when this context is disposed.

        :raises DuplicateRegistrationError: naming who registered the name first in this scope.
        """
        new = tool_or_function if isinstance(tool_or_function, Tool) else tool(tool_or_function)
        remove = self._runtime.add(new, scope=self._ctx.agent_scope, owner=self._ctx.label)
        return _owned_by(self._ctx, remove)

    def guard(self, guard: Guard) -> Disposer:
        """Add a monotonic guard: it returns a deny reason or ``None``, and can never re-allow a call.

        Through ``agent.ctx`` it covers only that agent's calls. A guard that raises denies.
        Undone when this context is disposed.
        """
        remove = self._runtime.add_guard(guard, scope=self._ctx.agent_scope)
        return _owned_by(self._ctx, remove)

    def restrict(self, names: Iterable[str]) -> Disposer:
        """Through ``agent.ctx``: that agent sees (and may call) only the tools in ``names``.

        Several restrictions narrow each other. Undone when this context is disposed.

        :raises ValueError: when this context belongs to no agent.
        """
        scope = self._ctx.agent_scope
        if scope is None:
            msg = "tools.restrict limits one agent: call it through that agent's context (agent.ctx)"
            raise ValueError(msg)
        return _owned_by(self._ctx, self._runtime.restrict(names, scope=scope))

    def _agent(self, agent: AgentRef) -> AgentRef:
        return self._ctx.agent_scope if agent is None else agent

    def get(self, name: str, agent: AgentRef = None) -> Tool | None:
        return self._runtime.get(name, self._agent(agent))

    def names(self, agent: AgentRef = None) -> tuple[str, ...]:
        return self._runtime.names(self._agent(agent))

    def schemas(self, agent: AgentRef = None) -> tuple[FrozenDict, ...]:
        return self._runtime.schemas(self._agent(agent))

    def is_parallel_safe(self, name: str, arguments: str | Mapping[str, Any], agent: AgentRef = None) -> bool:
        return self._runtime.is_parallel_safe(name, arguments, self._agent(agent))

    async def execute(self, execution: ToolExecution) -> ToolResult:
        return await self._runtime.execute(execution)


class ToolsPlugin:
    """Provides ``ctx.tools``: the default tool runtime."""

    name = "tools"
    provides: ClassVar[tuple[str, ...]] = ("tools",)

    def start(self, ctx: Context) -> None:
        ctx.provide("tools", ToolRuntime(ctx))
