"""Create/resume transactions, teardown, the synchronous ``ctx.agent_loop.create`` and config agents.

Seed 000 (Public API): create and resume are one rollback-covered transaction — private session,
agent and scope; setup; enter both registries; ``session/created`` then ``agent/created``;
``agent/session-start``; only then the driver. Any failure rolls back with the paired disposed
events and re-raises. Teardown is one memoised path, whoever asks first (the handle, the owner's
context, the loop stopping), and disposal never hangs (SPEC §6).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

from dsh_core import (
    AgentDisposedError,
    AgentOptions,
    ConfigError,
    Context,
    DuplicateRegistrationError,
    Harness,
    MissingServiceError,
    SessionEvent,
    hookimpl,
    tool,
)
from dsh_core.testing import ScriptedModel

from .loop_kit import MODEL, running, trail, turn_end

pytestmark = pytest.mark.anyio


class Boom(Exception):
    pass


class Lifecycle:
    """Records the lifecycle events (and can veto ``agent/created`` for one id)."""

    def __init__(self, veto: str | None = None) -> None:
        self.veto = veto
        self.seen: list[tuple[str, str]] = []
        self.statuses: list[tuple[str, str]] = []

    @hookimpl
    def dsh_session_created(self, session: Any) -> None:
        self.seen.append(("session/created", session.id))

    @hookimpl
    def dsh_agent_created(self, agent: Any) -> None:
        self.seen.append(("agent/created", agent.id))
        if agent.id == self.veto:
            raise Boom(f"veto {agent.id}")

    @hookimpl
    def dsh_agent_session_start(self, agent: Any, source: str) -> None:
        self.seen.append((f"agent/session-start:{source}", agent.id))

    @hookimpl
    def dsh_agent_disposed(self, agent: Any) -> None:
        self.seen.append(("agent/disposed", agent.id))

    @hookimpl
    def dsh_session_disposed(self, session: Any) -> None:
        self.seen.append(("session/disposed", session.id))

    @hookimpl
    def dsh_agent_status(self, agent: Any, status: str) -> None:
        self.statuses.append((agent.id, status))

    def of(self, ident: str) -> list[str]:
        return [kind for kind, who in self.seen if who == ident]


@tool
def private_tool() -> str:
    """Only the agent whose setup registered it sees it."""
    return "private"


def _tool_names(request: Any) -> list[str]:
    return [schema["name"] for schema in request.tools]


class _Host:
    """Runs a Harness in a task of its own, so that a test can stop it while its own tasks wait."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.stop_now = anyio.Event()
        self.stopped = anyio.Event()

    async def start(self, tg: Any) -> Context:
        ready: list[Context] = []
        started = anyio.Event()

        async def run() -> None:
            try:
                async with self.harness as ctx:
                    ready.append(ctx)
                    started.set()
                    await self.stop_now.wait()
            finally:
                self.stopped.set()

        tg.start_soon(run)
        await started.wait()
        return ready[0]


# ---------------------------------------------------------------------- create transactions


async def test_a_successful_create_announces_in_order_before_the_driver_runs() -> None:
    watch = Lifecycle()
    async with running(ScriptedModel(["ok"]), plugins=[watch]) as ctx:
        handle = await ctx.agents.create("x", agent_options=MODEL)
        assert watch.of("x") == ["session/created", "agent/created", "agent/session-start:startup"]
        assert ctx.agents.get("x") is handle.agent
        assert ctx.sessions.get("x") is handle.agent.session
        assert handle.agent.status == "idle"
        assert list(handle.agent.session.events) == []  # the driver logs nothing before a send
        await handle.dispose()
        assert watch.of("x")[-2:] == ["agent/disposed", "session/disposed"]


