"""Contexts: the services a plugin or agent sees, and the scope that undoes what it registered.

Every registration made through a context returns a disposer and is recorded as an *effect*;
disposing the context disposes its children first (newest first), then undoes its effects LIFO.
An agent's context is an *agent scope*: hook plugins registered through it, or through any
context below it, hear only that agent's events (and those of agents it owns).
"""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import anyio
import anyio.abc

from dsh_core.vocabulary._errors import DuplicateRegistrationError, MissingServiceError, ScopeDisposedError

if TYPE_CHECKING:
    from dsh_core.host._dispatch import Dispatcher
    from dsh_core.services.agents import AgentsService
    from dsh_core.services.llm_runtime import LlmService
    from dsh_core.services.sessions import SessionsService
    from dsh_core.services.subagents import SubagentsService
    from dsh_core.services.system_prompt import SystemPromptService
    from dsh_core.services.tools import ToolsService

__all__ = ["INHERIT", "Context", "Disposer", "Effect", "Services"]

logger = logging.getLogger("dsh.context")

#: Undoes one registration. Idempotent. May be sync or async; ``Context.dispose`` awaits either.
Disposer: TypeAlias = Callable[[], "Awaitable[None] | None"]


class _Inherit(enum.Enum):
    INHERIT = enum.auto()


#: ``Context.child(owner=INHERIT)``: the owner is the nearest agent above the parent context.
INHERIT: Final = _Inherit.INHERIT


class Effect:
    """The disposer of one registration: call it to undo now, or ``forget()`` it to drop the duty."""

    __slots__ = ("_effects", "_key")

    def __init__(self, effects: dict[int, Disposer], key: int) -> None:
        self._effects = effects
        self._key = key

    def __call__(self) -> Awaitable[None] | None:
        undo = self._effects.pop(self._key, None)
        return None if undo is None else undo()

    def forget(self) -> None:
        """Stop tracking the registration without undoing it (its owner undid it some other way)."""
        self._effects.pop(self._key, None)


class Services:
    """The harness-wide service table: one provider per service name."""

    def __init__(self) -> None:
        self.by_name: dict[str, object] = {}
        self.provider_of: dict[str, str] = {}


