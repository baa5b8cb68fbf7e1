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
from types import TracebackType
from typing import Any, Self

import anyio
import attrs

from dsh_core._agent_types import AgentOptions, Setup, TurnOutcome
from dsh_core._context import Context, Effect
from dsh_core._errors import ConfigError, DshError, MissingServiceError
from dsh_core._session_event import SessionEvent

from ._agent import Agent
from ._driver import drive
from ._inbox import Inbox

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


class _Lifecycle:
    """Everything one agent holds, and the one memoised way to let go of it."""

    def __init__(self, loop: AgentLoop, agent: Agent) -> None:
        self.loop = loop
        self.agent = agent
        self.detach_session: Callable[[], Awaitable[None] | None] | None = None
        self.detach_agent: Callable[[], None] | None = None
        self.announced = False
        self.owner_effect: Effect | None = None
        self.driver_done: anyio.Event | None = None
        self._done: anyio.Event | None = None

    def start_driver(self) -> None:
        done = self.driver_done = anyio.Event()

        async def run() -> None:
            try:
                await drive(self.agent)
            finally:
                done.set()

        self.agent.ctx.start_task(run, name=f"agent-driver:{self.agent.id}")

    async def teardown(self) -> None:
        if self._done is not None:
            await self._done.wait()
            return
        self._done = anyio.Event()
        try:
            with anyio.CancelScope(shield=True):
                await self._teardown()
        finally:
            self._done.set()

    async def _teardown(self) -> None:
        agent = self.agent
        events = agent.ctx.events
        agent.stopping = True
        agent._abort("disposed")
        agent.wake_event.set()
        if self.announced:
            agent.status_value = "disposed"
            await _contained(events.notify("agent/status", agent=agent, status="disposed"))
        if self.driver_done is not None:
            with anyio.move_on_after(TEARDOWN_TIMEOUT) as scope:
                await self.driver_done.wait()
            if scope.cancelled_caught:
                logger.error("agent %r: the driver did not stop within %ss", agent.id, TEARDOWN_TIMEOUT)
        agent.status_value = "disposed"
        agent.settled.set()
        agent.resolve_all_waiters(TurnOutcome({"kind": "disposed"}, None))
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
        self.loop._lifecycles.pop(agent.id, None) if self.loop._lifecycles.get(agent.id) is self else None
        await agent.ctx.dispose()


async def _contained(awaitable: Awaitable[object]) -> None:
    try:
        await awaitable
    except Exception:
        logger.exception("a listener failed during agent teardown (contained)")


