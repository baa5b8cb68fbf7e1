"""Tests for dsh_core.services.agents: the factory slot, enter/detach, announce and the helpers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import attrs
import pytest

from dsh_core import Context, DuplicateRegistrationError, hookimpl
from dsh_core.services.agents import MissingAgentFactoryError, agent_events, assemble_context_for
from dsh_core.vocabulary import AgentOptions, Setup

pytestmark = pytest.mark.anyio


@pytest.fixture
def dsh_config() -> Mapping[str, Any]:
    """Without the agent loop, so these tests control the factory slot themselves."""
    return {"plugins": {"disable": ["agent-loop"]}}


@attrs.frozen
class FakeSession:
    id: str
    meta: Mapping[str, Any] = attrs.field(factory=dict)


class FakeAgent:
    """Just enough of an Agent for the registry."""

    def __init__(self, agent_id: str, session_id: str | None = None, ctx: Any = None) -> None:
        self.id = agent_id
        self.session = FakeSession(session_id or agent_id, {"cwd": "/work"})
        self.options = AgentOptions(model="p/m")
        self.ctx = ctx


class FakeHandle:
    def __init__(self, agent: Any) -> None:
        self.agent = agent

    async def dispose(self) -> None:
        pass

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        pass


class RecordingFactory:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Context, str, dict[str, Any]]] = []

    async def create_agent(
        self,
        owner_ctx: Context,
        session_id: str,
        *,
        meta: Mapping[str, Any] | None = None,
        seed: Sequence[Any] | None = None,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
    ) -> FakeHandle:
        self.calls.append(
            (
                "create",
                owner_ctx,
                session_id,
                {"meta": meta, "seed": seed, "agent_options": agent_options, "setup": setup},
            )
        )
        return FakeHandle(FakeAgent(session_id))

    async def resume_agent(
        self,
        owner_ctx: Context,
        resume_session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
    ) -> FakeHandle:
        self.calls.append(
            ("resume", owner_ctx, resume_session_id, {"agent_options": agent_options, "setup": setup})
        )
        return FakeHandle(FakeAgent(resume_session_id))


class CreatedListener:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.heard: list[Any] = []

    @hookimpl
    def dsh_agent_created(self, agent: Any) -> None:
        self.heard.append(agent)
        if self.fail:
            raise RuntimeError("veto")


class StatusListener:
    def __init__(self) -> None:
        self.heard: list[tuple[Any, str]] = []

    @hookimpl
    async def dsh_agent_status(self, agent: Any, status: str) -> None:
        self.heard.append((agent, status))


async def test_without_factory_create_and_resume_say_what_to_load(dsh_ctx: Context) -> None:
    """With no factory, create/resume fail with a message that names the missing plugin."""
    with pytest.raises(
        MissingAgentFactoryError, match=r"^no agent factory registered \(load the agent loop plugin\)$"
    ):
        await dsh_ctx.agents.create("s1")
    with pytest.raises(MissingAgentFactoryError, match="no agent factory registered"):
        await dsh_ctx.agents.resume("s1")


async def test_create_and_resume_delegate_with_the_callers_context(dsh_ctx: Context) -> None:
    """The factory receives the context the registry was reached through, and every option."""
    factory = RecordingFactory()
    loop_ctx = dsh_ctx.child("plugin:loop")
    loop_ctx.agents.set_factory(factory)
    caller = dsh_ctx.child("plugin:caller")
    options = AgentOptions(model="p/m")

    async def setup(ctx: Context) -> None:
        pass

    handle = await caller.agents.create("s1", meta={"cwd": "/x"}, seed=(), agent_options=options, setup=setup)
    assert handle.agent.id == "s1"
    await caller.agents.resume("s0", agent_options=options)
    assert [(kind, owner, sid) for kind, owner, sid, _ in factory.calls] == [
        ("create", caller, "s1"),
        ("resume", caller, "s0"),
    ]
    assert factory.calls[0][3] == {
        "meta": {"cwd": "/x"},
        "seed": (),
        "agent_options": options,
        "setup": setup,
    }


async def test_bad_create_arguments_are_refused_before_the_factory(dsh_ctx: Context) -> None:
    """A non-str session id or wrong options type is a TypeError at the boundary."""
    factory = RecordingFactory()
    dsh_ctx.agents.set_factory(factory)
    with pytest.raises(TypeError, match="session_id must be a str"):
        await dsh_ctx.agents.create(1)
    with pytest.raises(ValueError, match="must not be empty"):
        await dsh_ctx.agents.create("")
    with pytest.raises(TypeError, match="agent_options"):
        await dsh_ctx.agents.create("s", agent_options={"model": "x"})
    assert factory.calls == []


async def test_second_factory_is_refused_and_slot_frees_with_its_context(dsh_ctx: Context) -> None:
    """One factory at a time; disposing its owner's context frees the slot."""
    first = dsh_ctx.child("plugin:loop-a")
    first.agents.set_factory(RecordingFactory())
    with pytest.raises(DuplicateRegistrationError, match="'plugin:loop-a'"):
        dsh_ctx.child("plugin:loop-b").agents.set_factory(RecordingFactory())
    await first.dispose()
    replacement = RecordingFactory()
    dispose = dsh_ctx.agents.set_factory(replacement)
    await dsh_ctx.agents.create("s")
    assert len(replacement.calls) == 1
    dispose()
    with pytest.raises(MissingAgentFactoryError):
        await dsh_ctx.agents.create("s")


