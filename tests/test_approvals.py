"""Approvals as logged records (SPEC §10.1): requested, durable, raced, resolved from anywhere."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from dsh_core import (
    AgentOptions,
    ApprovalAnswer,
    ApprovalNotPendingError,
    Ask,
    Context,
    Deny,
    Harness,
    PendingApproval,
    ToolExecution,
    hookimpl,
    tool,
)
from dsh_core.testing import ScriptedModel

from .loop_kit import trail

pytestmark = pytest.mark.anyio

MODEL = AgentOptions(model="scripted/test")


class Asking:
    """Asks before every ``write``; records what the tool saw; sets ``requested`` when a request is logged."""

    name = "asking"

    def __init__(self) -> None:
        self.written: list[str] = []
        self.requested = anyio.Event()
        self.requests = 0
        self._waits: dict[int, anyio.Event] = {}

    async def nth_request(self, count: int) -> None:
        """Return once ``count`` approval requests were logged."""
        if self.requests < count:
            await self._waits.setdefault(count, anyio.Event()).wait()

    def start(self, ctx: Context) -> None:
        @tool
        def write(text: str, times: int = 1) -> str:
            """Write text."""
            self.written.append(text * times)
            return "written"

        ctx.tools.register(write)

    @hookimpl
    def dsh_tools_pre_execute(self, execution: ToolExecution) -> Ask | None:
        return Ask("writing needs a yes") if execution.name == "write" else None

    @hookimpl
    def dsh_session_event(self, session: Any, event: Any) -> None:
        if event.type == "approval/requested":
            self.requested.set()
            self.requests += 1
            if self.requests in self._waits:
                self._waits.pop(self.requests).set()


def writes(*texts: str) -> ScriptedModel:
    replies = [ScriptedModel.tool_call("write", {"text": text}) for text in texts]
    return ScriptedModel([*replies, ScriptedModel.text("done")])


@asynccontextmanager
async def harness(model: ScriptedModel, *plugins: object) -> AsyncIterator[tuple[Context, Any, Asking]]:
    asking = Asking()
    async with Harness(plugins=[asking, *plugins], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        handle = await ctx.agents.create("s1", agent_options=MODEL)
        async with handle:
            yield ctx, handle.agent, asking


def result_of(agent: Any, call_id: str) -> Any:
    return next(
        e.data
        for e in agent.session.events
        if e.type == "tool/result" and e.data["message"]["call_id"] == call_id
    )


def resolved_of(agent: Any, call_id: str) -> Any:
    return next(
        e.data for e in agent.session.events if e.type == "approval/resolved" and e.data["call_id"] == call_id
    )


async def test_with_no_answerer_the_call_waits_until_resolved_through_the_api() -> None:
    async with harness(writes("a")) as (_, agent, asking):
        agent.send("go")
        await asking.requested.wait()
        (pending,) = agent.pending_approvals()
        assert isinstance(pending, PendingApproval)
        assert (pending.call_id, pending.tool, dict(pending.arguments), pending.reason) == (
            "call_1",
            "write",
            {"text": "a"},
            "writing needs a yes",
        )
        assert agent.session.events[pending.seq].type == "approval/requested"
        assert asking.written == []  # nothing ran while it waited
        event = await agent.resolve_approval("call_1", "once")
        assert event.type == "approval/resolved"
        assert dict(event.data) == {
            "call_id": "call_1",
            "decision": "once",
            "reason": None,
            "arguments": None,
            "by": "api",
        }
        await agent.when_idle()
        assert asking.written == ["a"]
        assert agent.pending_approvals() == ()
        types = trail(agent.session.events)
        at = types.index("approval/requested")
        assert types[at - 1 : at + 3] == [
            "tool/call",
            "approval/requested",
            "approval/resolved",
            "tool/result",
        ]
        assert types[-1] == "turn/end"
        assert agent.session.events[-1].data["reason"] == {"kind": "completed"}


async def test_a_denial_tells_the_model_the_reason() -> None:
    model = writes("a")
    async with harness(model) as (_, agent, asking):
        agent.send("go")
        await asking.requested.wait()
        await agent.resolve_approval("call_1", "deny", reason="use the scratch file instead", by="serve")
        await agent.when_idle()
        result = result_of(agent, "call_1")
        assert result["error_code"] == "DENIED"
        text = result["message"]["content"][0]["text"]
        assert "use the scratch file instead" in text
        assert model.requests[1].messages[-1].content[0].text == text  # the model was told
        assert resolved_of(agent, "call_1")["by"] == "serve"
        assert asking.written == []


async def test_edited_arguments_are_checked_and_replace_the_models() -> None:
    async with harness(writes("a")) as (_, agent, asking):
        agent.send("go")
        await asking.requested.wait()
        with pytest.raises(ValueError, match="times"):
            await agent.resolve_approval("call_1", "once", arguments={"text": "b", "times": "many"})
        with pytest.raises(ValueError, match="JSON"):
            await agent.resolve_approval("call_1", "once", arguments='{"text": ')
        with pytest.raises(ValueError, match="not JSON"):
            await agent.resolve_approval("call_1", "once", arguments={"text": float("nan")})
        with pytest.raises(ValueError, match="runs the call"):
            await agent.resolve_approval("call_1", "deny", arguments={"text": "b"})
        assert [p.call_id for p in agent.pending_approvals()] == [
            "call_1"
        ]  # still pending after each refusal
        await agent.resolve_approval("call_1", "once", arguments={"text": "b", "times": 2})
        await agent.when_idle()
        assert asking.written == ["bb"]
        assert dict(resolved_of(agent, "call_1")["arguments"]) == {"text": "b", "times": 2}


async def test_bad_input_to_resolve_is_a_typed_error() -> None:
    async with harness(writes("a")) as (_, agent, asking):
        agent.send("go")
        await asking.requested.wait()
        with pytest.raises(ValueError, match="decision"):
            await agent.resolve_approval("call_1", "maybe")
        with pytest.raises(TypeError):
            await agent.resolve_approval("call_1", True)
        with pytest.raises(TypeError):
            await agent.resolve_approval(7, "once")
        with pytest.raises(ValueError, match="by"):
            await agent.resolve_approval("call_1", "once", by="")
        with pytest.raises(TypeError):
            await agent.resolve_approval("call_1", "deny", reason=3)
        assert len(agent.pending_approvals()) == 1
        agent.cancel()
        await agent.when_idle()


async def test_the_first_resolution_wins_and_a_later_or_unknown_one_raises() -> None:
    async with harness(writes("a")) as (_, agent, asking):
        with pytest.raises(ApprovalNotPendingError):
            await agent.resolve_approval("call_1", "once")
        agent.send("go")
        await asking.requested.wait()
        with pytest.raises(LookupError, match="never requested"):
            await agent.resolve_approval("nope", "once")
        results: list[object] = []

        async def answer(decision: str) -> None:
            try:
                results.append((await agent.resolve_approval("call_1", decision)).data["decision"])
            except ApprovalNotPendingError as exc:
                results.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(answer, "deny")
            group.start_soon(answer, "once")
        winners = [result for result in results if isinstance(result, str)]
        losers = [result for result in results if isinstance(result, ApprovalNotPendingError)]
        assert len(winners) == 1
        assert len(losers) == 1
        assert "already answered" in str(losers[0])
        await agent.when_idle()
        assert resolved_of(agent, "call_1")["decision"] == winners[0]
        assert asking.written == ([] if winners[0] == "deny" else ["a"])
        assert [e.type for e in agent.session.events].count("approval/resolved") == 1


async def test_cancel_while_a_call_waits_resolves_it_cancelled_and_aborts_the_turn() -> None:
    async with harness(writes("a")) as (_, agent, asking):
        agent.send("go")
        await asking.requested.wait()
        agent.cancel()
        await agent.when_idle()
        assert dict(resolved_of(agent, "call_1")) == {
            "call_id": "call_1",
            "decision": "cancelled",
            "reason": None,
            "arguments": None,
            "by": "cancel",
        }
        assert result_of(agent, "call_1")["error_code"] == "ABORTED"
        assert agent.session.events[-1].data["reason"] == {"kind": "aborted"}
        assert agent.pending_approvals() == ()
        assert asking.written == []


class Prompt:
    """An ``approval`` service that waits for its own answer (a human at a prompt) and records how it ended."""

    approval_by = "cli"

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.answer: object = None
        self.release = anyio.Event()
        self.closed: list[str] = []

    async def approve(self, execution: ToolExecution, reason: str) -> object:
        self.asked.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.closed.append(execution.call_id)
            raise
        return self.answer


class PromptPlugin:
    name = "prompt"
    provides = ("approval",)

    def __init__(self, prompt: Prompt) -> None:
        self.prompt = prompt

    def start(self, ctx: Context) -> None:
        ctx.provide("approval", self.prompt)


async def test_an_api_answer_closes_the_prompt_of_the_approval_service() -> None:
    prompt = Prompt()
    async with harness(writes("a"), PromptPlugin(prompt)) as (_, agent, asking):
        agent.send("go")
        await prompt.asked.wait()
        await agent.resolve_approval("call_1", "once", by="serve")
        await agent.when_idle()
        assert prompt.closed == ["call_1"]  # its question closed the moment another answer landed
        assert asking.written == ["a"]
        assert resolved_of(agent, "call_1")["by"] == "serve"


async def test_the_approval_service_answer_wins_when_it_comes_first() -> None:
    prompt = Prompt()
    prompt.answer = ApprovalAnswer("deny", reason="not now")
    async with harness(writes("a"), PromptPlugin(prompt)) as (_, agent, _asking):
        agent.send("go")
        await prompt.asked.wait()
        prompt.release.set()
        await agent.when_idle()
        assert dict(resolved_of(agent, "call_1")) == {
            "call_id": "call_1",
            "decision": "deny",
            "reason": "not now",
            "arguments": None,
            "by": "cli",
        }
        with pytest.raises(ApprovalNotPendingError):
            await agent.resolve_approval("call_1", "once")


class Policy:
    """Answers ``approval/answer`` at once: allows short texts, says nothing about the rest."""

    name = "policy"

    @hookimpl
    def dsh_approval_answer(self, execution: ToolExecution, request: PendingApproval) -> object:
        assert request.call_id == execution.call_id
        return True if len(request.arguments["text"]) < 3 else None


async def test_a_policy_answers_at_once_and_leaves_the_rest_to_others() -> None:
    async with harness(writes("ok", "long text"), Policy()) as (_, agent, asking):
        agent.send("go")
        await asking.nth_request(2)  # the first was answered by the policy at once
        (pending,) = agent.pending_approvals()
        assert pending.call_id == "call_2"
        assert resolved_of(agent, "call_1")["by"] == "policy"
        await agent.resolve_approval("call_2", "once")
        await agent.when_idle()
        assert asking.written == ["ok", "long text"]


async def test_always_lets_the_tool_run_unasked_for_the_rest_of_the_session_from_the_log() -> None:
    model = writes("a", "b")
    async with harness(model) as (ctx, agent, asking):
        agent.send("go")
        await asking.requested.wait()
        await agent.resolve_approval("call_1", "always")
        await agent.when_idle()
        assert asking.written == ["a", "b"]
        assert [e.type for e in agent.session.events].count("approval/requested") == 1
        # A new agent over the same log (what a resume builds) knows "always" from the log alone.
        seed = list(agent.session.events)
    model = writes("c")
    asking = Asking()
    async with Harness(plugins=[asking], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("s2", agent_options=MODEL, seed=seed) as handle:
            await handle.agent.run("again")
            assert asking.written == ["c"]
            assert [e.type for e in handle.agent.session.events].count("approval/requested") == 1


class FlushProbe:
    """Records the log length at each flush, and whether the request was durable when the service was asked."""

    name = "flush-probe"
    provides = ("approval",)

    def __init__(self) -> None:
        self.flushed: list[int] = []
        self.durable_when_asked: bool | None = None
        self.session: Any = None

    def start(self, ctx: Context) -> None:
        ctx.provide("approval", self)

    @hookimpl
    async def dsh_session_flush(self, session: Any) -> None:
        self.session = session
        self.flushed.append(len(session.events))

    async def approve(self, execution: ToolExecution, reason: str) -> bool:
        events = self.session.events if self.session is not None else ()
        requested = next(e.seq for e in events if e.type == "approval/requested")
        self.durable_when_asked = any(length > requested for length in self.flushed)
        return True


async def test_the_request_is_durable_before_anyone_is_asked_and_the_answer_before_the_call_runs() -> None:
    probe = FlushProbe()
    async with harness(writes("a"), probe) as (_, agent, asking):
        await agent.run("go")
        assert probe.durable_when_asked is True
        resolved = next(e.seq for e in agent.session.events if e.type == "approval/resolved")
        result = next(e.seq for e in agent.session.events if e.type == "tool/result")
        assert any(resolved < length <= result for length in probe.flushed)
        assert asking.written == ["a"]


class FailingService:
    name = "failing"
    provides = ("approval",)

    def start(self, ctx: Context) -> None:
        ctx.provide("approval", self)

    async def approve(self, execution: ToolExecution, reason: str) -> object:
        raise OSError("tty gone")


async def test_a_failing_approval_service_denies_and_says_why() -> None:
    async with harness(writes("a"), FailingService()) as (_, agent, asking):
        await agent.run("go")
        resolved = resolved_of(agent, "call_1")
        assert resolved["decision"] == "deny"
        assert "tty gone" in resolved["reason"]
        assert result_of(agent, "call_1")["error_code"] == "DENIED"
        assert asking.written == []


async def test_a_deny_from_the_service_keeps_its_words() -> None:
    class Denying(FailingService):
        async def approve(self, execution: ToolExecution, reason: str) -> object:
            return Deny("nobody could be asked")

    async with harness(writes("a"), Denying()) as (_, agent, _asking):
        await agent.run("go")
        assert "nobody could be asked" in result_of(agent, "call_1")["message"]["content"][0]["text"]


async def test_the_book_is_made_from_the_log_once_per_agent_not_per_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ask must not re-read the whole log (an ask costs a tool step little: benchmarks/approvals.py)."""
    from dsh_core.services.awaited import AwaitedLog

    made: list[str] = []
    original = AwaitedLog.__init__

    def counting(self: Any, session: Any, *args: Any) -> None:
        made.append(session.id)
        original(self, session, *args)

    monkeypatch.setattr(AwaitedLog, "__init__", counting)
    async with harness(writes("a", "b", "c"), Policy()) as (_, agent, asking):
        await agent.run("go")
        assert asking.requests == 3
    assert made == ["s1"]