class AgentLoop:
    """The ``agent_loop`` service and the agents factory (``ctx.agents.create`` lands here)."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._lifecycles: dict[str, _Lifecycle] = {}
        self._inflight = 0
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
        self._check_open()
        session = self._ctx.sessions.prepare(session_id, meta=meta, seed=seed or ())
        return await self._publish(owner_ctx, session, agent_options, setup, source="startup")

    async def resume_agent(
        self,
        owner_ctx: Context,
        resume_session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
    ) -> _Handle:
        """Load a persisted session and publish its agent; turn numbering continues."""
        self._check_open()
        persistence = self._ctx.get_service("session_persistence")
        if persistence is None:
            msg = (
                f"cannot resume session {resume_session_id!r}: session persistence is not configured "
                "(install and enable a persistence plugin such as dsh-persistence-jsonl)"
            )
            raise MissingServiceError(msg, plugin="agent-loop", service="session_persistence")
        if resume_session_id in self._lifecycles:
            msg = f"cannot resume session {resume_session_id!r}: an agent with that id is live in this harness"
            raise DshError(msg)
        loaded = await persistence.load(resume_session_id)
        session = self._ctx.sessions.prepare(resume_session_id, meta=loaded.meta, seed=loaded.events)
        return await self._publish(owner_ctx, session, agent_options, setup, source="resume")

    async def _publish(
        self, owner_ctx: Context, session: Any, options: AgentOptions | None, setup: Setup | None, source: str
    ) -> _Handle:
        agent_ctx = self._ctx.child(f"agent:{session.id}", agent_id=session.id, owner=owner_ctx.agent_scope)
        agent = Agent(
            ctx=agent_ctx,
            session=session,
            options=options or AgentOptions(),
            inbox=Inbox.restore(session.events),
            last_turn=_last_turn(session.events),
        )
        lifecycle = _Lifecycle(self, agent)
        self._inflight += 1
        try:
            if setup is not None:
                result = setup(agent_ctx)
                if inspect.isawaitable(result):
                    await result
            self._check_open()
            lifecycle.detach_session = await self._ctx.sessions.enter(session)
            lifecycle.detach_agent = self._ctx.agents.enter(agent)
            lifecycle.announced = True
            await self._ctx.agents.announce(agent)
            await agent_ctx.events.notify("agent/session-start", agent=agent, source=source)
            self._check_open()
            if session.id in self._lifecycles:
                msg = f"an agent with id {session.id!r} already exists"
                raise DshError(msg)
            self._lifecycles[session.id] = lifecycle
            lifecycle.owner_effect = owner_ctx.effect(lifecycle.teardown)
            lifecycle.start_driver()
        except BaseException:
            await lifecycle.teardown()
            raise
        finally:
            self._inflight -= 1
            if self._inflight == 0 and self._inflight_done is not None:
                self._inflight_done.set()
        return _Handle(lifecycle)

    def create_sync(self, owner_ctx: Context, agent_id: str, options: AgentOptions | None, cwd: str | None) -> Agent:
        """``ctx.agent_loop.create``: build the agent now, publish it in a task owned by the loop."""
        self._check_open()
        meta = {"cwd": cwd} if cwd is not None else None
        session = self._ctx.sessions.prepare(agent_id, meta=meta)
        agent_ctx = self._ctx.child(f"agent:{agent_id}", agent_id=agent_id, owner=owner_ctx.agent_scope)
        agent = Agent(
            ctx=agent_ctx, session=session, options=options or AgentOptions(), inbox=Inbox(), last_turn=0
        )
        lifecycle = _Lifecycle(self, agent)
        self._inflight += 1

        async def publish() -> None:
            try:
                lifecycle.detach_session = await self._ctx.sessions.enter(session)
                lifecycle.detach_agent = self._ctx.agents.enter(agent)
                lifecycle.announced = True
                await self._ctx.agents.announce(agent)
                await agent_ctx.events.notify("agent/session-start", agent=agent, source="startup")
                self._lifecycles[agent_id] = lifecycle
                lifecycle.owner_effect = owner_ctx.effect(lifecycle.teardown)
                lifecycle.start_driver()
            except BaseException:
                logger.exception("agent %r could not be published; it is disposed", agent_id)
                await lifecycle.teardown()
                raise
            finally:
                self._inflight -= 1
                if self._inflight == 0 and self._inflight_done is not None:
                    self._inflight_done.set()

        self._ctx.start_task(publish, name=f"agent-publish:{agent_id}")
        return agent

    # ------------------------------------------------------------------ shutdown

    def _check_open(self) -> None:
        if self._closing:
            msg = "the agent loop is stopping; no agent can be created or resumed"
            raise DshError(msg)

    async def close(self) -> None:
        """Refuse new agents, wait for in-flight creates, then tear every agent down."""
        self._closing = True
        with anyio.CancelScope(shield=True):
            if self._inflight:
                self._inflight_done = anyio.Event()
                await self._inflight_done.wait()
            async with anyio.create_task_group() as tg:
                for lifecycle in list(self._lifecycles.values()):
                    tg.start_soon(lifecycle.teardown)


def _last_turn(events: Sequence[SessionEvent]) -> int:
    for event in reversed(events):
        if event.type == "turn/start":
            turn = event.data["turn"]
            return turn if isinstance(turn, int) else 0
    return 0


class AgentLoopView:
    """``ctx.agent_loop`` as seen from one context: agents it creates are owned by that context."""

    def __init__(self, loop: AgentLoop, ctx: Context) -> None:
        self._loop = loop
        self._ctx = ctx

    def create(self, id: str, options: AgentOptions | None = None, cwd: str | None = None) -> Agent:  # noqa: A002
        """Create an agent under exactly ``id``, owned by this context; it is published in the background."""
        return self._loop.create_sync(self._ctx, id, options, cwd)

    async def create_agent(self, *args: Any, **kwargs: Any) -> _Handle:
        return await self._loop.create_agent(*args, **kwargs)

    async def resume_agent(self, *args: Any, **kwargs: Any) -> _Handle:
        return await self._loop.resume_agent(*args, **kwargs)


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
