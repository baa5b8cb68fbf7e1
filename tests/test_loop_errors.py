"""Error containment (seed 000, SPEC §4 and §6): a raising plugin ends the turn, never the loop.

Every hook the loop calls is given a listener that raises once (in turn 1). The turn must end
``error`` with the failure, ``agent/error`` must fire exactly once with that turn and step, every
tool call must still get its ``tool/result`` (so the history stays a valid request), and the
next ``run()`` must work. Observers that raise never change the outcome. Model failures end the
turn ``error`` with their ``Failure``; ``agent/request-error`` returning ``Retry`` re-streams
within the same step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from dsh_core import Retry, hookimpl, tool
from dsh_core.llm import Failure
from dsh_core.testing import Reply, ScriptedModel

from .loop_kit import MODEL, assert_tool_calls_answered, running, trail, turn_end, turn_trail

pytestmark = pytest.mark.anyio


class Boom(Exception):
    """What the misbehaving listeners raise."""


class _Once:
    """Raises ``Boom`` the first time it is tripped, then behaves."""

    def __init__(self) -> None:
        self.armed = True

    def trip(self) -> None:
        if self.armed:
            self.armed = False
            raise Boom(f"boom from {type(self).__name__}")


class PromptSubmit(_Once):
    @hookimpl
    def dsh_agent_prompt_submit(self) -> None:
        self.trip()


class SessionPrefix(_Once):
    @hookimpl
    def dsh_agent_session_prefix(self) -> None:
        self.trip()


class PreStep(_Once):
    @hookimpl
    async def dsh_agent_pre_step(self) -> None:
        self.trip()


class Request(_Once):
    @hookimpl
    def dsh_agent_request(self) -> None:
        self.trip()


class RequestError(_Once):
    @hookimpl
    def dsh_agent_request_error(self) -> None:
        self.trip()


class StepResult(_Once):
    @hookimpl
    def dsh_agent_step_result(self) -> None:
        self.trip()


class TurnContinuation(_Once):
    @hookimpl
    def dsh_agent_turn_continuation(self) -> None:
        self.trip()


class TurnStop(_Once):
    @hookimpl
    async def dsh_agent_turn_stop(self) -> None:
        self.trip()


class PreExecute(_Once):
    @hookimpl
    def dsh_tools_pre_execute(self) -> None:
        self.trip()


class Execute(_Once):
    @hookimpl
    async def dsh_tools_execute(self, call_next: Callable[[], Awaitable[Any]]) -> Any:
        self.trip()
        return await call_next()


class PostExecute(_Once):
    @hookimpl
    def dsh_tools_post_execute(self) -> None:
        self.trip()


class ErrorLog:
    """Records every ``agent/error``."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, int, int, BaseException]] = []

    @hookimpl
    def dsh_agent_error(self, agent: Any, turn: int, step: int, error: BaseException) -> None:
        self.errors.append((agent.id, turn, step, error))


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


_TOOL_STEP = ["step/start", "assistant/message", "tool/call", "tool/result"]

# hook -> (listener, turn-1 script, turn-1 trail between turn/start and turn/end, step reported
# by agent/error or None when the failure comes before the step is opened in the log)
CASES: dict[str, tuple[type[_Once], list[Reply | str], list[str], int | None]] = {
    "agent/prompt-submit": (PromptSubmit, [], ["inbox/cleared"], 0),
    "agent/session-prefix": (SessionPrefix, [], ["user/message"], None),
    "agent/pre-step": (PreStep, [], ["user/message"], None),
    "agent/request": (Request, [], ["user/message", "step/start"], 1),
    "agent/request-error": (RequestError, [ScriptedModel.failure("SERVER")], ["user/message", "step/start"], 1),
    "agent/step-result": (StepResult, ["lost"], ["user/message", "step/start"], 1),
    "agent/turn-continuation": (TurnContinuation, ["kept"], ["user/message", "step/start", "assistant/message"], 1),
    "agent/turn-stop": (TurnStop, ["kept"], ["user/message", "step/start", "assistant/message"], 1),
    "tools/pre-execute": (PreExecute, [ScriptedModel.tool_call("lookup", {"key": "k"})], ["user/message", *_TOOL_STEP], 1),
    "tools/execute": (Execute, [ScriptedModel.tool_call("lookup", {"key": "k"})], ["user/message", *_TOOL_STEP], 1),
    "tools/post-execute": (PostExecute, [ScriptedModel.tool_call("lookup", {"key": "k"})], ["user/message", *_TOOL_STEP], 1),
}