async def test_setup_that_raises_publishes_nothing_and_frees_the_id() -> None:
    watch = Lifecycle()
    seen_ctx: list[Context] = []

    async def setup(agent_ctx: Context) -> None:
        seen_ctx.append(agent_ctx)
        agent_ctx.tools.register(private_tool)
        await anyio.lowlevel.checkpoint()
        raise Boom("setup failed")

    model = ScriptedModel(["second try"])
    async with running(model, plugins=[watch]) as ctx:
        with pytest.raises(Boom, match="setup failed"):
            await ctx.agents.create("x", agent_options=MODEL, setup=setup)
        assert watch.seen == []
        assert watch.statuses == []
        assert ctx.agents.get("x") is None
        assert ctx.sessions.get("x") is None
        assert ctx.tools.get("private_tool", "x") is None  # the agent's scope was unwound
        assert seen_ctx[0].disposed
        # the id is free again
        async with await ctx.agents.create("x", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("hi")
    assert outcome.text == "second try"
    assert _tool_names(model.requests[0]) == []


async def test_a_vetoing_agent_created_listener_rolls_back_with_paired_events() -> None:
    """Seed 000 / SPEC §4: a raising agent/created listener vetoes publication; every announcement
    gets its disposal: session/created, agent/created, agent/disposed, session/disposed."""
    watch = Lifecycle(veto="x")

    async def setup(agent_ctx: Context) -> None:
        agent_ctx.tools.register(private_tool)

    async with running(ScriptedModel(["ok"]), plugins=[watch]) as ctx:
        with pytest.raises(Boom, match="veto x"):
            await ctx.agents.create("x", agent_options=MODEL, setup=setup)
        assert watch.of("x") == ["session/created", "agent/created", "agent/disposed", "session/disposed"]
        assert ctx.agents.get("x") is None
        assert ctx.sessions.get("x") is None
        assert ctx.tools.get("private_tool", "x") is None
        # another id is unaffected, and "x" can be created once the veto is lifted
        watch.veto = None
        async with await ctx.agents.create("x", agent_options=MODEL) as handle:
            assert (await handle.agent.run("hi")).kind == "completed"


async def test_both_registries_hold_the_agent_when_session_created_fires() -> None:
    """Seed 000: 'enter both registries; announce session/created then agent/created' — a
    session/created listener can already look the agent up (and an agent/created one the session)."""
    looked_up: dict[str, Any] = {}

    class LookUp:
        @hookimpl
        def dsh_session_created(self, session: Any) -> None:
            looked_up["agent at session/created"] = ctx.agents.get(session.id)

        @hookimpl
        def dsh_agent_created(self, agent: Any) -> None:
            looked_up["session at agent/created"] = ctx.sessions.get(agent.id)

    async with running(ScriptedModel(), plugins=[LookUp()]) as ctx:
        async with await ctx.agents.create("x", agent_options=MODEL) as handle:
            assert looked_up["session at agent/created"] is handle.agent.session
            assert looked_up["agent at session/created"] is handle.agent


async def test_a_caller_cancelled_during_setup_rolls_back_and_the_cancel_propagates() -> None:
    watch = Lifecycle()
    in_setup = anyio.Event()
    cancelled: list[bool] = []

    async def setup(agent_ctx: Context) -> None:
        agent_ctx.tools.register(private_tool)
        in_setup.set()
        await anyio.sleep_forever()

    async with running(ScriptedModel(["later"]), plugins=[watch]) as ctx:

        async def create() -> None:
            try:
                await ctx.agents.create("x", agent_options=MODEL, setup=setup)
            except anyio.get_cancelled_exc_class():
                cancelled.append(True)
                raise

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(create)
                await in_setup.wait()
                tg.cancel_scope.cancel()
        assert cancelled == [True]
        assert watch.seen == []
        assert ctx.agents.get("x") is None
        assert ctx.sessions.get("x") is None
        assert ctx.tools.get("private_tool", "x") is None
        async with await ctx.agents.create("x", agent_options=MODEL) as handle:
            assert (await handle.agent.run("hi")).text == "later"


async def test_creating_a_live_id_again_fails_and_leaves_the_first_alone() -> None:
    watch = Lifecycle()
    model = ScriptedModel(["still here"])
    async with running(model, plugins=[watch]) as ctx:
        first = await ctx.agents.create("x", agent_options=MODEL)
        second_setup_ran: list[bool] = []

        def setup(agent_ctx: Context) -> None:
            second_setup_ran.append(True)

        with pytest.raises(DuplicateRegistrationError):
            await ctx.agents.create("x", agent_options=AgentOptions(model="scripted/other"), setup=setup)
        assert ctx.agents.get("x") is first.agent
        assert ctx.sessions.get("x") is first.agent.session
        assert watch.of("x") == ["session/created", "agent/created", "agent/session-start:startup"]
        with anyio.fail_after(5):
            outcome = await first.agent.run("hello")
        assert outcome.text == "still here"
        assert model.requests[0].model == "test"
        await first.dispose()
        assert ctx.agents.get("x") is None


async def test_a_losing_same_id_create_keeps_the_winners_owner_link() -> None:
    """An agent created through another agent's context is owned by it: the owner's scoped
    listeners hear it. A failed create of the same id (rolled back) must not cut that link."""
    heard: list[tuple[str, str]] = []

    class ParentEars:
        @hookimpl
        def dsh_agent_status(self, agent: Any, status: str) -> None:
            heard.append((agent.id, status))

    def parent_setup(agent_ctx: Context) -> None:
        agent_ctx.register_plugin(ParentEars())

    async with running(ScriptedModel(["one", "two"])) as ctx:
        parent = await ctx.agents.create("parent", agent_options=MODEL, setup=parent_setup)
        child = await parent.agent.ctx.agents.create("child", agent_options=MODEL)
        with anyio.fail_after(5):
            await child.agent.run("first")
            await child.agent.when_idle()
        assert ("child", "running") in heard  # the link works
        heard.clear()
        with pytest.raises(DuplicateRegistrationError):
            await parent.agent.ctx.agents.create("child", agent_options=MODEL)
        with anyio.fail_after(5):
            await child.agent.run("second")
            await child.agent.when_idle()
        assert ("child", "running") in heard, "the failed create cut the owner link of the live agent"
        await parent.dispose()


async def test_a_doomed_create_of_a_live_id_never_touches_the_live_agent() -> None:
    """A create of a live id fails; until it does, its setup must not change what the live agent
    sees (its scoped system prompt, tools and listeners share the id)."""
    in_setup = anyio.Event()  # the doomed create is in its setup (or has already failed)
    release = anyio.Event()

    async def intruding_setup(agent_ctx: Context) -> None:
        agent_ctx.system_prompt.section("intruder", "INTRUDER SECTION")
        in_setup.set()
        await release.wait()

    model = ScriptedModel(["clean"])
    failures: list[Exception] = []
    async with running(model) as ctx:
        live = await ctx.agents.create("x", agent_options=MODEL)

        async def doomed() -> None:
            try:
                await ctx.agents.create("x", agent_options=MODEL, setup=intruding_setup)
            except Exception as exc:  # noqa: BLE001
                failures.append(exc)
                in_setup.set()  # failing before setup is fine too

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(doomed)
                await in_setup.wait()
                await live.agent.run("hello")
                release.set()
        assert len(failures) == 1
        assert isinstance(failures[0], DuplicateRegistrationError)
        assert ctx.agents.get("x") is live.agent
        await live.dispose()
    assert "INTRUDER" not in (model.requests[0].system or "")


async def test_disposing_an_owner_agent_disposes_the_agents_it_created() -> None:
    watch = Lifecycle()
    streaming = anyio.Event()

    class OnChunk:
        @hookimpl
        def dsh_session_event(self, session: Any, event: Any) -> None:
            if event.type == "assistant/chunk" and session.id == "child":
                streaming.set()

    outcomes: list[Any] = []
    async with running(ScriptedModel([ScriptedModel.hang("working")]), plugins=[watch, OnChunk()]) as ctx:
        parent = await ctx.agents.create("parent", agent_options=MODEL)
        child = await parent.agent.ctx.agents.create("child", agent_options=MODEL)

        async def run() -> None:
            outcomes.append(await child.agent.run("work"))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                await streaming.wait()
                await parent.dispose()
        assert ctx.agents.list() == ()
        assert ctx.sessions.list() == ()
    assert outcomes[0].kind == "disposed"
    assert watch.of("child")[-2:] == ["agent/disposed", "session/disposed"]


async def test_two_concurrent_creates_of_one_id_publish_exactly_one() -> None:
    """The first create claims the id; a concurrent second one fails at once, before its setup."""
    watch = Lifecycle()
    gate = anyio.Event()
    in_setup = anyio.Event()
    setups: list[str] = []

    async def setup(agent_ctx: Context) -> None:
        setups.append(agent_ctx.label)
        in_setup.set()
        await gate.wait()

    results: list[Any] = []
    async with running(ScriptedModel(["winner speaks"]), plugins=[watch]) as ctx:

        async def create() -> None:
            try:
                handle = await ctx.agents.create("x", agent_options=MODEL, setup=setup)
            except Exception as exc:  # noqa: BLE001 - the loser's error is what we check
                results.append(exc)
            else:
                results.append(handle)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(create)
                await in_setup.wait()  # the first holds the id while its setup waits
                tg.start_soon(create)
                while not results:  # the loser fails without waiting for the gate
                    await anyio.lowlevel.checkpoint()
                gate.set()
        handles = [r for r in results if not isinstance(r, BaseException)]
        failures = [r for r in results if isinstance(r, BaseException)]
        assert (len(handles), len(failures)) == (1, 1)
        assert isinstance(failures[0], DuplicateRegistrationError)
        assert len(setups) == 1
        winner = handles[0]
        assert ctx.agents.get("x") is winner.agent
        assert ctx.sessions.get("x") is winner.agent.session
        assert watch.of("x") == ["session/created", "agent/created", "agent/session-start:startup"]
        with anyio.fail_after(5):
            assert (await winner.agent.run("go")).text == "winner speaks"
        await winner.dispose()

async def test_setup_registrations_are_scoped_to_their_agent() -> None:
    """A tool and a hook plugin registered in setup are seen by that agent only, and vanish with it."""

    class AddContext:
        @hookimpl
        def dsh_agent_prompt_submit(self) -> Any:
            from dsh_core import Allow

            return Allow(additional_context=("only for a",))

    def setup(agent_ctx: Context) -> None:
        agent_ctx.tools.register(private_tool)
        agent_ctx.register_plugin(AddContext())

    model_a = ScriptedModel(["a done"], provider="pa")
    model_b = ScriptedModel(["b done"], provider="pb")
    async with running(ScriptedModel()) as ctx:
        ctx.llm.register_adapter("pa", model_a)
        ctx.llm.register_adapter("pb", model_b)
        a = await ctx.agents.create("a", agent_options=AgentOptions(model="pa/m"), setup=setup)
        b = await ctx.agents.create("b", agent_options=AgentOptions(model="pb/m"))
        with anyio.fail_after(5):
            await a.agent.run("hi a")
            await b.agent.run("hi b")
        assert _tool_names(model_a.requests[0]) == ["private_tool"]
        assert _tool_names(model_b.requests[0]) == []
        assert [m.text for m in model_a.requests[0].messages] == ["hi a", "only for a"]  # type: ignore[union-attr]
        assert [m.text for m in model_b.requests[0].messages] == ["hi b"]  # type: ignore[union-attr]
        assert ctx.tools.get("private_tool", "a") is not None
        assert ctx.tools.get("private_tool") is None
        await a.dispose()
        assert ctx.tools.get("private_tool", "a") is None
        await b.dispose()


async def test_an_owner_disposed_during_setup_aborts_the_create() -> None:
    """The owner going away during setup must not let the agent publish afterwards (seed 000:
    caller unload converges on the same teardown; nothing publishes once its owner is gone)."""
    watch = Lifecycle()
    in_setup = anyio.Event()
    release = anyio.Event()

    async def setup(agent_ctx: Context) -> None:
        in_setup.set()
        await release.wait()

    outcome: list[Any] = []
    async with running(ScriptedModel(), plugins=[watch]) as ctx:
        owner = ctx.child("plugin:owner")

        async def create() -> None:
            try:
                outcome.append(await owner.agents.create("x", agent_options=MODEL, setup=setup))
            except Exception as exc:  # noqa: BLE001
                outcome.append(exc)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(create)
                await in_setup.wait()
                await owner.dispose()
                release.set()  # a setup that was not aborted now finishes
        assert len(outcome) == 1
        assert isinstance(outcome[0], Exception), outcome
        assert ctx.agents.get("x") is None
        assert ctx.sessions.get("x") is None
        assert "agent/created" not in watch.of("x"), watch.of("x")


# ---------------------------------------------------------------------- resume


async def test_resume_without_persistence_is_a_clear_error() -> None:
    watch = Lifecycle()
    async with running(ScriptedModel(), plugins=[watch]) as ctx:
        with pytest.raises(MissingServiceError, match="persistence"):
            await ctx.agents.resume("old-session", agent_options=MODEL)
        assert watch.seen == []
        assert ctx.agents.list() == ()
        assert ctx.sessions.list() == ()


@attrs.frozen
class _Loaded:
    meta: Mapping[str, Any]
    events: Sequence[SessionEvent]


class FakePersistence:
    """A ``session_persistence`` service holding prepared logs (the loop calls ``load``/``exists``)."""

    name = "fake-persistence"
    provides = ("session_persistence",)

    def __init__(self, logs: Mapping[str, Sequence[SessionEvent]]) -> None:
        self.logs = dict(logs)
        self.reserved: set[str] = set()
        self.released: list[str] = []

    def start(self, ctx: Context) -> None:
        ctx.provide("session_persistence", self)

    async def exists(self, session_id: str) -> bool:
        return session_id in self.logs

    async def load(self, session_id: str) -> _Loaded:
        events = self.logs[session_id]
        self.reserved.add(session_id)
        return _Loaded({"seed_length": len(events)}, events)

    def release(self, session_id: str) -> None:
        self.reserved.discard(session_id)
        self.released.append(session_id)


async def _finished_log(model_text: str) -> list[SessionEvent]:
    """The log of a session that ran one completed turn."""
    async with running(ScriptedModel([model_text])) as ctx:
        async with await ctx.agents.create("old", agent_options=MODEL) as handle:
            await handle.agent.run("remember me")
            return list(handle.agent.session.events)


async def test_resume_continues_turn_numbering_and_history() -> None:
    log = await _finished_log("remembered")
    watch = Lifecycle()
    model = ScriptedModel(["welcome back"])
    async with running(model, plugins=[FakePersistence({"old": log}), watch]) as ctx:
        async with await ctx.agents.resume("old", agent_options=MODEL) as handle:
            assert watch.of("old") == ["session/created", "agent/created", "agent/session-start:resume"]
            outcome = await handle.agent.run("again")
            events = list(handle.agent.session.events)
            # resuming an id that is live is refused, the live agent is unaffected
            with pytest.raises(Exception, match="live"):
                await ctx.agents.resume("old", agent_options=MODEL)
            assert ctx.agents.get("old") is handle.agent
    assert outcome.text == "welcome back"
    assert [e.data["turn"] for e in events if e.type == "turn/start"] == [1, 2]
    assert [m.text for m in model.requests[0].messages] == ["remember me", "remembered", "again"]  # type: ignore[union-attr]


async def test_config_session_id_resumes_when_persisted() -> None:
    log = await _finished_log("from before")
    config = {"plugins": {"agent-loop": {"agents": [{"id": "bot", "session_id": "old", "model": "scripted/x"}]}}}
    model = ScriptedModel(["continued"])
    async with running(model, plugins=[FakePersistence({"old": log})], config=config) as ctx:
        agent = ctx.agents.get("old")
        assert agent is not None
        with anyio.fail_after(5):
            outcome = await agent.run("next")
        assert [e.data["turn"] for e in agent.session.events if e.type == "turn/start"] == [1, 2]
    assert outcome.text == "continued"
    assert [m.text for m in model.requests[0].messages] == ["remember me", "from before", "next"]  # type: ignore[union-attr]


# ---------------------------------------------------------------------- teardown


async def test_concurrent_disposers_all_await_the_same_teardown() -> None:
    watch = Lifecycle()
    streaming = anyio.Event()

    class OnChunk:
        @hookimpl
        def dsh_session_event(self, event: Any) -> None:
            if event.type == "assistant/chunk":
                streaming.set()

    returned: list[tuple[str, bool, list[str]]] = []
    async with running(ScriptedModel([ScriptedModel.hang("thinking")]), plugins=[watch, OnChunk()]) as ctx:
        handle = await ctx.agents.create("x", agent_options=MODEL)
        handle.agent.send("go")

        async def dispose(label: str) -> None:
            await handle.dispose()
            returned.append((label, ctx.agents.get("x") is None, watch.of("x")[-2:]))

        with anyio.fail_after(5):
            await streaming.wait()
            async with anyio.create_task_group() as tg:
                for label in ("first", "second", "third"):
                    tg.start_soon(dispose, label)
            await handle.dispose()  # and once more, after: returns at once
    assert sorted(label for label, _, _ in returned) == ["first", "second", "third"]
    for label, gone, last in returned:
        assert gone, f"{label} returned before the agent left the registry"
        assert last == ["agent/disposed", "session/disposed"], f"{label} returned before teardown finished"
    assert watch.of("x").count("agent/disposed") == 1
    assert watch.of("x").count("session/disposed") == 1
    assert turn_end(handle.agent.session.events, 1) == {"kind": "disposed"}


async def test_owner_disposal_mid_turn_ends_the_turn_disposed() -> None:
    streaming = anyio.Event()

    class OnChunk:
        @hookimpl
        def dsh_session_event(self, event: Any) -> None:
            if event.type == "assistant/chunk":
                streaming.set()

    outcomes: list[Any] = []
    async with running(ScriptedModel([ScriptedModel.hang("par")]), plugins=[OnChunk()]) as ctx:
        owner = ctx.child("plugin:owner")
        handle = await owner.agents.create("x", agent_options=MODEL)

        async def run() -> None:
            outcomes.append(await handle.agent.run("go"))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                await streaming.wait()
                await owner.dispose()
        assert ctx.agents.get("x") is None
        assert ctx.sessions.get("x") is None
    assert outcomes[0].kind == "disposed"
    assert handle.agent.status == "disposed"
    assert handle.agent.session.events[-1].type == "turn/end"
    assert turn_end(handle.agent.session.events, 1) == {"kind": "disposed"}


async def test_stopping_the_harness_disposes_agents_mid_turn_without_hanging() -> None:
    """The loop stopping tears down every agent: a streaming one and one inside a tool end their
    turns ``disposed`` while their sessions are still live (persistence sees the turn/end)."""
    in_tool = anyio.Event()
    streaming = anyio.Event()
    published_ends: list[tuple[str, Any]] = []

    @tool
    async def wait_forever() -> str:
        """Never finishes on its own."""
        in_tool.set()
        await anyio.sleep_forever()
        return "never"

    class Watch:
        @hookimpl
        def dsh_session_event(self, session: Any, event: Any) -> None:
            if event.type == "assistant/chunk" and session.id == "streamer":
                streaming.set()
            if event.type == "turn/end":
                published_ends.append((session.id, event.data["reason"]))

    watch = Lifecycle()
    streamer_model = ScriptedModel([ScriptedModel.hang("half an answer")], provider="s1")
    tooler_model = ScriptedModel([ScriptedModel.tool_call("wait_forever")], provider="s2")
    host = _Host(Harness(plugins=[Watch(), watch], autoload=False))
    outcomes: dict[str, Any] = {}

    async def run(agent: Any) -> None:
        outcomes[agent.id] = await agent.run("go")

    async with anyio.create_task_group() as tg:
        with anyio.fail_after(5):
            ctx = await host.start(tg)
            ctx.llm.register_adapter("s1", streamer_model)
            ctx.llm.register_adapter("s2", tooler_model)
            ctx.tools.register(wait_forever)
            streamer = (await ctx.agents.create("streamer", agent_options=AgentOptions(model="s1/m"))).agent
            tooler = (await ctx.agents.create("tooler", agent_options=AgentOptions(model="s2/m"))).agent
            idler = (await ctx.agents.create("idler", agent_options=MODEL)).agent
            tg.start_soon(run, streamer)
            tg.start_soon(run, tooler)
            await streaming.wait()
            await in_tool.wait()
            host.stop_now.set()
            await host.stopped.wait()
    assert {k: v.kind for k, v in outcomes.items()} == {"streamer": "disposed", "tooler": "disposed"}
    for agent in (streamer, tooler, idler):
        assert agent.status == "disposed"
        assert watch.of(agent.id)[-2:] == ["agent/disposed", "session/disposed"]
    assert sorted(published_ends) == [("streamer", {"kind": "disposed"}), ("tooler", {"kind": "disposed"})]
    tool_results = [e for e in tooler.session.events if e.type == "tool/result"]
    assert [e.data["error_code"] for e in tool_results] == ["ABORTED"]
    kept = [e for e in streamer.session.events if e.type == "assistant/message"]
    assert len(kept) == 1
    assert kept[0].data["interrupted"] is True
    assert len(idler.session.events) == 0


async def test_stopping_the_loop_does_not_wait_forever_for_a_setup_in_flight() -> None:
    """Seed 000: provider shutdown aborts load/setup/publication of creates in flight and waits
    for their rollback; SPEC §6: disposal never hangs. A setup that waits on something the
    stopping harness will never provide must not block the stop."""
    entered = anyio.Event()
    release = anyio.Event()

    async def setup(agent_ctx: Context) -> None:
        entered.set()
        await release.wait()

    host = _Host(Harness(autoload=False))
    results: list[Any] = []

    async def create(ctx: Context) -> None:
        try:
            results.append(await ctx.agents.create("x", agent_options=MODEL, setup=setup))
        except Exception as exc:  # noqa: BLE001
            results.append(exc)

    async with anyio.create_task_group() as tg:
        with anyio.fail_after(5):
            ctx = await host.start(tg)
            tg.start_soon(create, ctx)
            await entered.wait()
        host.stop_now.set()
        with anyio.move_on_after(3):
            await host.stopped.wait()
        finished_in_time = host.stopped.is_set()
        release.set()  # let a setup that was not aborted finish, so the test ends either way
    assert finished_in_time, "harness.stop() waited for a create's setup instead of aborting it"
    assert len(results) == 1
    assert isinstance(results[0], Exception)


async def test_when_idle_never_raises() -> None:
    streaming = anyio.Event()

    class OnChunk:
        @hookimpl
        def dsh_session_event(self, event: Any) -> None:
            if event.type == "assistant/chunk":
                streaming.set()

    model = ScriptedModel([ScriptedModel.failure("SERVER"), ScriptedModel.hang("wait")])
    async with running(model, plugins=[OnChunk()]) as ctx:
        handle = await ctx.agents.create("x", agent_options=MODEL)
        agent = handle.agent
        with anyio.fail_after(5):
            agent.send("fails")
            await agent.when_idle()  # a failed turn: returns, does not raise
            assert turn_end(agent.session.events, 1)["kind"] == "error"
            waited: list[str] = []

            async def wait() -> None:
                await agent.when_idle()
                waited.append(agent.status)

            async with anyio.create_task_group() as tg:
                agent.send("hangs")
                tg.start_soon(wait)
                tg.start_soon(wait)
                await streaming.wait()
                await handle.dispose()
            assert waited == ["disposed", "disposed"]
            await agent.when_idle()  # after disposal: returns at once


async def test_runs_pending_when_the_agent_is_disposed_return_disposed() -> None:
    """run() returns the outcome of its prompt: the running turn ends disposed, and a prompt that
    was still queued behind it never runs — its run() must say disposed too, not aborted (no
    cancel() was ever called)."""
    streaming = anyio.Event()

    class OnChunk:
        @hookimpl
        def dsh_session_event(self, event: Any) -> None:
            if event.type == "assistant/chunk":
                streaming.set()

        @hookimpl
        def dsh_agent_queued(self, message: Any) -> None:
            if message.message.text == "queued":
                queued.set()

    queued = anyio.Event()
    outcomes: dict[str, Any] = {}
    async with running(ScriptedModel([ScriptedModel.hang("x")]), plugins=[OnChunk()]) as ctx:
        handle = await ctx.agents.create("x", agent_options=MODEL)
        agent = handle.agent

        async def run(text: str) -> None:
            outcomes[text] = await agent.run(text)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "running")
                await streaming.wait()
                tg.start_soon(run, "queued")
                await queued.wait()  # the second run() has sent its prompt (and waits for its turn)
                await handle.dispose()
        with pytest.raises(AgentDisposedError):
            await agent.run("too late")
    assert outcomes["running"].kind == "disposed"
    assert outcomes["queued"].kind == "disposed"


