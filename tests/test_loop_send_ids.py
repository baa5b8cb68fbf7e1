"""Caller-chosen inbox ids (SPEC §9.7 core support): a send or steer with an ``id`` is idempotent per
id, and ``resume(..., run_pending=True)`` runs the restored pending prompts without a new send.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import attrs
import pytest

from dsh_core import Context, SessionEvent, tool
from dsh_core.testing import ScriptedModel
from dsh_core.vocabulary import UserMessage

from .loop_kit import MODEL, running

pytestmark = pytest.mark.anyio


@attrs.frozen
class _Loaded:
    meta: Mapping[str, Any]
    events: Sequence[SessionEvent]


class StoredLogs:
    """A ``session_persistence`` service over prepared logs (the loop only loads and releases)."""

    name = "stored-logs"
    provides = ("session_persistence",)

    def __init__(self, logs: Mapping[str, Sequence[SessionEvent]]) -> None:
        self.logs = dict(logs)

    def start(self, ctx: Context) -> None:
        ctx.provide("session_persistence", self)

    async def exists(self, session_id: str) -> bool:
        return session_id in self.logs

    async def load(self, session_id: str) -> _Loaded:
        return _Loaded({}, self.logs[session_id])

    def release(self, session_id: str) -> None:
        pass


def _of(events: Sequence[SessionEvent], kind: str) -> list[SessionEvent]:
    return [e for e in events if e.type == kind]


def _log(*entries: tuple[str, dict[str, Any]]) -> list[SessionEvent]:
    return [SessionEvent(type=kind, seq=seq, time=0.0, data=data) for seq, (kind, data) in enumerate(entries)]


def _queued(ident: str, text: str) -> tuple[str, dict[str, Any]]:
    return ("inbox/queued", {"id": ident, "kind": "send", "message": UserMessage(content=text).to_json()})


async def test_send_with_an_id_queues_it_under_that_id() -> None:
    """The caller's id is the queued id and the consuming user/message carries it."""
    async with running(ScriptedModel(["hi"])) as ctx:
        async with await ctx.agents.create("s", agent_options=MODEL) as handle:
            agent = handle.agent
            assert agent.send("hello", id="upd-1") == "upd-1"
            with anyio.fail_after(5):
                await agent.when_idle()
            events = list(agent.session.events)
    assert [e.data["id"] for e in _of(events, "inbox/queued")] == ["upd-1"]
    assert [e.data["queued_id"] for e in _of(events, "user/message")] == ["upd-1"]


