"""The agent-loop plugin: the ``agent_loop`` service, the agents factory, and every agent's lifecycle.

Create and resume are one rollback-covered transaction each: private session, agent and scope;
``setup``; enter both registries; ``session/created``, ``agent/created``, ``agent/session-start``;
only then the driver starts. Teardown is one memoised path, whoever asks for it first (the handle,
the owner context's disposal, or this plugin stopping): stop and drain the driver → detach the
agent → detach the session → unwind the agent's scope.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Self

import anyio
import attrs

from dsh_core.host import Context, Effect
from dsh_core.services import SessionPersistence
from dsh_core.session_log import SessionEvent
from dsh_core.vocabulary import (
    AgentOptions,
    ConfigError,
    DshError,
    DuplicateRegistrationError,
    MissingServiceError,
    Setup,
)

from ._agent import Agent
from ._driver import drive

__all__ = ["AgentLoop", "AgentLoopConfig", "AgentLoopPlugin", "AgentSpec"]

logger = logging.getLogger("dsh.agent_loop")

#: how long teardown waits for a running turn to close before it stops waiting
TEARDOWN_TIMEOUT = 30.0


def _optional_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        msg = f"{attribute.name}: expected a string, got {value!r}"
        raise TypeError(msg)


@attrs.frozen(kw_only=True)
class AgentSpec:
    """One agent created when the plugin starts (``[[plugins.agent-loop.agents]]``)."""

    id: str
    session_id: str | None = attrs.field(default=None, validator=_optional_str)
    model: str | None = attrs.field(default=None, validator=_optional_str)
    resume_session_id: str | None = attrs.field(default=None, validator=_optional_str)
    cwd: str | None = attrs.field(default=None, validator=_optional_str)

    def __attrs_post_init__(self) -> None:
        if self.session_id is not None and self.resume_session_id is not None:
            msg = f"agent {self.id!r}: give session_id (resume or create) or resume_session_id, not both"
            raise ValueError(msg)


def _distinct_ids(instance: object, attribute: attrs.Attribute[Any], value: Sequence[AgentSpec]) -> None:
    seen: set[str] = set()
    for spec in value:
        exact = spec.session_id or spec.resume_session_id
        if exact is None:
            continue
        if exact in seen:
            msg = f"two configured agents use the session id {exact!r}; each session belongs to one agent"
            raise ValueError(msg)
        seen.add(exact)


@attrs.frozen(kw_only=True)
class AgentLoopConfig:
    """``[plugins.agent-loop]``: the agents to create at start."""

    agents: tuple[AgentSpec, ...] = attrs.field(default=(), validator=_distinct_ids)


class _Handle:
    """An ``AgentHandle``: the owner's grip on one agent."""

    def __init__(self, lifecycle: _Lifecycle) -> None:
        self._lifecycle = lifecycle

    @property
    def agent(self) -> Agent:
        return self._lifecycle.agent

    async def dispose(self) -> None:
        """Tear the agent down; idempotent, and every caller awaits the same teardown."""
        await self._lifecycle.teardown()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.dispose()


#: set inside an agent's driver task (and the tasks it starts): teardown must not wait for itself
_DRIVING: ContextVar[str | None] = ContextVar("dsh_driving_agent", default=None)