async def test_run_returns_when_its_prompt_is_cancelled_while_being_queued() -> None:
    """An agent/queued listener (a policy) cancels as the prompt is accepted: run() must return
    the aborted outcome, not wait forever for a turn that will never come."""

    class CancelOnQueue:
        @hookimpl
        def dsh_agent_queued(self, agent: Any, message: Any) -> None:
            if message.message.text == "forbidden":
                agent.cancel()

    async with running(ScriptedModel(["allowed"]), plugins=[CancelOnQueue()]) as ctx:
        async with await ctx.agents.create("x", agent_options=MODEL) as handle:
            with anyio.fail_after(2):
                first = await handle.agent.run("forbidden")
            with anyio.fail_after(5):
                second = await handle.agent.run("ok")
    assert first.kind == "aborted"
    assert second.text == "allowed"


# ---------------------------------------------------------------------- ctx.agent_loop.create


class Published:
    """Sets an event when ``agent/session-start`` fires for an id (publication finished)."""

    def __init__(self) -> None:
        self.events: dict[str, anyio.Event] = {}

    def of(self, ident: str) -> anyio.Event:
        return self.events.setdefault(ident, anyio.Event())

    @hookimpl
    def dsh_agent_session_start(self, agent: Any) -> None:
        self.of(agent.id).set()


