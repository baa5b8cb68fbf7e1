"""The agent registry: live agents by id, the factory slot the loop fills, and create/resume through it.

``ctx.agents.create(...)`` and ``ctx.agents.resume(...)`` hand off to the registered
``AgentFactory`` (the agent loop plugin), passing the caller's context as the owner. The factory
publishes an agent with ``enter`` (exact, idempotent detach) and ``announce`` (``agent/created``,
which a listener may veto by raising). ``agent_events`` and ``assemble_context_for`` are the
helpers a loop uses to emit ``agent/*`` events and assemble an agent's system prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from dsh_core.services.system_prompt import AssemblyContext
from dsh_core.vocabulary._agent_types import Agent, AgentHandle, AgentOptions, Setup
from dsh_core.vocabulary._errors import DuplicateRegistrationError, PluginError

if TYPE_CHECKING:
    from dsh_core.host._context import Context, Disposer
    from dsh_core.session_log._event import SessionEvent

__all__ = ["AgentEvents", "AgentFactory", "AgentRegistry", "AgentsPlugin", "AgentsService", "AgentsView", "MissingAgentFactoryError", "agent_events", "assemble_context_for"]

_T = TypeVar("_T")


class MissingAgentFactoryError(PluginError):
    """``create`` or ``resume`` was called, but no plugin registered an agent factory."""


class AgentFactory(Protocol):
    """What builds agents (the agent loop plugin): ``ctx.agents.set_factory(factory)``.

    ``owner_ctx`` is the caller's context: the new agent is disposed with it, unless its handle is
    disposed first. Both return once the agent is published (entered and announced).
    """

    async def create_agent(
        self,
        owner_ctx: Context,
        session_id: str,
        *,
        meta: Mapping[str, Any] | None = None,
        seed: Sequence[SessionEvent] | None = None,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
    ) -> AgentHandle: ...

    async def resume_agent(
        self,
        owner_ctx: Context,
        resume_session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
        run_pending: bool = False,
    ) -> AgentHandle: ...


class AgentsService(Protocol):
    """What ``ctx.agents`` offers, and what a replacement ``agents`` service must provide (after ``bind(ctx)``)."""

    def set_factory(self, factory: AgentFactory) -> Disposer: ...

    async def create(
        self,
        session_id: str,
        *,
        meta: Mapping[str, Any] | None = None,
        seed: Sequence[SessionEvent] | None = None,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
    ) -> AgentHandle: ...

    async def resume(
        self,
        resume_session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
        run_pending: bool = False,
    ) -> AgentHandle: ...

    def enter(self, agent: Agent) -> Callable[[], None]: ...

    async def announce(self, agent: Agent) -> None: ...

    def is_announced(self, agent: Agent) -> bool: ...

    def get(self, agent_id: str) -> Agent | None: ...

    def list(self) -> tuple[Agent, ...]: ...


class _Entry:
    __slots__ = ("agent", "announced")

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.announced = False


class AgentRegistry:
    """The ``agents`` service: the registry of live agents and the factory slot.

    Seen through ``ctx.agents`` as an ``AgentsView``, whose ``create``/``resume`` make the
    calling context the new agent's owner.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._factory: AgentFactory | None = None
        self._factory_owner = ""
        self._entries: dict[str, _Entry] = {}

    def bind(self, ctx: Context) -> AgentsView:
        return AgentsView(self, ctx)

    # ------------------------------------------------------------------ the factory slot

    @property
    def factory(self) -> AgentFactory | None:
        return self._factory

    def install_factory(self, factory: AgentFactory, *, owner: str = "?") -> Callable[[], None]:
        """Fill the factory slot; returns an exact, idempotent remover.

        :raises DuplicateRegistrationError: when another factory is already registered.
        """
        if self._factory is not None:
            msg = (
                f"an agent factory is already registered (by {self._factory_owner!r}); "
                "load only one agent loop plugin (plugins.disable the other)"
            )
            raise DuplicateRegistrationError(msg)
        self._factory = factory
        self._factory_owner = owner

        def remove() -> None:
            if self._factory is factory:
                self._factory = None
                self._factory_owner = ""

        return remove

    def _require_factory(self) -> AgentFactory:
        if self._factory is None:
            msg = "no agent factory registered (load the agent loop plugin)"
            raise MissingAgentFactoryError(msg, plugin="agents")
        return self._factory

    async def create(
        self,
        owner_ctx: Context,
        session_id: str,
        *,
        meta: Mapping[str, Any] | None = None,
        seed: Sequence[SessionEvent] | None = None,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
    ) -> AgentHandle:
        """Create an agent owned by ``owner_ctx`` through the factory; see ``AgentsView.create``."""
        _check_id(session_id, "session_id")
        _check_options(agent_options)
        factory = self._require_factory()
        return await factory.create_agent(
            owner_ctx, session_id, meta=meta, seed=seed, agent_options=agent_options, setup=setup
        )

    async def resume(
        self,
        owner_ctx: Context,
        resume_session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
        run_pending: bool = False,
    ) -> AgentHandle:
        """Resume a persisted agent owned by ``owner_ctx`` through the factory; see ``AgentsView.resume``."""
        _check_id(resume_session_id, "resume_session_id")
        _check_options(agent_options)
        if not isinstance(run_pending, bool):
            msg = f"run_pending must be a bool, got {type(run_pending).__name__}"
            raise TypeError(msg)
        factory = self._require_factory()
        if run_pending:  # only then: a factory written before run_pending existed still resumes
            return await factory.resume_agent(
                owner_ctx, resume_session_id, agent_options=agent_options, setup=setup, run_pending=True
            )
        return await factory.resume_agent(
            owner_ctx, resume_session_id, agent_options=agent_options, setup=setup
        )

    # ------------------------------------------------------------------ the registry

    def enter(self, agent: Agent) -> Callable[[], None]:
        """Insert ``agent`` without announcing it; returns its detach.

        The detach is idempotent and exact: it removes this very entry only, so a stale detach
        never removes a later agent that took the same id.

        :raises DuplicateRegistrationError: when an agent with that id is registered.
        :raises ValueError: when ``agent.id`` differs from its session's id.
        """
        agent_id = agent.id
        session_id = agent.session.id
        if session_id != agent_id:
            msg = f"agent id {agent_id!r} does not match its session id {session_id!r}; an agent shares its session's id"
            raise ValueError(msg)
        if agent_id in self._entries:
            msg = f"agent {agent_id!r} is already registered; dispose it first, or use another session id"
            raise DuplicateRegistrationError(msg)
        entry = _Entry(agent)
        self._entries[agent_id] = entry

        def detach() -> None:
            if self._entries.get(agent_id) is entry:
                del self._entries[agent_id]

        return detach

    async def announce(self, agent: Agent) -> None:
        """Emit ``agent/created`` for an entered agent; a listener that raises vetoes (it propagates).

        After a veto the caller rolls back: it emits the paired ``agent/disposed`` and detaches.

        :raises RuntimeError: when the agent is not entered, or was already announced.
        """
        entry = self._entries.get(agent.id)
        if entry is None or entry.agent is not agent:
            msg = (
                f"agent {agent.id!r} is not entered in the registry; call enter(agent) before announce(agent)"
            )
            raise RuntimeError(msg)
        if entry.announced:
            msg = f"agent {agent.id!r} was already announced; announce an agent once"
            raise RuntimeError(msg)
        entry.announced = True
        await self._ctx.events.notify("agent/created", agent=agent)

    def is_announced(self, agent: Agent) -> bool:
        """Whether ``agent`` (this very object) is entered and its ``agent/created`` was emitted."""
        entry = self._entries.get(agent.id)
        return entry is not None and entry.agent is agent and entry.announced

    def get(self, agent_id: str) -> Agent | None:
        """The live agent with that id, or ``None``."""
        entry = self._entries.get(agent_id)
        return None if entry is None else entry.agent

    def list(self) -> tuple[Agent, ...]:
        """The live agents, in the order they were entered."""
        return tuple(entry.agent for entry in self._entries.values())