@pytest.mark.parametrize("hook", list(CASES))
async def test_a_raising_listener_ends_the_turn_not_the_loop(hook: str) -> None:
    listener_cls, script, middle, step = CASES[hook]
    listener, errors = listener_cls(), ErrorLog()
    model = ScriptedModel([*script, "second turn works"])
    async with running(model, plugins=[listener, errors]) as ctx:
        ctx.tools.register(lookup)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            agent = handle.agent
            with anyio.fail_after(5):
                first = await agent.run("first")
                second = await agent.run("second")
                await agent.when_idle()
            events = list(agent.session.events)
            messages = list(agent.session.derive_messages())
            status = agent.status
    assert not listener.armed, f"the {hook} listener was never called"
    assert first.kind == "error"
    assert first.reason["failure"]["code"] == "UNKNOWN"
    assert f"boom from {listener_cls.__name__}" in first.reason["failure"]["message"]
    assert turn_trail(events, 1) == ["turn/start", *middle, "turn/end"]
    assert turn_end(events, 1) == first.reason
    # the loop survived: the next prompt runs a normal turn
    assert (second.kind, second.text) == ("completed", "second turn works")
    assert turn_trail(events, 2)[-3:] == ["step/start", "assistant/message", "turn/end"]
    assert status == "idle"
    # agent/error exactly once, for turn 1, carrying the listener's exception
    assert len(errors.errors) == 1, errors.errors
    agent_id, turn, error_step, error = errors.errors[0]
    assert (agent_id, turn) == ("a1", 1)
    assert isinstance(error, Boom)
    if step is not None:
        assert error_step == step
    # every tool call the model made has its result: the history is a valid request
    assert_tool_calls_answered(messages)
    assert_tool_calls_answered(model.requests[-1].messages)
    model.assert_consumed()


@pytest.mark.parametrize("listener_cls", [PreExecute, Execute, PostExecute])
async def test_a_tool_pipeline_failure_answers_every_call_of_the_step(listener_cls: type[_Once]) -> None:
    """Three calls, the pipeline fails on the first: the two others still get a tool/result each."""
    listener = listener_cls()
    reply = Reply(
        ScriptedModel.call("lookup", {"key": "a"}),
        ScriptedModel.call("lookup", {"key": "b"}),
        ScriptedModel.call("lookup", {"key": "c"}),
    )
    model = ScriptedModel([reply, "recovered"])
    async with running(model, plugins=[listener]) as ctx:
        ctx.tools.register(lookup)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                first = await handle.agent.run("go")
                second = await handle.agent.run("again")
            events = list(handle.agent.session.events)
            messages = list(handle.agent.session.derive_messages())
    assert first.kind == "error"
    assert second.kind == "completed"
    calls = [e.data["call_id"] for e in events if e.type == "tool/call"]
    results = [e.data["message"]["call_id"] for e in events if e.type == "tool/result"]
    assert calls == results == ["call_1", "call_2", "call_3"]
    assert all("error_code" in e.data for e in events if e.type == "tool/result")
    assert_tool_calls_answered(messages)