async def test_sync_create_makes_an_agent_under_the_exact_id_owned_by_the_caller(tmp_path: Path) -> None:
    published = Published()
    async with running(ScriptedModel(["sync ok"]), plugins=[published]) as ctx:
        owner = ctx.child("plugin:owner")
        agent = owner.agent_loop.create("exact-id", MODEL, cwd=str(tmp_path))
        assert agent.id == "exact-id" == agent.session.id
        assert agent.options == MODEL
        assert agent.session.meta.cwd == str(tmp_path)
        with anyio.fail_after(5):
            await published.of("exact-id").wait()
            assert ctx.agents.get("exact-id") is agent
            outcome = await agent.run("hi")
        assert outcome.text == "sync ok"
        await owner.dispose()
        assert ctx.agents.get("exact-id") is None
        assert agent.status == "disposed"


async def test_sync_create_then_send_publishes_every_event() -> None:
    """A caller may send right after the synchronous create: every event the agent logs must
    reach session/event (persistence and UIs follow it), including the prompt's inbox/queued."""
    published: list[str] = []

    class Follow:
        @hookimpl
        def dsh_session_event(self, session: Any, event: Any) -> None:
            if session.id == "s":
                published.append(event.type)

    async with running(ScriptedModel(["ok"]), plugins=[Follow()]) as ctx:
        agent = ctx.agent_loop.create("s", MODEL)
        with anyio.fail_after(5):
            outcome = await agent.run("right away")
        logged = trail(agent.session.events, quiet=False)
    assert outcome.kind == "completed"
    assert published == logged