def _check_id(value: object, name: str) -> None:
    if not isinstance(value, str):
        msg = f"{name} must be a str, got {type(value).__name__}"
        raise TypeError(msg)
    if not value:
        msg = f"{name} must not be empty"
        raise ValueError(msg)


def _check_options(options: object) -> None:
    if options is not None and not isinstance(options, AgentOptions):
        msg = f"agent_options must be an AgentOptions or None, got {type(options).__name__}"
        raise TypeError(msg)


class AgentsView:
    """``ctx.agents``: the registry seen from one context, which owns the agents it creates."""

    def __init__(self, registry: AgentRegistry, ctx: Context) -> None:
        self._registry = registry
        self._ctx = ctx

    @property
    def registry(self) -> AgentRegistry:
        return self._registry

    def set_factory(self, factory: AgentFactory) -> Disposer:
        """Register the agent factory until this context is disposed.

        :raises DuplicateRegistrationError: when another factory is already registered.
        """
        remove = self._registry.install_factory(factory, owner=self._ctx.label)
        try:
            return self._ctx.effect(remove)
        except BaseException:
            remove()
            raise

    async def create(
        self,
        session_id: str,
        *,
        meta: Mapping[str, Any] | None = None,
        seed: Sequence[SessionEvent] | None = None,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
    ) -> AgentHandle:
        """Create and publish an agent whose id is ``session_id``, owned by this context.

        ``setup`` runs against the unpublished agent's context (register its tools, sections,
        listeners) before it is announced.

        :raises MissingAgentFactoryError: when no agent loop plugin registered a factory.
        """
        return await self._registry.create(
            self._ctx, session_id, meta=meta, seed=seed, agent_options=agent_options, setup=setup
        )

    async def resume(
        self,
        resume_session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
        run_pending: bool = False,
    ) -> AgentHandle:
        """Load a persisted session and publish its agent, owned by this context.

        The prompts still pending in the log are restored; they wait for the next ``send``
        unless ``run_pending`` is true, which starts a turn for them at once (a host that
        resumes a session to finish its work, such as a remote worker, wants that).

        :raises MissingAgentFactoryError: when no agent loop plugin registered a factory.
        """
        return await self._registry.resume(
            self._ctx, resume_session_id, agent_options=agent_options, setup=setup, run_pending=run_pending
        )

    def enter(self, agent: Agent) -> Callable[[], None]:
        """See ``AgentRegistry.enter``."""
        return self._registry.enter(agent)

    async def announce(self, agent: Agent) -> None:
        """See ``AgentRegistry.announce``."""
        await self._registry.announce(agent)

    def is_announced(self, agent: Agent) -> bool:
        return self._registry.is_announced(agent)

    def get(self, agent_id: str) -> Agent | None:
        return self._registry.get(agent_id)

    def list(self) -> tuple[Agent, ...]:
        return self._registry.list()


