"""The sub-agent registry: named providers that run a task in a child agent, and the values they trade.

``ctx.subagents`` holds *providers* (an in-process one lives in ``dsh-subagents``; others could run
a child in a subprocess or a remote service). ``await ctx.subagents.start(name, request)`` asks one
to start a child for a ``SubagentRequest`` and returns its ``SubagentRun``; ``await run.result``
gives the ``SubagentResult`` once the child has finished. The loop knows nothing of any of this.

Both registrations and runs belong to the context they were made through: disposing that context
withdraws the provider and disposes the runs it started (a run disposed first is forgotten there).

Errors (under ``DshError``)::

    SubagentError(DshError)
      + UnknownSubagentProviderError(SubagentError, LookupError)   .name
      + SubagentRefusedError(SubagentError, ValueError)            a provider declined the request
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import attrs

from dsh_core.vocabulary._content import validate_optional_str, validate_str
from dsh_core.vocabulary._errors import DshError, DuplicateRegistrationError, ScopeDisposedError
from dsh_core.vocabulary._llm_types import Failure

if TYPE_CHECKING:
    from dsh_core.host._context import Context, Disposer, Effect
    from dsh_core.vocabulary._agent_types import Agent

__all__ = ["SubagentError", "SubagentProvider", "SubagentRefusedError", "SubagentRegistry", "SubagentRegistryPlugin", "SubagentRequest", "SubagentResult", "SubagentRun", "SubagentsService", "SubagentsView", "UnknownSubagentProviderError"]


# ---------------------------------------------------------------------- errors


class SubagentError(DshError):
    """Base of the sub-agent registry's errors."""


class UnknownSubagentProviderError(SubagentError, LookupError):
    """``start`` named a provider that nobody registered."""

    def __init__(self, message: str, *, name: str) -> None:
        super().__init__(message)
        self.name = name


class SubagentRefusedError(SubagentError, ValueError):
    """A provider declined a request before starting anything (depth limit, unknown tool, ...).

    The message is written for the model that asked: what was refused, and what to do instead.
    """


# ---------------------------------------------------------------------- values


def _non_empty_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    validate_str(instance, attribute, value)  # checks that it is a str
    if not str(value).strip():
        msg = f"{type(instance).__name__}.{attribute.name} must not be empty"
        raise ValueError(msg)


def _tool_names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        msg = f"SubagentRequest.tools must be a sequence of tool names, got the str {value!r}"
        raise TypeError(msg)
    names = tuple(value)
    for name in names:
        if not isinstance(name, str):
            msg = f"SubagentRequest.tools must hold tool names (str), got {type(name).__name__} {name!r}"
            raise TypeError(msg)
    return tuple(dict.fromkeys(names))  # duplicates dropped, order kept


def _depth(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not int:
        msg = f"SubagentRequest.depth must be an int, got {type(value).__name__}"
        raise TypeError(msg)
    if value < 1:
        msg = f"SubagentRequest.depth is the child's depth (a top-level agent is 0), so it must be >= 1, got {value}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class SubagentRequest:
    """What a child should do, and who asks.

    ``tools`` restricts the tools the child may use to these names (``None``: no restriction
    beyond what its parent has). ``parent_ctx`` is the asking agent's context (an in-process
    provider creates the child through it, so the child is disposed with the parent);
    ``parent_id`` that agent's id. ``depth`` is the child's depth: a top-level agent is at 0, its
    children at 1.
    """

    description: str = attrs.field(validator=_non_empty_str)
    prompt: str = attrs.field(validator=_non_empty_str)
    tools: tuple[str, ...] | None = attrs.field(default=None, converter=_tool_names)
    parent_ctx: Context | None = attrs.field(default=None, eq=False, repr=False)
    parent_id: str | None = attrs.field(default=None, validator=validate_optional_str)
    depth: int = attrs.field(default=1, validator=_depth)


@attrs.frozen
class SubagentResult:
    """How a child ended: its final answer, why it stopped, and its failure if it failed.

    ``stop_reason`` is the child's turn-end kind for in-process children (``completed``,
    ``stopped``, ``max-tokens``, ``rejected``, ``error``, ``aborted``, ``disposed``); other
    providers use the same words where they apply. ``failure`` is set when it is ``error``.
    """

    output: str = attrs.field(validator=validate_str)
    stop_reason: str = attrs.field(validator=_non_empty_str)
    failure: Failure | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(Failure))
    )

    @property
    def ok(self) -> bool:
        """Whether the child finished its work (``completed``, ``stopped`` or ``max-tokens``)."""
        return self.stop_reason in ("completed", "stopped", "max-tokens")