async def test_sync_create_of_a_live_id_fails_at_once() -> None:
    """The id is the agent's identity: a synchronous create of a live id must raise instead of
    returning an agent that is silently disposed in the background."""
    async with running(ScriptedModel()) as ctx:
        live = await ctx.agents.create("x", agent_options=MODEL)
        with pytest.raises(DuplicateRegistrationError):
            ctx.agent_loop.create("x", MODEL)
        assert ctx.agents.get("x") is live.agent
        await live.dispose()


async def test_model_and_cwd_prompt_variables_resolve_per_agent(tmp_path: Path) -> None:
    def setup(agent_ctx: Context) -> None:
        agent_ctx.system_prompt.section("where", "model={{model}} cwd={{cwd}}")

    model = ScriptedModel(["ok"])
    async with running(model) as ctx:
        async with await ctx.agents.create(
            "x", meta={"cwd": str(tmp_path)}, agent_options=MODEL, setup=setup
        ) as handle:
            await handle.agent.run("hi")
            header = next(e for e in handle.agent.session.events if e.type == "request/header")
    system = model.requests[0].system or ""
    assert f"model=scripted/test cwd={tmp_path}" in system
    assert header.data["system"] == system


# ---------------------------------------------------------------------- config agents


def _agents_config(*specs: dict[str, Any]) -> dict[str, Any]:
    return {"plugins": {"agent-loop": {"agents": list(specs)}}}