class _Lifecycle:
    """Everything one agent holds, and the one memoised way to let go of it."""

    def __init__(self, loop: AgentLoop, agent: Agent) -> None:
        self.loop = loop
        self.agent = agent
        self.detach_session: Callable[[], Awaitable[None] | None] | None = None
        self.detach_agent: Callable[[], None] | None = None
        #: agent/created was (being) announced: its agent/disposed is owed
        self.announced = False
        self.owner_effect: Effect | None = None
        #: the driver was started; it is running until ``driver_exited``
        self.driver_started = False
        self.driver_exited = False
        #: made only when teardown has to wait for the driver (an idle agent keeps no Event for it)
        self._driver_done: anyio.Event | None = None
        self._done: anyio.Event | None = None

    def start_driver(self) -> None:
        self.driver_started = True
        agent = self.agent

        async def run() -> None:
            _DRIVING.set(agent.id)
            try:
                await drive(agent)
            finally:
                self.driver_exited = True
                if self._driver_done is not None:
                    self._driver_done.set()

        agent.ctx.start_task(run, name=f"agent-driver:{agent.id}")

    async def teardown(self) -> None:
        """Tear down once; every caller awaits the same teardown.

        Called from inside the agent's own turn (a tool disposing its own agent), it cannot wait
        for the turn to end: the turn is aborted at once and the rest finishes in the background.
        """
        if self._done is not None:
            if _DRIVING.get() != self.agent.id:
                await self._done.wait()
            return
        self._done = done = anyio.Event()
        if _DRIVING.get() == self.agent.id:
            self.agent.machine.stop()
            self.loop.ctx.start_task(self._teardown_shielded, done, name=f"agent-teardown:{self.agent.id}")
            return
        await self._teardown_shielded(done)

    async def _teardown_shielded(self, done: anyio.Event) -> None:
        try:
            with anyio.CancelScope(shield=True):
                await self._teardown()
        finally:
            done.set()

    async def _teardown(self) -> None:
        agent = self.agent
        events = agent.ctx.events
        agent.machine.stop()  # status `disposed` from here on; the driver ends its turn and exits
        if self.driver_started:
            await _contained(events.notify("agent/status", agent=agent, status="disposed"))
            with anyio.move_on_after(TEARDOWN_TIMEOUT) as scope:
                if not self.driver_exited:
                    self._driver_done = self._driver_done or anyio.Event()
                    await self._driver_done.wait()
            if scope.cancelled_caught:
                logger.error("agent %r: the driver did not stop within %ss", agent.id, TEARDOWN_TIMEOUT)
        agent.machine.dispose()  # when_idle() and every run() still waiting return now
        if self.detach_agent is not None:
            self.detach_agent()
            if self.announced:
                await _contained(events.notify("agent/disposed", agent=agent))
        if self.detach_session is not None:
            result = self.detach_session()
            if inspect.isawaitable(result):
                await _contained(result)
        if self.owner_effect is not None:
            self.owner_effect.forget()
        if self.loop.lifecycles.get(agent.id) is self:
            del self.loop.lifecycles[agent.id]
        await agent.ctx.dispose()


async def _contained(awaitable: Awaitable[object]) -> None:
    try:
        await awaitable
    except Exception:
        logger.exception("a listener failed during agent teardown (contained)")