# ---------------------------------------------------------------------- protocols


@runtime_checkable
class SubagentRun(Protocol):
    """One started child. ``result`` may be awaited any number of times, by any number of tasks.

    ``cancel()`` asks the child to stop (its result then says ``aborted``) and never raises;
    ``dispose()`` releases it (idempotent; an unfinished child's result says so). Reading
    ``result`` must be cheap and side-effect free (``isinstance(x, SubagentRun)`` reads it): return
    a stored awaitable, not a fresh coroutine.
    """

    @property
    def id(self) -> str:
        """The child's id (its session id, for an in-process child)."""
        ...

    @property
    def agent(self) -> Agent | None:
        """The child agent, when it lives in this process."""
        ...

    @property
    def result(self) -> Awaitable[SubagentResult]: ...

    def cancel(self) -> None: ...

    async def dispose(self) -> None: ...


@runtime_checkable
class SubagentProvider(Protocol):
    """Starts children: ``ctx.subagents.register_provider(name, provider)``.

    ``start`` returns once the child exists and will run. It raises ``SubagentRefusedError`` for a request
    it declines, before starting anything; a child that fails later is a result, not an exception.
    """

    async def start(self, request: SubagentRequest) -> SubagentRun: ...


# ---------------------------------------------------------------------- the registry


class SubagentsService(Protocol):
    """What ``ctx.subagents`` offers, and what a replacement must provide (after ``bind(ctx)``)."""

    def register_provider(self, name: str, provider: SubagentProvider) -> Disposer: ...

    def get(self, name: str) -> SubagentProvider | None: ...

    def list(self) -> tuple[str, ...]: ...

    async def start(self, name: str, request: SubagentRequest) -> SubagentRun: ...


class _OwnedRun:
    """A provider's run, tracked as an effect of the context that started it until disposed."""

    __slots__ = ("_effect", "_run")

    def __init__(self, run: SubagentRun, effect: Effect) -> None:
        self._run = run
        self._effect = effect

    @property
    def id(self) -> str:
        return self._run.id

    @property
    def agent(self) -> Agent | None:
        return self._run.agent

    @property
    def result(self) -> Awaitable[SubagentResult]:
        return self._run.result

    def cancel(self) -> None:
        self._run.cancel()

    async def dispose(self) -> None:
        self._effect.forget()
        await self._run.dispose()

    def __repr__(self) -> str:
        return f"<SubagentRun {self.id!r} via {self._run!r}>"