# ---------------------------------------------------------------------- helpers for a loop


class AgentEvents:
    """Dispatch ``agent/*`` events about one agent: every call adds ``agent=agent``."""

    __slots__ = ("agent", "ctx")

    def __init__(self, ctx: Context, agent: Agent) -> None:
        self.ctx = ctx
        self.agent = agent

    async def notify(self, event: str, /, **kwargs: Any) -> None:
        await self.ctx.events.notify(event, agent=self.agent, **kwargs)

    async def waterfall(self, event: str, value: _T, /, **kwargs: Any) -> _T:
        return await self.ctx.events.waterfall(event, value, agent=self.agent, **kwargs)

    async def serial(self, event: str, /, **kwargs: Any) -> Any:
        return await self.ctx.events.serial(event, agent=self.agent, **kwargs)


def agent_events(ctx: Context, agent: Agent) -> AgentEvents:
    """Emit ``agent/*`` events about ``agent`` through ``ctx``: ``await agent_events(ctx, a).notify("agent/status", status="idle")``."""
    return AgentEvents(ctx, agent)


def assemble_context_for(agent: Agent) -> AssemblyContext:
    """What ``ctx.system_prompt.assemble`` needs for ``agent``: its id, scope, cwd and model."""
    return AssemblyContext.for_agent(agent)


class AgentsPlugin:
    """Provides ``ctx.agents``: the agent registry and its factory slot."""

    name = "agents"
    provides: ClassVar[tuple[str, ...]] = ("agents",)

    def start(self, ctx: Context) -> None:
        ctx.provide("agents", AgentRegistry(ctx))