async def test_a_config_agent_gets_a_fresh_combined_id_and_runs() -> None:
    model = ScriptedModel(["configured"])
    async with running(model, config=_agents_config({"id": "bot", "model": "scripted/x"})) as ctx:
        agents = ctx.agents.list()
        assert len(agents) == 1
        agent = agents[0]
        assert re.fullmatch(r"bot-session-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", agent.id)
        assert agent.options.model == "scripted/x"
        with anyio.fail_after(5):
            outcome = await agent.run("hello")
    assert outcome.text == "configured"
    assert agent.status == "disposed"  # stopped with the harness
    assert (model.requests[0].provider, model.requests[0].model) == ("scripted", "x")


async def test_two_config_agents_with_one_label_get_distinct_ids(tmp_path: Path) -> None:
    config = _agents_config({"id": "bot"}, {"id": "bot", "cwd": str(tmp_path)})
    async with running(ScriptedModel(), config=config) as ctx:
        ids = [agent.id for agent in ctx.agents.list()]
        cwds = sorted(str(agent.session.meta.cwd) for agent in ctx.agents.list())
    assert len(set(ids)) == 2
    assert all(i.startswith("bot-session-") for i in ids)
    assert cwds == sorted([str(tmp_path), "None"])


async def test_config_session_id_creates_exactly_that_id_without_persistence(tmp_path: Path) -> None:
    config = _agents_config({"id": "bot", "session_id": "fixed", "cwd": str(tmp_path)})
    async with running(ScriptedModel(), config=config) as ctx:
        agent = ctx.agents.get("fixed")
        assert agent is not None
        assert agent.session.meta.cwd == str(tmp_path)
        assert [a.id for a in ctx.agents.list()] == ["fixed"]