async def test_a_failure_among_parallel_tool_calls_reports_the_plugins_error() -> None:
    """Parallel-safe calls run in a task group; the turn's failure and agent/error must still name
    the listener's own exception, not an anonymous exception group."""

    @tool(parallel_safe=True)
    def fetch(key: str) -> str:
        """Fetch a key (parallel-safe)."""
        return key

    class FailOnB:
        @hookimpl
        def dsh_tools_pre_execute(self, execution: Any) -> None:
            if execution.parsed.get("key") == "b":
                raise Boom("pre-execute refused b")

    errors = ErrorLog()
    reply = Reply(ScriptedModel.call("fetch", {"key": "a"}), ScriptedModel.call("fetch", {"key": "b"}))
    model = ScriptedModel([reply, "recovered"])
    async with running(model, plugins=[FailOnB(), errors]) as ctx:
        ctx.tools.register(fetch)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                outcome = await handle.agent.run("go")
            messages = list(handle.agent.session.derive_messages())
    assert outcome.kind == "error"
    assert_tool_calls_answered(messages)
    assert "pre-execute refused b" in outcome.reason["failure"]["message"]
    assert len(errors.errors) == 1
    assert isinstance(errors.errors[0][3], Boom)


class RaisingObservers:
    """Every observer (notify) listener raises; none may change the outcome."""

    def __init__(self) -> None:
        self.calls: set[str] = set()

    def _raise(self, name: str) -> None:
        self.calls.add(name)
        raise Boom(f"observer {name} failed")

    @hookimpl
    def dsh_agent_status(self) -> None:
        self._raise("agent/status")

    @hookimpl
    def dsh_agent_queued(self) -> None:
        self._raise("agent/queued")

    @hookimpl
    def dsh_agent_session_start(self) -> None:
        self._raise("agent/session-start")

    @hookimpl
    def dsh_session_created(self) -> None:
        self._raise("session/created")

    @hookimpl
    def dsh_session_event(self) -> None:
        self._raise("session/event")

    @hookimpl
    async def dsh_session_flush(self) -> None:
        self._raise("session/flush")

    @hookimpl
    def dsh_tools_result(self) -> None:
        self._raise("tools/result")

    @hookimpl
    def dsh_agent_disposed(self) -> None:
        self._raise("agent/disposed")

    @hookimpl
    def dsh_session_disposed(self) -> None:
        self._raise("session/disposed")


async def test_raising_observers_never_change_the_outcome() -> None:
    observers, errors = RaisingObservers(), ErrorLog()
    model = ScriptedModel([ScriptedModel.tool_call("lookup", {"key": "k"}), "answer"])
    async with running(model, plugins=[observers, errors]) as ctx:
        ctx.tools.register(lookup)
        handle = await ctx.agents.create("a1", agent_options=MODEL)
        agent = handle.agent
        with anyio.fail_after(5):
            outcome = await agent.run("go")
            await agent.when_idle()
            await handle.dispose()
        assert ctx.agents.get("a1") is None
        assert ctx.sessions.get("a1") is None
    assert (outcome.kind, outcome.text) == ("completed", "answer")
    assert trail(agent.session.events) == [
        "inbox/queued", "turn/start", "user/message",
        "step/start", "assistant/message", "tool/call", "tool/result",
        "step/start", "assistant/message", "turn/end",
    ]
    # Only the failed flush is reported: the session is not durable, though the turn completed.
    assert [(agent_id, turn, step) for agent_id, turn, step, _ in errors.errors] == [("a1", 1, 0)]
    assert "session/flush" in str(errors.errors[0][3])
    assert observers.calls == {
        "agent/status", "agent/queued", "agent/session-start", "session/created", "session/event",
        "session/flush", "tools/result", "agent/disposed", "session/disposed",
    }