async def test_a_second_send_of_a_pending_id_is_a_no_op() -> None:
    """Sending the same id twice before the turn takes it queues one message and runs it once."""
    model = ScriptedModel(["once"])
    async with running(model) as ctx:
        async with await ctx.agents.create("s", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.send("hello", id="dup")
            assert agent.send("a different text, same id", id="dup") == "dup"
            with anyio.fail_after(5):
                await agent.when_idle()
            events = list(agent.session.events)
    assert len(_of(events, "inbox/queued")) == 1
    assert [e.data["message"]["content"][0]["text"] for e in _of(events, "user/message")] == ["hello"]
    model.assert_consumed()


async def test_a_send_of_a_consumed_id_runs_no_turn() -> None:
    """An id whose turn already ran is recognised: the retried send returns it and nothing runs."""
    model = ScriptedModel(["first"])
    async with running(model) as ctx:
        async with await ctx.agents.create("s", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                await agent.run("hello")  # an agent-chosen id, for contrast
                agent.send("go", id="x")
                await agent.when_idle()
                model.add("never played")
                assert agent.send("go", id="x") == "x"
                await agent.when_idle()
            events = list(agent.session.events)
    assert len(_of(events, "turn/start")) == 2
    assert model.remaining == 1


async def test_a_steer_with_an_id_is_idempotent_while_running() -> None:
    """Steering retried with the same id during a turn reaches the next step once."""
    steered: list[str] = []

    @tool
    def work() -> str:
        """Steer twice with one id while the turn runs."""
        steered.append(agent.steer("look left", id="st-1"))
        steered.append(agent.steer("look left (retried)", id="st-1"))
        return "worked"

    model = ScriptedModel([ScriptedModel.tool_call("work"), "done"])
    async with running(model) as ctx:
        ctx.tools.register(work)
        async with await ctx.agents.create("s", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                await agent.run("go")
            events = list(agent.session.events)
    assert steered == ["st-1", "st-1"]
    assert [e.data["queued_id"] for e in _of(events, "steering/message")] == ["st-1"]
    assert [e.data["id"] for e in _of(events, "inbox/queued")].count("st-1") == 1


@pytest.mark.parametrize(("bad", "error"), [(7, TypeError), ("", ValueError)])
async def test_a_malformed_id_is_refused_and_nothing_is_queued(bad: object, error: type[Exception]) -> None:
    async with running(ScriptedModel()) as ctx:
        async with await ctx.agents.create("s", agent_options=MODEL) as handle:
            agent = handle.agent
            with pytest.raises(error, match="id"):
                agent.send("hello", id=bad)  # type: ignore[arg-type]
            with pytest.raises(error, match="id"):
                agent.steer("hello", id=bad)  # type: ignore[arg-type]
            assert _of(agent.session.events, "inbox/queued") == []


async def test_ids_from_a_resumed_log_stay_known() -> None:
    """After a resume, an id the log already consumed is still a no-op."""
    log = _log(
        _queued("old-1", "first"),
        ("turn/start", {"turn": 1}),
        ("user/message", {"message": UserMessage(content="first").to_json(), "queued_id": "old-1"}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    )
    model = ScriptedModel()
    async with running(model, plugins=[StoredLogs({"s": log})]) as ctx:
        async with await ctx.agents.resume("s", agent_options=MODEL) as handle:
            agent = handle.agent
            assert agent.send("first", id="old-1") == "old-1"
            with anyio.fail_after(5):
                await agent.when_idle()
            assert len(agent.session.events) == len(log)
    assert model.requests == []


async def test_resume_with_run_pending_runs_the_restored_prompts() -> None:
    """A pending prompt in the log runs at once when resumed with run_pending=True."""
    log = _log(_queued("p-1", "pending work"))
    model = ScriptedModel(["did it"])
    async with running(model, plugins=[StoredLogs({"s": log})]) as ctx:
        async with await ctx.agents.resume("s", agent_options=MODEL, run_pending=True) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                await agent.when_idle()
            events = list(agent.session.events)
    assert [e.data["queued_id"] for e in _of(events, "user/message")] == ["p-1"]
    assert [e.data["reason"]["kind"] for e in _of(events, "turn/end")] == ["completed"]
    model.assert_consumed()


async def test_resume_without_run_pending_waits_for_the_next_send() -> None:
    """By default restored prompts wait, then ride with the next send's turn."""
    log = _log(_queued("p-1", "pending work"))
    model = ScriptedModel(["both"])
    async with running(model, plugins=[StoredLogs({"s": log})]) as ctx:
        async with await ctx.agents.resume("s", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                await agent.when_idle()
                assert _of(agent.session.events, "turn/start") == []
                await agent.run("and this")
            events = list(agent.session.events)
    assert next(e.data["queued_id"] for e in _of(events, "user/message")) == "p-1"
    assert len(_of(events, "turn/start")) == 1


async def test_run_pending_with_nothing_pending_runs_no_turn() -> None:
    log = _log(
        _queued("old-1", "first"),
        ("turn/start", {"turn": 1}),
        ("user/message", {"message": UserMessage(content="first").to_json(), "queued_id": "old-1"}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    )
    model = ScriptedModel()
    async with running(model, plugins=[StoredLogs({"s": log})]) as ctx:
        async with await ctx.agents.resume("s", agent_options=MODEL, run_pending=True) as handle:
            with anyio.fail_after(5):
                await handle.agent.when_idle()
            assert len(handle.agent.session.events) == len(log)
    assert model.requests == []


async def test_run_pending_must_be_a_bool() -> None:
    async with running(ScriptedModel(), plugins=[StoredLogs({"s": []})]) as ctx:
        with pytest.raises(TypeError, match="run_pending"):
            await ctx.agents.resume("s", agent_options=MODEL, run_pending="yes")  # type: ignore[arg-type]
        assert ctx.agents.list() == ()