async def test_enter_get_list_and_duplicate_ids(dsh_ctx: Context) -> None:
    """Entered agents are listed in entry order; a taken id is refused."""
    agents = dsh_ctx.agents
    a, b = FakeAgent("a"), FakeAgent("b")
    agents.enter(a)
    agents.enter(b)
    assert agents.get("a") is a
    assert agents.get("nope") is None
    assert agents.list() == (a, b)
    with pytest.raises(DuplicateRegistrationError, match="agent 'a' is already registered"):
        agents.enter(FakeAgent("a"))


async def test_stale_detach_never_removes_a_later_entry(dsh_ctx: Context) -> None:
    """Detach is idempotent and exact: after re-entering the id, the old detach does nothing."""
    agents = dsh_ctx.agents
    old = FakeAgent("a")
    detach_old = agents.enter(old)
    detach_old()
    detach_old()
    assert agents.get("a") is None
    new = FakeAgent("a")
    agents.enter(new)
    detach_old()
    assert agents.get("a") is new


async def test_enter_refuses_an_agent_whose_session_id_differs(dsh_ctx: Context) -> None:
    """An agent shares its session's id."""
    with pytest.raises(ValueError, match="does not match its session id"):
        dsh_ctx.agents.enter(FakeAgent("a", session_id="b"))


async def test_announce_emits_agent_created(dsh_ctx: Context) -> None:
    """announce() notifies agent/created once; announcing again or without enter is refused."""
    listener = CreatedListener()
    dsh_ctx.register_plugin(listener)
    agent = FakeAgent("a")
    with pytest.raises(RuntimeError, match="not entered"):
        await dsh_ctx.agents.announce(agent)
    dsh_ctx.agents.enter(agent)
    assert not dsh_ctx.agents.is_announced(agent)
    await dsh_ctx.agents.announce(agent)
    assert listener.heard == [agent]
    assert dsh_ctx.agents.is_announced(agent)
    with pytest.raises(RuntimeError, match="already announced"):
        await dsh_ctx.agents.announce(agent)


async def test_a_raising_created_listener_vetoes(dsh_ctx: Context) -> None:
    """A listener that raises on agent/created makes announce() raise (the caller rolls back)."""
    dsh_ctx.register_plugin(CreatedListener(fail=True))
    agent = FakeAgent("a")
    detach = dsh_ctx.agents.enter(agent)
    with pytest.raises(RuntimeError, match="veto"):
        await dsh_ctx.agents.announce(agent)
    detach()
    assert dsh_ctx.agents.list() == ()


async def test_agent_events_adds_the_agent(dsh_ctx: Context) -> None:
    """agent_events(ctx, agent).notify(...) dispatches with agent=agent."""
    listener = StatusListener()
    dsh_ctx.register_plugin(listener)
    agent = FakeAgent("a")
    await agent_events(dsh_ctx, agent).notify("agent/status", status="idle")  # type: ignore[arg-type]
    assert listener.heard == [(agent, "idle")]


async def test_assemble_context_for_reads_cwd_and_model(dsh_ctx: Context) -> None:
    """The assembly context of an agent carries its id, scope, session cwd and model."""
    scope = dsh_ctx.child("agent:a", agent_id="a")
    agent: Any = FakeAgent("a", ctx=scope)
    context = assemble_context_for(agent)
    assert (context.agent, context.agent_id, context.scope, context.cwd, context.model) == (
        agent,
        "a",
        scope,
        "/work",
        "p/m",
    )
