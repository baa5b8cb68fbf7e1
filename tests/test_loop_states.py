"""The agent's state machine: every legal transition reached through the public API, the illegal ones refused.

A spy on ``AgentMachine._to`` (the one place a state changes) records each transition an agent
makes; each scenario below drives an agent through the public verbs and asserts the exact path.
``test_every_legal_transition_is_reached`` checks that the scenarios together reach every
transition the table allows, so a transition no behaviour can reach shows up as a failure.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from dsh_agent_loop._machine import TRANSITIONS, AgentMachine, AgentState, IllegalTransitionError
from dsh_core import hookimpl
from dsh_core.session_log import InboxQueuedEvent, TurnEnd, TurnEndEvent, TurnStartEvent
from dsh_core.testing import Reply, ScriptedModel
from dsh_core.vocabulary import AgentDisposedError, UserMessage

from .loop_kit import MODEL, running

pytestmark = pytest.mark.anyio

S = AgentState
Path = list[tuple[AgentState, AgentState]]


@pytest.fixture
def moves(monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Every transition, by agent id, in order."""
    seen: dict[str, Path] = {}
    original = AgentMachine._to

    def spy(self: AgentMachine, target: AgentState) -> None:
        source = self.state
        original(self, target)
        seen.setdefault(self._session.id, []).append((source, target))

    monkeypatch.setattr(AgentMachine, "_to", spy)
    return seen


class Calls:
    """An ``agent/status`` listener that runs ``action(agent, status)`` once per matching status."""

    def __init__(self, status: str, action: Any) -> None:
        self.status = status
        self.action = action
        self.done = False

    @hookimpl
    async def dsh_agent_status(self, agent: Any, status: str) -> None:
        if status == self.status and not self.done:
            self.done = True
            result = self.action(agent)
            if result is not None:
                await result


# ---------------------------------------------------------------------- one scenario per path


async def test_a_send_runs_a_turn_and_settles(moves: dict[str, Path]) -> None:
    """IDLE -> WOKEN -> RUNNING -> IDLING -> IDLE; status idle, running, idle."""
    async with running(ScriptedModel(["hi"])) as ctx:
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            agent = handle.agent
            machine = agent.machine
            assert (machine.state, agent.status) == (S.IDLE, "idle")
            agent.send("go")
            assert (machine.state, agent.status) == (S.WOKEN, "idle")
            with anyio.fail_after(5):
                await agent.when_idle()
            assert agent.machine.state is S.IDLE
    assert moves["a"][:4] == [(S.IDLE, S.WOKEN), (S.WOKEN, S.RUNNING), (S.RUNNING, S.IDLING), (S.IDLING, S.IDLE)]
    assert moves["a"][4:] == [(S.IDLE, S.STOPPING), (S.STOPPING, S.DISPOSED)]


async def test_a_send_while_a_turn_runs_opens_the_next_turn_from_running(moves: dict[str, Path]) -> None:
    """RUNNING -> RUNNING, and status stays ``running`` between the two turns."""
    statuses: list[str] = []

    class SendOnce:
        done = False

        @hookimpl
        def dsh_agent_step_result(self, agent: Any) -> None:
            if not self.done:
                self.done = True
                agent.send("again")

        @hookimpl
        def dsh_agent_status(self, status: str) -> None:
            statuses.append(status)

    async with running(ScriptedModel(["one", "two"]), plugins=[SendOnce()]) as ctx:
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                await handle.agent.run("go")
                await handle.agent.when_idle()
            turns = [e.data["turn"] for e in handle.agent.session.events if e.type == "turn/start"]
    assert turns == [1, 2]
    assert moves["a"][:4] == [(S.IDLE, S.WOKEN), (S.WOKEN, S.RUNNING), (S.RUNNING, S.RUNNING), (S.RUNNING, S.IDLING)]
    assert statuses[:2] == ["running", "idle"]


async def test_an_idle_inject_is_flushed_without_a_turn(moves: dict[str, Path]) -> None:
    """IDLE -> WOKEN -> IDLING (the flush) -> IDLE; no status change, no turn."""
    async with running(ScriptedModel()) as ctx:
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            handle.agent.inject("note")
            with anyio.fail_after(5):
                await handle.agent.when_idle()
            assert not [e for e in handle.agent.session.events if e.type == "turn/start"]
    assert moves["a"][:3] == [(S.IDLE, S.WOKEN), (S.WOKEN, S.IDLING), (S.IDLING, S.IDLE)]


async def test_a_cancel_before_the_driver_took_the_prompt_drops_the_turn(moves: dict[str, Path]) -> None:
    """send + cancel at once: WOKEN finds no prompt, goes IDLING (a flush), IDLE; no turn."""
    async with running(ScriptedModel(["later"])) as ctx:
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.send("never")
            agent.cancel()
            with anyio.fail_after(5):
                await agent.when_idle()
                assert not [e for e in agent.session.events if e.type == "turn/start"]
                outcome = await agent.run("later")  # the cancel armed nothing for this one
    assert outcome.text == "later"
    assert moves["a"][:3] == [(S.IDLE, S.WOKEN), (S.WOKEN, S.IDLING), (S.IDLING, S.IDLE)]