class AgentLoop:
    """The ``agent_loop`` service and the agents factory (``ctx.agents.create`` lands here)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.lifecycles: dict[str, _Lifecycle] = {}
        #: ids of agents being created or resumed: a second create of one fails at once
        self._claimed: set[str] = set()
        self._inflight: set[anyio.CancelScope] = set()
        self._inflight_done: anyio.Event | None = None
        self._closing = False

    def bind(self, ctx: Context) -> AgentLoopView:
        return AgentLoopView(self, ctx)

    # ------------------------------------------------------------------ the factory

    async def create_agent(
        self,
        owner_ctx: Context,
        session_id: str,
        *,
        meta: Mapping[str, Any] | None = None,
        seed: Sequence[SessionEvent] | None = None,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
    ) -> _Handle:
        """Create, set up and publish an agent owned by ``owner_ctx``; roll back on any failure."""
        self._claim(session_id)
        try:
            session = self.ctx.sessions.prepare(session_id, meta=meta, seed=seed or ())
        except BaseException:
            self._claimed.discard(session_id)
            raise
        return await self._publish(owner_ctx, session, agent_options, setup, source="startup")

    async def resume_agent(
        self,
        owner_ctx: Context,
        resume_session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
        run_pending: bool = False,
    ) -> _Handle:
        """Load a persisted session and publish its agent; turn numbering continues.

        With ``run_pending`` a turn starts at once for the restored pending prompts (if any).
        """
        persistence: SessionPersistence | None = self.ctx.get_service("session_persistence")
        if persistence is None:
            msg = (
                f"cannot resume session {resume_session_id!r}: session persistence is not configured "
                "(install and enable a persistence plugin such as dsh-harness-persistence-jsonl)"
            )
            raise MissingServiceError(msg, plugin="agent-loop", service="session_persistence")
        self._claim(resume_session_id)
        loaded = False
        try:
            stored = await persistence.load(resume_session_id)
            loaded = True
            # A store written before LoadedSessionLike.checked existed resumes too: its log is checked in full.
            checked = getattr(stored, "checked", None)
            session = self.ctx.sessions.prepare(resume_session_id, meta=stored.meta, seed=stored.events, checked=checked)
            handle = await self._publish(owner_ctx, session, agent_options, setup, source="resume")
        except BaseException:
            self._claimed.discard(resume_session_id)
            if loaded:  # the session never went live: let another resume (or process) have it
                persistence.release(resume_session_id)
            raise
        if run_pending:
            handle.agent.run_pending()
        return handle

    def _claim(self, ident: str) -> None:
        """Reserve ``ident`` for one create or resume; a live or in-flight id fails at once."""
        self._check_open()
        live = ident in self._claimed or ident in self.lifecycles
        if live or self.ctx.sessions.get(ident) is not None or self.ctx.agents.get(ident) is not None:
            msg = f"an agent or session with id {ident!r} is live (or being created); dispose it first or pick another id"
            raise DuplicateRegistrationError(msg)
        self._claimed.add(ident)

    def _new_agent(self, owner_ctx: Context, session: Any, options: AgentOptions | None) -> _Lifecycle:
        agent_ctx = self.ctx.child(f"agent:{session.id}", agent_id=session.id, owner=owner_ctx.agent_scope)
        agent = Agent(
            ctx=agent_ctx,
            session=session,
            options=options or AgentOptions(),
        )
        return _Lifecycle(self, agent)

    async def _publish(
        self,
        owner_ctx: Context,
        session: Any,
        options: AgentOptions | None,
        setup: Setup | None,
        source: str,
        built: _Lifecycle | None = None,
    ) -> _Handle:
        ident = session.id
        lifecycle: _Lifecycle | None = built
        scope = anyio.CancelScope()  # cancelled if the owner goes away or the loop stops meanwhile
        self._inflight.add(scope)
        try:
            abort_on_owner = owner_ctx.effect(scope.cancel)
            try:
                with scope:
                    if lifecycle is None:
                        lifecycle = self._new_agent(owner_ctx, session, options)
                    await self._enter(lifecycle, setup, source)
            finally:
                abort_on_owner.forget()
            if scope.cancelled_caught or lifecycle is None:
                why = "the agent loop is stopping" if self._closing else "its owner context was disposed"
                msg = f"creating agent {ident!r} was aborted: {why}"
                raise DshError(msg)
            self.lifecycles[ident] = lifecycle
            lifecycle.owner_effect = owner_ctx.effect(lifecycle.teardown)
            lifecycle.start_driver()
            lifecycle.agent.machine.reopen_parked()  # a turn parked on an approval goes on (§10.1)
        except BaseException:
            if lifecycle is not None:
                await lifecycle.teardown()
            raise
        finally:
            self._claimed.discard(ident)
            self._inflight.discard(scope)
            if not self._inflight and self._inflight_done is not None:
                self._inflight_done.set()
        return _Handle(self.lifecycles[ident])

    async def _enter(self, lifecycle: _Lifecycle, setup: Setup | None, source: str) -> None:
        """Setup, then both registries, then the announcements (seed 000's order)."""
        agent = lifecycle.agent
        if setup is not None:
            result = setup(agent.ctx)
            if inspect.isawaitable(result):
                await result
        self._check_open()
        if lifecycle.detach_agent is None:
            self._enter_registries(lifecycle)
        await self.ctx.sessions.announce(agent.session)
        lifecycle.announced = True
        await self.ctx.agents.announce(agent)
        await agent.ctx.events.notify("agent/session-start", agent=agent, source=source)

    def _enter_registries(self, lifecycle: _Lifecycle) -> None:
        """Both registries at once, so a listener of either announcement finds both entries."""
        lifecycle.detach_agent = self.ctx.agents.enter(lifecycle.agent)
        lifecycle.detach_session = self.ctx.sessions.enter_now(lifecycle.agent.session)

    def create_sync(self, owner_ctx: Context, agent_id: str, options: AgentOptions | None, cwd: str | None) -> Agent:
        """``ctx.agent_loop.create``: build the agent now, publish it in a task owned by the loop.

        A live id fails here, at once. Prompts sent before publication wait in the inbox.
        """
        self._claim(agent_id)
        try:
            meta = {"cwd": cwd} if cwd is not None else None
            session = self.ctx.sessions.prepare(agent_id, meta=meta)
        except BaseException:
            self._claimed.discard(agent_id)
            raise

        lifecycle = self._new_agent(owner_ctx, session, options)
        self._enter_registries(lifecycle)  # live now: a send right away is published like any other

        async def publish() -> None:
            try:
                await self._publish(owner_ctx, session, options, None, "startup", lifecycle)
            except Exception:
                logger.exception("agent %r could not be published; it is disposed", agent_id)

        self.ctx.start_task(publish, name=f"agent-publish:{agent_id}")
        return lifecycle.agent

    # ------------------------------------------------------------------ shutdown

    def _check_open(self) -> None:
        if self._closing:
            msg = "the agent loop is stopping; no agent can be created or resumed"
            raise DshError(msg)

    async def close(self) -> None:
        """Refuse new agents, abort in-flight creates, then tear every agent down."""
        self._closing = True
        with anyio.CancelScope(shield=True):
            if self._inflight:
                self._inflight_done = anyio.Event()
                for scope in list(self._inflight):
                    scope.cancel()
                await self._inflight_done.wait()
            async with anyio.create_task_group() as tg:
                for lifecycle in list(self.lifecycles.values()):
                    tg.start_soon(lifecycle.teardown)


class AgentLoopView:
    """``ctx.agent_loop`` as seen from one context: agents it creates are owned by that context."""

    def __init__(self, loop: AgentLoop, ctx: Context) -> None:
        self._loop = loop
        self._ctx = ctx

    def create(self, id: str, options: AgentOptions | None = None, cwd: str | None = None) -> Agent:
        """Create an agent under exactly ``id``, owned by this context; it is published in the background."""
        return self._loop.create_sync(self._ctx, id, options, cwd)


class AgentLoopPlugin:
    """Entry point ``agent-loop``: provides ``agent_loop`` and becomes the agents factory."""

    name = "agent-loop"
    provides = ("agent_loop",)
    requires = ("sessions", "llm", "tools", "system_prompt", "agents")
    uses = ("session_persistence",)
    Config = AgentLoopConfig

    def __init__(self) -> None:
        self.service: AgentLoop | None = None

    async def start(self, ctx: Context) -> None:
        config: AgentLoopConfig = ctx.config
        service = self.service = AgentLoop(ctx)
        ctx.provide("agent_loop", service)
        ctx.agents.set_factory(service)
        ctx.system_prompt.variable("model", lambda assembly: assembly.model)
        ctx.system_prompt.variable("cwd", lambda assembly: assembly.cwd)
        for spec in config.agents:
            await self._start_configured(ctx, service, spec)

    async def _start_configured(self, ctx: Context, service: AgentLoop, spec: AgentSpec) -> None:
        options = AgentOptions(model=spec.model)
        persistence = ctx.get_service("session_persistence")
        meta = {"cwd": spec.cwd} if spec.cwd is not None else None
        if spec.resume_session_id is not None:
            if persistence is None:
                msg = (
                    f"plugins.agent-loop.agents: agent {spec.id!r} has resume_session_id but no "
                    "session persistence plugin is loaded"
                )
                raise ConfigError(msg, path="plugins.agent-loop.agents")
            await service.resume_agent(ctx, spec.resume_session_id, agent_options=options)
        elif spec.session_id is not None:
            if persistence is not None and await persistence.exists(spec.session_id):
                await service.resume_agent(ctx, spec.session_id, agent_options=options)
            else:
                await service.create_agent(ctx, spec.session_id, meta=meta, agent_options=options)
        else:
            fresh = f"{spec.id}-session-{uuid.uuid4()}"
            await service.create_agent(ctx, fresh, meta=meta, agent_options=options)

    async def stop(self) -> None:
        if self.service is not None:
            await self.service.close()