class SubagentRegistry:
    """The ``subagents`` service: providers by name.

    Seen through ``ctx.subagents`` as a ``SubagentsView``, which makes registrations and runs
    effects of that context.
    """

    def __init__(self) -> None:
        self._providers: dict[str, tuple[SubagentProvider, str]] = {}

    def bind(self, ctx: Context) -> SubagentsView:
        return SubagentsView(self, ctx)

    def add(self, name: str, provider: SubagentProvider, *, owner: str = "?") -> Callable[[], None]:
        """Register ``provider`` under ``name``; returns its exact, idempotent remover.

        :raises TypeError: for a name that is not a str, or a provider without ``start``.
        :raises ValueError: for an empty name.
        :raises DuplicateRegistrationError: naming who registered ``name`` first.
        """
        if not isinstance(name, str):
            msg = f"a sub-agent provider's name must be a str, got {type(name).__name__}"
            raise TypeError(msg)
        if not name.strip():
            msg = "a sub-agent provider's name must not be empty"
            raise ValueError(msg)
        if not callable(getattr(provider, "start", None)):
            msg = (
                f"sub-agent provider {name!r} must have an async start(request) -> SubagentRun method, "
                f"got {type(provider).__name__}"
            )
            raise TypeError(msg)
        if (taken := self._providers.get(name)) is not None:
            msg = (
                f"a sub-agent provider named {name!r} is already registered by {taken[1]!r}; "
                "register yours under another name"
            )
            raise DuplicateRegistrationError(msg)
        entry = (provider, owner)
        self._providers[name] = entry

        def remove() -> None:
            if self._providers.get(name) is entry:
                del self._providers[name]

        return remove

    def get(self, name: str) -> SubagentProvider | None:
        """The provider registered under ``name``, or ``None``."""
        entry = self._providers.get(name)
        return None if entry is None else entry[0]

    def list(self) -> tuple[str, ...]:
        """The registered providers' names, in registration order."""
        return tuple(self._providers)

    async def start(self, name: str, request: SubagentRequest) -> SubagentRun:
        """Start a child with provider ``name``; see ``SubagentsView.start``."""
        if not isinstance(request, SubagentRequest):
            msg = f"subagents.start takes a SubagentRequest, got {type(request).__name__}"
            raise TypeError(msg)
        provider = self.get(name)
        if provider is None:
            known = ", ".join(self._providers) or "none"
            msg = (
                f"no sub-agent provider named {name!r} is registered (registered: {known}); "
                "install and enable a plugin that provides one, such as dsh-harness-subagents"
            )
            raise UnknownSubagentProviderError(msg, name=name)
        return await provider.start(request)


class SubagentsView:
    """``ctx.subagents``: the registry seen from one context, which owns what it registers and starts."""

    def __init__(self, registry: SubagentRegistry, ctx: Context) -> None:
        self._registry = registry
        self._ctx = ctx

    @property
    def registry(self) -> SubagentRegistry:
        return self._registry

    def register_provider(self, name: str, provider: SubagentProvider) -> Disposer:
        """Register ``provider`` under ``name`` until this context is disposed; returns its disposer.

        :raises DuplicateRegistrationError: when ``name`` is taken.
        """
        remove = self._registry.add(name, provider, owner=self._ctx.label)
        try:
            return self._ctx.effect(remove)
        except BaseException:
            remove()
            raise

    def get(self, name: str) -> SubagentProvider | None:
        """The provider registered under ``name``, or ``None``."""
        return self._registry.get(name)

    def list(self) -> tuple[str, ...]:
        """The registered providers' names, in registration order."""
        return self._registry.list()

    async def start(self, name: str, request: SubagentRequest) -> SubagentRun:
        """Ask provider ``name`` to start a child; returns the run once the child is running.

        The run belongs to this context: disposing the context disposes the run, unless the run
        was disposed first.

        :raises TypeError: when ``request`` is not a ``SubagentRequest``.
        :raises UnknownSubagentProviderError: when no provider is registered under ``name``.
        :raises SubagentRefusedError: when the provider declines the request.
        :raises ScopeDisposedError: when this context is disposed.
        """
        if self._ctx.disposed:  # fail before a child exists, not after
            msg = f"cannot start a sub-agent: context {self._ctx.label!r} is disposed"
            raise ScopeDisposedError(msg)
        run = await self._registry.start(name, request)
        try:
            effect = self._ctx.effect(run.dispose)
        except ScopeDisposedError:  # the context went away while the provider was starting the child
            await run.dispose()
            raise
        return _OwnedRun(run, effect)


class SubagentRegistryPlugin:
    """Provides ``ctx.subagents`` alone, for a harness that wants the registry without ``dsh-subagents``.

    Not an entry point of the root distribution (SPEC §2 names its six plugins): the
    ``dsh-subagents`` plugin provides the same registry. Pass this one explicitly in ``plugins=``.
    """

    name = "subagent-registry"
    provides: ClassVar[tuple[str, ...]] = ("subagents",)

    def start(self, ctx: Context) -> None:
        ctx.provide("subagents", SubagentRegistry())
