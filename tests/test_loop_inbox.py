"""The durable inbox (SPEC §3, §5): every accepted message is in the log before anyone hears of it,
its consumer carries its id, a cancel records what it dropped, and an agent created over a log
restores exactly the pending messages — without running them until the next ``send``.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dsh_core import Block, ContinuationStop, SessionEvent, hookimpl, tool
from dsh_core.testing import ScriptedModel
from dsh_core.vocabulary import UserMessage

from .loop_kit import MODEL, running, trail, turn_end, turn_trail

pytestmark = pytest.mark.anyio


def _queued(ident: str, text: str, kind: str = "send") -> tuple[str, dict[str, Any]]:
    """A seed pair: an ``inbox/queued`` record of an accepted message."""
    return ("inbox/queued", {"id": ident, "kind": kind, "message": UserMessage(content=text).to_json()})


def _texts(request: Any) -> list[str]:
    return [message.text for message in request.messages]


def _of(events: Any, kind: str) -> list[SessionEvent]:
    return [e for e in events if e.type == kind]


class OnChunk:
    """Sets ``streaming`` at the first streamed chunk."""

    def __init__(self) -> None:
        self.streaming = anyio.Event()

    @hookimpl
    def dsh_session_event(self, event: Any) -> None:
        if event.type == "assistant/chunk":
            self.streaming.set()


async def test_inbox_queued_is_logged_before_agent_queued_fires() -> None:
    seen: list[tuple[str, str, Any, str]] = []

    class Queued:
        @hookimpl
        def dsh_agent_queued(self, agent: Any, message: Any) -> None:
            last = agent.session.events[-1]
            seen.append((message.kind, message.message.text, last.type, last.data["id"] == message.id))

    @tool
    def work() -> str:
        """Steer and inject while the turn runs."""
        agent.steer("steered")
        agent.inject("injected")
        return "worked"

    model = ScriptedModel([ScriptedModel.tool_call("work"), "done"])
    async with running(model, plugins=[Queued()]) as ctx:
        ctx.tools.register(work)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                await agent.run("prompt")
            queued = {e.data["message"]["content"][0]["text"]: e.data for e in _of(agent.session.events, "inbox/queued")}
    assert seen == [
        ("send", "prompt", "inbox/queued", True),
        ("steer", "steered", "inbox/queued", True),
        ("inject", "injected", "inbox/queued", True),
    ]
    assert {text: data["kind"] for text, data in queued.items()} == {
        "prompt": "send", "steered": "steer", "injected": "inject",
    }


async def test_a_malformed_message_is_refused_before_anything_is_logged() -> None:
    heard: list[Any] = []

    class Queued:
        @hookimpl
        def dsh_agent_queued(self, message: Any) -> None:
            heard.append(message)

    async with running(ScriptedModel(), plugins=[Queued()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with pytest.raises(TypeError):
                agent.send(42)  # type: ignore[arg-type]
            with pytest.raises((TypeError, ValueError)):
                agent.steer("ok", source={"kind": float("nan")})
            with pytest.raises(TypeError):
                agent.inject(object())  # type: ignore[arg-type]
            await agent.when_idle()
            assert len(agent.session.events) == 0
            assert agent.status == "idle"
    assert heard == []


async def test_every_consumed_message_carries_its_queued_id() -> None:
    class Gate:
        @hookimpl
        def dsh_agent_prompt_submit(self, message: Any) -> Any:
            return Block("not this one") if message.text == "blocked" else None

    model = ScriptedModel(["answer"])
    async with running(model, plugins=[Gate()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            ids = [agent.send("one"), agent.send("blocked"), agent.send("two")]
            with anyio.fail_after(5):
                await agent.when_idle()
            events = list(agent.session.events)
    assert [e.data["id"] for e in _of(events, "inbox/queued")] == ids
    assert [e.data["queued_id"] for e in _of(events, "user/message")] == [ids[0], ids[2]]
    assert [e.data["queued_id"] for e in _of(events, "prompt/blocked")] == [ids[1]]
    assert trail(events).count("turn/start") == 1


async def test_cancel_mid_turn_records_every_dropped_message() -> None:
    watch = OnChunk()
    model = ScriptedModel([ScriptedModel.hang("thinking")])
    async with running(model, plugins=[watch]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                agent.send("go")
                await watch.streaming.wait()
                later = agent.send("later")
                adjust = agent.steer("adjust")
                agent.cancel()
                await agent.when_idle()
            events = list(agent.session.events)
    cleared = _of(events, "inbox/cleared")
    assert len(cleared) == 1
    assert sorted(cleared[0].data["ids"]) == sorted([later, adjust])
    assert turn_end(events, 1) == {"kind": "aborted"}
    assert trail(events).count("turn/start") == 1  # "later" never runs
    assert len(model.requests) == 1


async def test_an_agent_over_a_log_restores_exactly_the_pending_messages() -> None:
    """queued - consumed - cleared, from a real log: a consumed prompt, a blocked one, a cancelled
    one and a finished turn are not pending; the extra queued record is."""

    class Gate:
        @hookimpl
        def dsh_agent_prompt_submit(self, message: Any) -> Any:
            return Block("no") if message.text == "blocked" else None

    async with running(ScriptedModel(["first answer"]), plugins=[Gate()]) as ctx:
        async with await ctx.agents.create("old", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.send("consumed")
            agent.send("blocked")
            with anyio.fail_after(5):
                await agent.when_idle()
            agent.send("cancelled")
            agent.cancel()
            with anyio.fail_after(5):
                await agent.when_idle()
            old_log = list(agent.session.events)
    assert _of(old_log, "inbox/cleared")

    seed = [*old_log, _queued("q-pending", "still pending")]
    model = ScriptedModel(["second answer"])
    async with running(model) as ctx:
        async with await ctx.agents.create("new", seed=seed, agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                new_id = agent.send("fresh")
                await agent.when_idle()
            events = list(agent.session.events)
    consumed = [e.data["queued_id"] for e in events[len(seed) :] if e.type == "user/message"]
    assert consumed == ["q-pending", new_id]
    assert _texts(model.requests[0]) == ["consumed", "first answer", "still pending", "fresh"]


async def test_restored_prompts_wait_for_the_next_send_then_run_with_it() -> None:
    seed = [
        _queued("q1", "restored one"),
        _queued("q2", "restored steer", kind="steer"),
        _queued("q3", "restored context", kind="inject"),
    ]
    statuses: list[tuple[str, str]] = []

    class Watch:
        @hookimpl
        def dsh_agent_status(self, agent: Any, status: str) -> None:
            statuses.append((agent.id, status))

    model = ScriptedModel(["other agent done", "together"])
    async with running(model, plugins=[Watch()]) as ctx:
        handle = await ctx.agents.create("restored", seed=seed, agent_options=MODEL)
        agent = handle.agent
        with anyio.fail_after(5):
            await agent.when_idle()  # restored work is not running work: returns at once
            # let the drivers run: a whole turn of another agent happens meanwhile
            async with await ctx.agents.create("other", agent_options=MODEL) as other:
                await other.agent.run("tick")
        assert len(agent.session.events) == len(seed)  # nothing ran, nothing was logged
        assert ("restored", "running") not in statuses
        with anyio.fail_after(5):
            new = agent.send("new prompt")
            await agent.when_idle()
        events = list(agent.session.events)[len(seed) :]
        await handle.dispose()
    assert trail(events) == [
        "inbox/queued", "turn/start", "user/message", "user/message", "user/message",
        "context/message", "step/start", "assistant/message", "turn/end",
    ]
    assert [e.data["queued_id"] for e in events if e.type in ("user/message", "context/message")] == [
        "q1", "q2", new, "q3",
    ]
    assert _texts(model.requests[1]) == ["restored one", "restored steer", "new prompt", "restored context"]


async def test_cancel_while_idle_clears_restored_prompts_durably() -> None:
    model = ScriptedModel(["only the new one"])
    async with running(model) as ctx:
        async with await ctx.agents.create("r", seed=[_queued("q1", "stale")], agent_options=MODEL) as handle:
            agent = handle.agent
            agent.cancel()
            events = list(agent.session.events)
            assert [e.type for e in events] == ["inbox/queued", "inbox/cleared"]
            assert list(events[1].data["ids"]) == ["q1"]
            with anyio.fail_after(5):
                outcome = await agent.run("new")
    assert outcome.text == "only the new one"
    assert _texts(model.requests[0]) == ["new"]


async def test_inject_while_idle_is_logged_at_once_flushed_and_rides_with_the_next_turn() -> None:
    flushed: list[int] = []
    statuses: list[str] = []

    class Durable:
        @hookimpl
        async def dsh_session_flush(self, session: Any) -> None:
            flushed.append(len(session.events))

        @hookimpl
        def dsh_agent_status(self, status: str) -> None:
            statuses.append(status)

    model = ScriptedModel(["answer"])
    async with running(model, plugins=[Durable()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.inject("the build is green")
            assert trail(agent.session.events) == ["context/message"]  # appended at once
            message = agent.session.events[0].data["message"]
            assert message["source"] == {"kind": "context"}
            with anyio.fail_after(5):
                await agent.when_idle()  # waits for the durable flush
            assert flushed == [1]
            assert statuses == []  # no turn for an injection
            with anyio.fail_after(5):
                outcome = await agent.run("how is the build?")
            events = list(agent.session.events)
    assert outcome.text == "answer"
    assert _texts(model.requests[0]) == ["the build is green", "how is the build?"]
    assert trail(events).count("turn/start") == 1


async def test_an_idle_injection_is_flushed_before_its_session_is_disposed() -> None:
    order: list[str] = []

    class Durable:
        @hookimpl
        async def dsh_session_flush(self, session: Any) -> None:
            order.append(f"flush:{len(session.events)}")

        @hookimpl
        def dsh_session_disposed(self) -> None:
            order.append("session/disposed")

    async with running(ScriptedModel(), plugins=[Durable()]) as ctx:
        handle = await ctx.agents.create("a1", agent_options=MODEL)
        handle.agent.inject("remember this")
        with anyio.fail_after(5):
            await handle.dispose()
    assert order == ["flush:1", "session/disposed"]


async def test_inject_while_running_lands_at_the_next_step() -> None:
    @tool
    def probe() -> str:
        """Inject a note while the tool runs."""
        agent.inject("note from the tool")
        return "probed"

    model = ScriptedModel([ScriptedModel.tool_call("probe"), "final"])
    async with running(model) as ctx:
        ctx.tools.register(probe)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                outcome = await agent.run("go")
            events = list(agent.session.events)
    assert outcome.text == "final"
    assert turn_trail(events, 1) == [
        "turn/start", "user/message",
        "step/start", "assistant/message", "tool/call", "inbox/queued", "tool/result", "context/message",
        "step/start", "assistant/message", "turn/end",
    ]
    queued = next(e for e in _of(events, "inbox/queued") if e.data["kind"] == "inject")
    assert _of(events, "context/message")[0].data["queued_id"] == queued.data["id"]
    assert _texts(model.requests[1])[-1] == "note from the tool"


async def test_an_injection_does_not_keep_a_finishing_turn_going() -> None:
    """inject() never wakes: context injected as a turn is deciding to stop rides with the next
    turn; unlike steering it does not make the loop call the model again (seed 000: pending
    *steering* can override an ordinary stop)."""

    class InjectAtContinuation:
        done = False

        @hookimpl
        def dsh_agent_turn_continuation(self, agent: Any) -> None:
            if not self.done:
                self.done = True
                agent.inject("for later")

    model = ScriptedModel(["first", "second"])
    async with running(model, plugins=[InjectAtContinuation()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                first = await agent.run("one")
                steps_in_turn_one = len(model.requests)
                second = await agent.run("two")
    assert steps_in_turn_one == 1
    assert (first.text, second.text) == ("first", "second")
    assert "for later" in _texts(model.requests[1])


async def test_steer_while_idle_behaves_like_send() -> None:
    model = ScriptedModel(["steered into a turn"])
    async with running(model) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            ident = agent.steer("change of plan")
            with anyio.fail_after(5):
                await agent.when_idle()
            events = list(agent.session.events)
    assert trail(events) == ["inbox/queued", "turn/start", "user/message", "step/start", "assistant/message", "turn/end"]
    assert _of(events, "user/message")[0].data["queued_id"] == ident
    assert _texts(model.requests[0]) == ["change of plan"]
    assert turn_end(events, 1) == {"kind": "completed"}


async def test_a_terminal_stop_discards_steering_durably_but_keeps_queued_prompts() -> None:
    ids: dict[str, str] = {}

    class StopAndSteer:
        @hookimpl
        def dsh_agent_turn_stop(self, agent: Any, turn: int) -> Any:
            if turn == 1:
                ids["steer"] = agent.steer("too late")
                ids["send"] = agent.send("next prompt")
                return ContinuationStop("budget")
            return None

    model = ScriptedModel(["stopped here", "next answer"])
    async with running(model, plugins=[StopAndSteer()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                first = await agent.run("go")
                await agent.when_idle()
            events = list(agent.session.events)
    assert first.reason == {"kind": "stopped", "reason": "budget"}
    cleared = _of(events, "inbox/cleared")
    assert [list(e.data["ids"]) for e in cleared] == [[ids["steer"]]]
    assert turn_end(events, 2) == {"kind": "completed"}
    assert [e.data["queued_id"] for e in _of(events, "user/message")][1:] == [ids["send"]]
    assert "too late" not in _texts(model.requests[1])


async def test_steering_left_at_an_ordinary_turn_end_runs_as_the_next_prompt() -> None:
    ids: list[str] = []

    class SteerWhileFlushing:
        @hookimpl
        async def dsh_session_flush(self, session: Any) -> None:
            agent = ctx.agents.get(session.id)
            if not ids and agent is not None:
                ids.append(agent.steer("after the end"))

    model = ScriptedModel(["first", "second"])
    async with running(model, plugins=[SteerWhileFlushing()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                await agent.run("go")
                await agent.when_idle()
            events = list(agent.session.events)
    assert trail(events).count("turn/start") == 2
    assert _of(events, "user/message")[-1].data["queued_id"] == ids[0]
    assert _texts(model.requests[1])[-1] == "after the end"
    model.assert_consumed()



async def test_an_injection_after_the_turn_ended_never_opens_a_turn() -> None:
    """Context injected while the turn is flushing (after its turn/end) must wait for the next
    send; it must not be turned into a prompt that opens a turn of its own."""
    injected: list[bool] = []

    class InjectWhileFlushing:
        @hookimpl
        async def dsh_session_flush(self, session: Any) -> None:
            agent = ctx.agents.get(session.id)
            if not injected and agent is not None:
                injected.append(True)
                agent.inject("late context")

    model = ScriptedModel(["first", "second"])
    async with running(model, plugins=[InjectWhileFlushing()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                await agent.run("one")
                await agent.when_idle()
            turns_before_next_send = trail(agent.session.events).count("turn/start")
            with anyio.fail_after(5):
                second = await agent.run("two")
    assert injected == [True]
    assert turns_before_next_send == 1
    assert second.text == "second"
    assert _texts(model.requests[1])[-2:] == ["late context", "two"] or _texts(model.requests[1])[-2:] == [
        "two", "late context",
    ]