async def test_a_send_during_the_idle_announcement_wakes_the_agent_again(moves: dict[str, Path]) -> None:
    """IDLING -> WOKEN: an ``agent/status`` idle listener sends; when_idle() waits for that turn too."""
    async with running(ScriptedModel(["one", "two"]), plugins=[Calls("idle", lambda a: a.send("more"))]) as ctx:
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            handle.agent.send("go")
            with anyio.fail_after(5):
                await handle.agent.when_idle()
            turns = [e for e in handle.agent.session.events if e.type == "turn/start"]
    assert len(turns) == 2
    assert (S.IDLING, S.WOKEN) in moves["a"]
    assert moves["a"][moves["a"].index((S.IDLING, S.WOKEN)) + 1] == (S.WOKEN, S.RUNNING)


async def test_dispose_while_idle(moves: dict[str, Path]) -> None:
    """IDLE -> STOPPING -> DISPOSED."""
    async with running(ScriptedModel()) as ctx:
        handle = await ctx.agents.create("a", agent_options=MODEL)
        await anyio.lowlevel.checkpoint()
        with anyio.fail_after(5):
            await handle.dispose()
        assert handle.agent.status == "disposed"
    assert moves["a"] == [(S.IDLE, S.STOPPING), (S.STOPPING, S.DISPOSED)]


async def test_dispose_while_a_turn_runs_ends_it_disposed(moves: dict[str, Path]) -> None:
    """RUNNING -> STOPPING -> DISPOSED; the turn ends ``disposed`` and run() returns it."""
    started = anyio.Event()

    class Started:
        @hookimpl
        def dsh_agent_pre_step(self) -> None:
            started.set()

    async with running(ScriptedModel([Reply.of_chunks(then="hang")]), plugins=[Started()]) as ctx:
        handle = await ctx.agents.create("a", agent_options=MODEL)
        outcomes: list[str] = []

        async def run() -> None:
            outcomes.append((await handle.agent.run("go")).kind)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            with anyio.fail_after(5):
                await started.wait()
                assert handle.agent.machine.state is S.RUNNING
                await handle.dispose()
    assert outcomes == ["disposed"]
    assert moves["a"][-2:] == [(S.RUNNING, S.STOPPING), (S.STOPPING, S.DISPOSED)]


async def test_dispose_with_a_prompt_not_yet_taken_drains_first(moves: dict[str, Path]) -> None:
    """WOKEN -> DRAINING (the driver flushes the record) -> STOPPING -> DISPOSED; no turn runs."""
    flushed: list[int] = []

    class Durable:
        @hookimpl
        async def dsh_session_flush(self, session: Any) -> None:
            flushed.append(len(session.events))

    async with running(ScriptedModel(), plugins=[Durable()]) as ctx:
        handle = await ctx.agents.create("a", agent_options=MODEL)
        handle.agent.send("never run")
        with anyio.fail_after(5):
            await handle.dispose()
        events = list(handle.agent.session.events)
    assert [e.type for e in events] == ["inbox/queued", "inbox/cleared"]
    assert flushed == [2]
    assert moves["a"] == [
        (S.IDLE, S.WOKEN), (S.WOKEN, S.DRAINING), (S.DRAINING, S.STOPPING), (S.STOPPING, S.DISPOSED),
    ]


async def test_a_vetoed_publication_disposes_an_agent_whose_driver_never_ran(moves: dict[str, Path]) -> None:
    """DRAINING -> DISPOSED: the synchronous create's publication is vetoed after a send."""

    class Veto:
        @hookimpl
        def dsh_agent_created(self, agent: Any) -> None:
            raise RuntimeError("vetoed")

    async with running(ScriptedModel(), plugins=[Veto()]) as ctx:
        agent = ctx.agent_loop.create("a", MODEL)
        queued = agent.send("before publication")
        with anyio.fail_after(5):
            await agent.when_idle()  # returns at DISPOSED
        assert agent.status == "disposed"
        events = list(agent.session.events)
    assert [e.type for e in events] == ["inbox/queued", "inbox/cleared"]
    assert list(events[1].data["ids"]) == [queued]
    assert moves["a"] == [(S.IDLE, S.WOKEN), (S.WOKEN, S.DRAINING), (S.DRAINING, S.DISPOSED)]