class Context:
    """What a plugin or agent is given: services as attributes, and a scope for its registrations.

    ``ctx.sessions``, ``ctx.llm``, ``ctx.tools``, ``ctx.system_prompt``, ``ctx.agents``,
    ``ctx.agent_loop`` and any other provided service are looked up by name; a service nobody
    provides raises ``MissingServiceError`` (an ``AttributeError``, so ``getattr(ctx, name, None)``
    works for optional ones).
    """

    # The core services, typed for mypy by the Protocol a provider must satisfy; at run time
    # they are looked up by ``__getattr__`` like any other service.
    sessions: SessionsService
    llm: LlmService
    tools: ToolsService
    system_prompt: SystemPromptService
    agents: AgentsService
    subagents: SubagentsService

    def __init__(
        self,
        *,
        services: Services,
        events: Dispatcher,
        parent: Context | None = None,
        label: str = "root",
        agent_id: str | None = None,
        config: Any = None,
        task_group: anyio.abc.TaskGroup | None = None,
    ) -> None:
        self._services = services
        self._task_group: anyio.abc.TaskGroup | None = (
            task_group if task_group is not None or parent is None else parent._task_group
        )
        self._events = events
        self._parent = parent
        self.label = label
        self.config = config
        #: the id of the nearest agent this context belongs to (itself or an ancestor), if any
        self.agent_scope: str | None = agent_id if agent_id is not None else (parent.agent_scope if parent else None)
        self._views: dict[str, tuple[object, Any]] = {}
        self._effects: dict[int, Disposer] = {}
        self._next_effect = 0
        self._children: dict[int, Context] = {}
        self._disposed = False
        self._disposing: anyio.Event | None = None

    # ------------------------------------------------------------------ services

    def __getattr__(self, name: str) -> Any:
        # Only reached when ordinary attribute lookup fails: resolve a service by name.
        if name.startswith("_"):
            raise AttributeError(name)
        service = self._services.by_name.get(name)
        if service is None:
            known = ", ".join(sorted(self._services.by_name)) or "none"
            msg = f"no loaded plugin provides the service {name!r} (services provided: {known})"
            raise MissingServiceError(msg, service=name)
        return self._view_of(name, service)

    def _view_of(self, name: str, service: object) -> Any:
        """A service with a ``bind(ctx)`` method is seen through a view bound to this context.

        That is how ``ctx.tools.register(t)`` knows which scope the tool belongs to and undoes the
        registration when this context is disposed.
        """
        cached = self._views.get(name)
        if cached is not None and cached[0] is service:
            return cached[1]
        bind = getattr(service, "bind", None)
        view = service if bind is None else bind(self)
        self._views[name] = (service, view)
        return view

    def get_service(self, name: str, default: Any = None) -> Any:
        """The service ``name`` (bound to this context), or ``default`` when none is provided."""
        service = self._services.by_name.get(name)
        return default if service is None else self._view_of(name, service)

    def provide(self, name: str, service: object) -> Disposer:
        """Make ``service`` available as ``ctx.<name>`` until this context is disposed."""
        self._check_open("provide a service")
        if not name.isidentifier():
            msg = f"service name {name!r} must be a Python identifier (it is read as ctx.{name})"
            raise ValueError(msg)
        if name in self._services.by_name:
            msg = f"service {name!r} is already provided by {self._services.provider_of[name]!r}"
            raise DuplicateRegistrationError(msg)
        self._services.by_name[name] = service
        self._services.provider_of[name] = self.label

        def withdraw() -> None:
            if self._services.by_name.get(name) is service:
                del self._services.by_name[name]
                del self._services.provider_of[name]

        return self.effect(withdraw)

    @property
    def events(self) -> Dispatcher:
        """The event dispatcher: ``await ctx.events.notify("agent/status", agent=..., status=...)``."""
        return self._events

    # ------------------------------------------------------------------ scope

    @property
    def disposed(self) -> bool:
        return self._disposed or self._disposing is not None

    @property
    def parent(self) -> Context | None:
        return self._parent

    def child(
        self, label: str, *, agent_id: str | None = None, owner: str | _Inherit | None = INHERIT, config: Any = None
    ) -> Context:
        """A child scope, disposed with this one (before this one's own effects are undone).

        With ``agent_id`` the child is that agent's scope, owned by ``owner`` (an agent id; by
        default the nearest agent above this context): the owner's scoped plugins hear it too.
        """
        self._check_open("create a child context")
        child = Context(
            services=self._services,
            events=self._events,
            parent=self,
            label=label,
            agent_id=agent_id,
            config=config,
        )
        self._children[id(child)] = child
        if agent_id is not None:
            owner_id = self.agent_scope if isinstance(owner, _Inherit) else owner
            child.effect(self._events.set_owner(agent_id, owner_id))
        return child

    def effect(self, undo: Disposer) -> Effect:
        """Record ``undo`` to run when this context is disposed; returns an idempotent disposer."""
        return Effect(self._effects, self._add_effect(undo))

    def _add_effect(self, undo: Disposer) -> int:
        self._check_open("register an effect")
        key = self._next_effect
        self._next_effect += 1
        self._effects[key] = undo
        return key

    def start_task(self, fn: Callable[..., Awaitable[object]], *args: object, name: str | None = None) -> Disposer:
        """Run ``fn(*args)`` as a task owned by this context: disposing the context cancels it and waits.

        A failure of the task is logged, never raised into the harness. Returns an async disposer
        that cancels the task and waits for it to finish.
        """
        if self._task_group is None:
            msg = "cannot start a task: this context does not belong to a running Harness"
            raise RuntimeError(msg)
        scope = anyio.CancelScope()
        finished = anyio.Event()
        label = name or getattr(fn, "__qualname__", repr(fn))

        async def stop() -> None:
            scope.cancel()
            await finished.wait()

        effect = self.effect(stop)

        async def run() -> None:
            try:
                with scope:
                    await fn(*args)
            except Exception:
                logger.exception("task %r of context %r failed", label, self.label)
            finally:
                finished.set()
                effect.forget()

        self._task_group.start_soon(run, name=label)

        async def dispose() -> None:
            effect.forget()
            await stop()

        return dispose

    def register_plugin(self, plugin: object, name: str | None = None) -> Disposer:
        """Register ``plugin``'s hookimpls; in an agent scope, it hears only that agent's events."""
        self._check_open("register a hook plugin")
        if name is None:
            name = f"{self.label}/{type(plugin).__name__}@{id(plugin):x}"
        registration = self._events.register(plugin, name=name, scope=self.agent_scope)
        return self.effect(lambda: self._events.unregister(registration))

    async def dispose(self) -> None:
        """Dispose children (newest first), then undo effects LIFO. Idempotent; never raises.

        Runs shielded from cancellation so that a cancelled owner still releases everything.
        """
        if self._disposing is not None:
            await self._disposing.wait()
            return
        self._disposing = anyio.Event()
        try:
            with anyio.CancelScope(shield=True):
                for child in reversed(list(self._children.values())):
                    await child.dispose()
                while self._effects:
                    key = next(reversed(self._effects))
                    undo = self._effects.pop(key)
                    try:
                        result = undo()
                        if inspect.isawaitable(result):
                            await result
                    except Exception:
                        logger.exception("context %r: an effect failed while being undone", self.label)
        finally:
            self._disposed = True
            if self._parent is not None:
                self._parent._children.pop(id(self), None)
            self._disposing.set()

    def _check_open(self, what: str) -> None:
        if self._disposed or self._disposing is not None:
            msg = f"cannot {what}: context {self.label!r} is disposed"
            raise ScopeDisposedError(msg)

    def __repr__(self) -> str:
        scope = f" agent={self.agent_scope!r}" if self.agent_scope else ""
        return f"<Context {self.label!r}{scope}{' disposed' if self.disposed else ''}>"