async def test_a_raising_agent_error_listener_is_contained() -> None:
    """The agent/error observers themselves may fail: the turn still ends error, the loop lives."""

    class BadErrorObserver:
        @hookimpl
        def dsh_agent_error(self) -> None:
            raise Boom("the error observer failed too")

    model = ScriptedModel([ScriptedModel.failure("SERVER"), "fine"])
    async with running(model, plugins=[BadErrorObserver()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                first = await handle.agent.run("one")
                second = await handle.agent.run("two")
    assert (first.kind, second.kind) == ("error", "completed")


async def test_a_model_failure_not_retried_ends_the_turn_error_with_its_failure() -> None:
    consulted: list[tuple[int, int, int, Failure]] = []

    class Watch:
        @hookimpl
        def dsh_agent_request_error(self, failure: Failure, turn: int, step: int, attempt: int) -> None:
            consulted.append((turn, step, attempt, failure))

    errors = ErrorLog()
    failure = Failure("slow down", "RATE_LIMIT", 429, 2.5)
    model = ScriptedModel([ScriptedModel.failure(failure), "later"])
    async with running(model, plugins=[Watch(), errors]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                first = await handle.agent.run("one")
                second = await handle.agent.run("two")
            events = list(handle.agent.session.events)
    assert first.reason == {"kind": "error", "failure": failure.to_json()}
    assert turn_end(events, 1) == first.reason
    assert consulted == [(1, 1, 1, failure)]
    assert len(errors.errors) == 1
    assert errors.errors[0][1:3] == (1, 1)
    assert getattr(errors.errors[0][3], "failure", None) == failure
    # no assistant/message for the failed step; the failure is in the chunk log
    assert turn_trail(events, 1) == ["turn/start", "user/message", "step/start", "turn/end"]
    finish = [e.data["chunk"] for e in events if e.type == "assistant/chunk" and e.data["turn"] == 1][-1]
    assert (finish["type"], finish["reason"]) == ("finish", "error")
    assert second.kind == "completed"
    model.assert_consumed()


async def test_an_adapter_that_raises_ends_the_turn_with_a_normalised_failure() -> None:
    model = ScriptedModel([ScriptedModel.raises(ConnectionError("connection reset"), "par"), "ok"])
    async with running(model) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                first = await handle.agent.run("one")
                second = await handle.agent.run("two")
            messages = list(handle.agent.session.derive_messages())
    assert first.kind == "error"
    assert first.reason["failure"]["code"] == "TRANSPORT"
    assert "connection reset" in first.reason["failure"]["message"]
    assert second.kind == "completed"
    # the partial text of the failed attempt is not part of the history
    assert [m.text for m in messages] == ["one", "two", "ok"]  # type: ignore[union-attr]


async def test_retry_restreams_within_the_same_step() -> None:
    attempts: list[tuple[int, int, int, str]] = []

    class RetryTwice:
        @hookimpl
        def dsh_agent_request_error(self, failure: Failure, turn: int, step: int, attempt: int) -> Any:
            attempts.append((turn, step, attempt, failure.code))
            return Retry() if attempt < 3 else None

    model = ScriptedModel(
        [
            ScriptedModel.tool_call("lookup", {"key": "k"}),
            ScriptedModel.failure("SERVER", "first"),
            ScriptedModel.failure("TIMEOUT", "second"),
            ScriptedModel.text("third time lucky"),
        ]
    )
    async with running(model, plugins=[RetryTwice()]) as ctx:
        ctx.tools.register(lookup)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                outcome = await handle.agent.run("go")
            events = list(handle.agent.session.events)
    assert (outcome.kind, outcome.text) == ("completed", "third time lucky")
    assert attempts == [(1, 2, 1, "SERVER"), (1, 2, 2, "TIMEOUT")]
    assert trail(events) == [
        "inbox/queued", "turn/start", "user/message",
        *_TOOL_STEP,
        "step/start", "assistant/message", "turn/end",
    ]
    # the three attempts of step 2 stream into step 2: three finishes, one header per change only
    finishes = [e.data["chunk"]["reason"] for e in events if e.type == "assistant/chunk" and e.data["step"] == 2 and e.data["chunk"]["type"] == "finish"]
    assert finishes == ["error", "error", "stop"]
    assert trail(events, quiet=False).count("request/header") == 1
    assert "request/header-delta" not in trail(events, quiet=False)
    # every attempt sends the same request
    assert model.requests[1].messages == model.requests[2].messages == model.requests[3].messages
    model.assert_consumed()


async def test_retry_then_give_up_ends_error_with_the_last_failure() -> None:
    class RetryOnce:
        @hookimpl
        def dsh_agent_request_error(self, attempt: int) -> Any:
            return Retry() if attempt == 1 else None

    model = ScriptedModel([ScriptedModel.failure("SERVER", "one"), ScriptedModel.failure("SERVER", "two")])
    async with running(model, plugins=[RetryOnce()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                outcome = await handle.agent.run("go")
            events = list(handle.agent.session.events)
    assert outcome.kind == "error"
    assert outcome.reason["failure"]["message"] == "two"
    assert trail(events).count("step/start") == 1
    model.assert_consumed()


async def test_a_failure_in_a_later_step_keeps_the_earlier_steps() -> None:
    """A failure in step 2 ends the turn error; step 1's message and tool result stay in history."""
    errors = ErrorLog()

    class FailStepTwo:
        @hookimpl
        def dsh_agent_request(self, step: int) -> None:
            if step == 2:
                raise Boom("no second request")

    model = ScriptedModel([ScriptedModel.tool_call("lookup", {"key": "k"})])
    async with running(model, plugins=[FailStepTwo(), errors]) as ctx:
        ctx.tools.register(lookup)
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                first = await handle.agent.run("go")
            events = list(handle.agent.session.events)
            messages = list(handle.agent.session.derive_messages())
    assert first.kind == "error"
    assert first.message is not None
    assert first.message.tool_calls  # step 1's message is the last one
    assert [e[1:3] for e in errors.errors] == [(1, 2)]
    assert turn_trail(events, 1) == ["turn/start", "user/message", *_TOOL_STEP, "step/start", "turn/end"]
    assert_tool_calls_answered(messages)


async def test_a_prompt_decision_of_the_wrong_kind_never_admits_the_prompt() -> None:
    """agent/prompt-submit takes Allow or Block. A listener returning anything else (here the tools'
    Deny, a plausible mix-up in a policy plugin) is a plugin bug: the prompt must not silently pass
    as allowed — the turn fails closed (SPEC §6: bad input gets a clear error where it enters)."""
    from dsh_core import Deny

    class WrongVocabulary:
        @hookimpl
        def dsh_agent_prompt_submit(self, message: Any) -> Any:
            return Deny("not allowed") if message.text == "secret" else None

    model = ScriptedModel(["fine"])
    async with running(model, plugins=[WrongVocabulary()]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                first = await handle.agent.run("secret")
                second = await handle.agent.run("public")
            events = list(handle.agent.session.events)
    assert first.kind in ("error", "rejected")  # a plugin error (preferred) or a block: never allowed
    assert "secret" not in [e.data["message"]["content"][0]["text"] for e in events if e.type == "user/message"]
    assert [m.text for m in model.requests[0].messages] == ["public"]  # type: ignore[union-attr]
    assert second.kind == "completed"


async def test_a_malformed_session_prefix_does_not_brick_the_agent() -> None:
    """The prefix is frozen for the agent's life — but only a valid one: a listener that returns
    something that is not a sequence of messages fails that turn, and the next turn asks again."""

    class BadPrefixOnce:
        calls = 0

        @hookimpl
        def dsh_agent_session_prefix(self) -> Any:
            self.calls += 1
            return "not a tuple of messages" if self.calls == 1 else None

    prefixer = BadPrefixOnce()
    model = ScriptedModel(["recovered"])
    async with running(model, plugins=[prefixer]) as ctx:
        async with await ctx.agents.create("a1", agent_options=MODEL) as handle:
            with anyio.fail_after(5):
                first = await handle.agent.run("one")
                second = await handle.agent.run("two")
    assert first.kind == "error"
    assert (second.kind, second.text) == ("completed", "recovered")
    assert prefixer.calls == 2
    assert [m.text for m in model.requests[0].messages] == ["one", "two"]  # type: ignore[union-attr]