@pytest.mark.parametrize(
    ("specs", "problem"),
    [
        ([{"id": "bot", "session_id": "a", "resume_session_id": "a"}], "not both"),
        ([{"id": "one", "session_id": "same"}, {"id": "two", "session_id": "same"}], "same"),
        ([{"id": "one", "session_id": "same"}, {"id": "two", "resume_session_id": "same"}], "same"),
        ([{"id": "bot", "model": 5}], "model"),
        ([{"model": "scripted/x"}], "id"),
    ],
)
async def test_bad_config_agents_are_rejected_at_load(specs: list[dict[str, Any]], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        async with Harness(config=_agents_config(*specs), autoload=False):
            pass


async def test_config_resume_session_id_requires_persistence() -> None:
    with pytest.raises(ConfigError, match="persistence"):
        async with Harness(config=_agents_config({"id": "bot", "resume_session_id": "old"}), autoload=False):
            pass


async def test_an_agent_seeded_with_a_finished_turn_continues_numbering() -> None:
    """ctx.agents.create with a seed (a fork's prefix): turn numbers continue from the seed."""
    log = await _finished_log("seeded answer")
    model = ScriptedModel(["continued"])
    async with running(model) as ctx:
        async with await ctx.agents.create("child", seed=log, agent_options=MODEL) as handle:
            outcome = await handle.agent.run("more")
            events = list(handle.agent.session.events)
    assert outcome.text == "continued"
    assert [e.data["turn"] for e in events if e.type == "turn/start"] == [1, 2]
    assert events[len(log)].type == "inbox/queued"
    assert [m.text for m in model.requests[0].messages] == ["remember me", "seeded answer", "more"]  # type: ignore[union-attr]



_SELF_DISPOSE = """
import sys
import anyio
from dsh_core import AgentOptions, Harness, tool
from dsh_core.testing import ScriptedModel


async def main() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("finish")])
    async with Harness(autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        handles = []

        @tool
        async def finish() -> str:
            '''End this agent's life from inside its own turn.'''
            await handles[0].dispose()
            return "disposed myself"

        ctx.tools.register(finish)
        handles.append(await ctx.agents.create("x", agent_options=AgentOptions(model="scripted/t")))
        agent = handles[0].agent
        agent.send("go")
        await agent.when_idle()
        events = list(agent.session.events)
    calls = [e.data["call_id"] for e in events if e.type == "tool/call"]
    results = [e.data["message"]["call_id"] for e in events if e.type == "tool/result"]
    print("CALLS", calls == results, flush=True)
    print("END", events[-1].type, events[-1].data.get("reason", {}).get("kind"), flush=True)


anyio.run(main, backend=sys.argv[1])
"""


async def test_an_agent_disposed_from_inside_its_own_turn_does_not_deadlock(anyio_backend: str) -> None:
    """A tool (or listener) of an agent awaits that agent's own handle.dispose(): the teardown must
    not wait for the very driver it runs in. Run in a subprocess, because the teardown is shielded
    from cancellation: a deadlock there could not be interrupted in this process."""
    import sys

    with anyio.fail_after(10):
        result = await anyio.run_process(
            [sys.executable, "-c", _SELF_DISPOSE, anyio_backend], check=False, cwd=str(Path(__file__).parents[1])
        )
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert "CALLS True" in out
    assert "END turn/end disposed" in out


async def test_a_failed_resume_releases_what_load_reserved() -> None:
    """A resume whose setup raises gives the stored session back (persistence.release)."""
    log = await _finished_log("stored answer")
    persistence = FakePersistence({"old": log})

    def broken_setup(agent_ctx: Context) -> None:
        raise RuntimeError("setup failed")

    async with running(ScriptedModel([]), plugins=[persistence]) as ctx:
        with pytest.raises(RuntimeError, match="setup failed"):
            await ctx.agents.resume("old", agent_options=MODEL, setup=broken_setup)
        assert persistence.released == ["old"]
        assert ctx.agents.get("old") is None