async def test_one_parked_set_per_session_for_every_awaited_request_type() -> None:
    """A wait ended by a disposal parks its call in the session's ``ParkedCalls`` (approvals and
    questions alike, nothing appended); a wait ended by a cancel appends the closing answer."""
    from dsh_core import CancelSignal
    from dsh_core.services.approvals import ApprovalBook
    from dsh_core.services.awaited import ParkedCalls
    from dsh_core.services.questions import closed_question, question_log
    from dsh_core.session_log import ApprovalRequestedEvent, ApprovalResolvedEvent, QuestionAskedEvent

    async with Harness(autoload=False) as ctx:
        session = await ctx.sessions.create("parking")
        book = ApprovalBook.of(session)
        questions = question_log(session)
        book.log.request(ApprovalRequestedEvent(call_id="a1", tool="write", arguments={}, reason="why"))
        questions.request(QuestionAskedEvent(call_id="q1", questions=[{"id": "x", "question": "X?"}]))
        questions.request(QuestionAskedEvent(call_id="q2", questions=[{"id": "x", "question": "X?"}]))
        disposed, cancelled = CancelSignal(), CancelSignal()
        disposed.cancel("disposed")
        cancelled.cancel()
        length = len(session.events)
        cancel = ApprovalResolvedEvent(call_id="a1", decision="cancelled", by="cancel")
        assert book.log.end_wait("a1", disposed, lambda: cancel) is True
        assert questions.end_wait("q1", disposed, lambda: closed_question("q1", "cancel")) is True
        assert len(session.events) == length, "parking appends nothing"
        parked = ParkedCalls.of(session)
        assert parked.calls == {"a1", "q1"}
        assert book.parked is parked.calls
        assert questions.end_wait("q2", cancelled, lambda: closed_question("q2", "cancel")) is False
        assert "q2" not in parked
        assert session.events[-1].type == "question/answered"
        assert session.events[-1].data["by"] == "cancel"
        assert questions.end_wait("q2", disposed, lambda: closed_question("q2", "cancel")) is False, "answered"