async def test_an_agent_disposing_itself_during_the_idle_announcement(moves: dict[str, Path]) -> None:
    """IDLING -> STOPPING: teardown asked from inside the driver (an ``agent/status`` listener)."""
    handles: list[Any] = []

    async def dispose(agent: Any) -> None:
        await handles[0].dispose()

    async with running(ScriptedModel(["bye"]), plugins=[Calls("idle", dispose)]) as ctx:
        handles.append(await ctx.agents.create("a", agent_options=MODEL))
        agent = handles[0].agent
        agent.send("go")
        with anyio.fail_after(5):
            await agent.when_idle()
        assert agent.status == "disposed"
    assert moves["a"][-3:] == [(S.RUNNING, S.IDLING), (S.IDLING, S.STOPPING), (S.STOPPING, S.DISPOSED)]


# ---------------------------------------------------------------------- coverage of the table


async def test_every_legal_transition_is_reached(moves: dict[str, Path]) -> None:
    """The scenarios above, run together, reach every transition in ``TRANSITIONS``."""
    scenarios = [
        test_a_send_runs_a_turn_and_settles,
        test_a_send_while_a_turn_runs_opens_the_next_turn_from_running,
        test_an_idle_inject_is_flushed_without_a_turn,
        test_a_send_during_the_idle_announcement_wakes_the_agent_again,
        test_dispose_while_a_turn_runs_ends_it_disposed,
        test_dispose_with_a_prompt_not_yet_taken_drains_first,
        test_a_vetoed_publication_disposes_an_agent_whose_driver_never_ran,
        test_an_agent_disposing_itself_during_the_idle_announcement,
    ]
    reached: set[tuple[AgentState, AgentState]] = set()
    for scenario in scenarios:
        moves.clear()
        await scenario(moves)
        for path in moves.values():
            reached.update(path)
    legal = {(source, target) for source, targets in TRANSITIONS.items() for target in targets}
    assert legal - reached == set()
    assert reached <= legal


# ---------------------------------------------------------------------- refused


async def test_every_illegal_transition_is_refused_with_both_states_named() -> None:
    async with running(ScriptedModel()) as ctx:
        session = ctx.sessions.prepare("m")
        for source in AgentState:
            for target in AgentState:
                if target in TRANSITIONS[source]:
                    continue
                machine = AgentMachine(session)
                machine._state = source
                with pytest.raises(IllegalTransitionError) as caught:
                    machine._to(target)
                assert machine.state is source  # nothing changed
                message = str(caught.value)
                assert f"{source.value} -> {target.value}" in message
                assert "'m'" in message
                assert (caught.value.source, caught.value.target) == (source, target)


async def test_disposed_is_final() -> None:
    assert TRANSITIONS[AgentState.DISPOSED] == frozenset()


async def test_the_verbs_refuse_a_disposed_agent_and_cancel_stays_a_no_op() -> None:
    async with running(ScriptedModel()) as ctx:
        handle = await ctx.agents.create("a", agent_options=MODEL)
        agent = handle.agent
        await handle.dispose()
        for verb in (agent.send, agent.steer, agent.inject):
            with pytest.raises(AgentDisposedError, match="'a' is disposed"):
                verb("late")
        with pytest.raises(AgentDisposedError):
            agent.run_pending()
        agent.cancel()  # never raises
        assert agent.machine.state is AgentState.DISPOSED
        assert [e.type for e in agent.session.events] == []


# ---------------------------------------------------------------------- run_pending and the turn number


def _pending_seed(ctx: Any) -> list[Any]:
    """A log with one finished turn and one prompt queued after it (never consumed)."""
    donor = ctx.sessions.prepare("donor")
    donor.append(TurnStartEvent(turn=7))
    donor.append(TurnEndEvent(turn=7, reason=TurnEnd("completed")))
    donor.append(InboxQueuedEvent(id="q1", kind="send", message=UserMessage(content="pending one")))
    return list(donor.events)


async def test_restored_prompts_wait_for_run_pending_and_the_turn_number_continues(
    moves: dict[str, Path],
) -> None:
    model = ScriptedModel(["ran the pending one"])
    async with running(model) as ctx:
        seed = _pending_seed(ctx)
        async with await ctx.agents.create("a", seed=seed, agent_options=MODEL) as handle:
            agent = handle.agent
            await anyio.lowlevel.checkpoint()
            assert agent.machine.state is S.IDLE  # restored, not run
            assert agent.run_pending() is True
            with anyio.fail_after(5):
                await agent.when_idle()
            assert agent.run_pending() is False  # nothing left
            events = list(agent.session.events)
    assert [e.data["turn"] for e in events if e.type == "turn/start"] == [7, 8]
    assert [e.data["queued_id"] for e in events if e.type == "user/message"] == ["q1"]
    assert model.requests[0].messages[-1].text == "pending one"
    assert agent.session.last_turn == 8


async def test_a_send_releases_restored_prompts_ahead_of_itself() -> None:
    model = ScriptedModel(["both"])
    async with running(model) as ctx:
        seed = _pending_seed(ctx)
        async with await ctx.agents.create("a", seed=seed, agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                await handle.agent.run("new one")
    assert [m.text for m in model.requests[0].messages] == ["pending one", "new one"]
