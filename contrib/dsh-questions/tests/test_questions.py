"""ask_user: durable questions, answered through the API or a question service, cancelled, and after a SIGKILL."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from dsh_persistence_jsonl import PersistencePlugin
from dsh_questions import QuestionsPlugin

from dsh_core import AgentOptions, Harness, PendingQuestion, QuestionNotPendingError, ToolExecution, hookimpl
from dsh_core.testing import ScriptedModel, kill_when_ready
from dsh_core.vocabulary import thaw_json

pytestmark = pytest.mark.anyio

MODEL = AgentOptions(model="scripted/x")
QUESTIONS = [
    {"id": "db", "question": "Which database?", "options": ["sqlite", "postgres"]},
    {"id": "extras", "question": "Which extras?", "options": ["cache", "search"], "multi_select": True},
    {"id": "name", "question": "What should the service be called?"},
]
ANSWERS = {"db": "postgres", "extras": ["cache", "search"], "name": "widgets"}


def _results(events: Any) -> list[Any]:
    return [event for event in events if event.type == "tool/result"]


def _text(event: Any) -> str:
    return "".join(block["text"] for block in event.data["message"]["content"])


class _AskedWatch:
    """Agent-scoped listener: sets ``asked`` when a ``question/asked`` is appended."""

    def __init__(self) -> None:
        self.asked = anyio.Event()

    @hookimpl
    def dsh_session_event(self, event: Any) -> None:
        if event.type == "question/asked":
            self.asked.set()


async def _wait_pending(agent: Any, watch: _AskedWatch) -> tuple[PendingQuestion, ...]:
    """The agent's pending questions, once its question/asked is in the log."""
    with anyio.fail_after(10):
        await watch.asked.wait()
    return agent.pending_questions()


async def test_the_api_answers_a_waiting_question() -> None:
    """question/asked is logged first; answer_question wakes the call; the result is {"answers": ...}."""
    model = ScriptedModel([ScriptedModel.tool_call("ask_user", {"questions": QUESTIONS}), ScriptedModel.text("thanks")])
    async with Harness(plugins=[QuestionsPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("asker", agent_options=MODEL) as handle:
            agent = handle.agent
            watch = _AskedWatch()
            agent.ctx.register_plugin(watch)
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent.run, "set it up")
                (pending,) = await _wait_pending(agent, watch)
                assert pending.call_id == "call_1"
                assert [dict(q) for q in thaw_json(pending.questions)] == QUESTIONS
                with pytest.raises(ValueError, match="answers leave questions unanswered: name"):
                    await agent.answer_question("call_1", {"db": "sqlite", "extras": []})
                with pytest.raises(ValueError, match="not asked: color"):
                    await agent.answer_question("call_1", {**ANSWERS, "color": "red"})
                with pytest.raises(ValueError, match=r"answers\['db'\] must be a str"):
                    await agent.answer_question("call_1", {**ANSWERS, "db": ["a", "b"]})
                with pytest.raises(TypeError, match="answers must be a mapping"):
                    await agent.answer_question("call_1", ["postgres"])  # type: ignore[arg-type]
                assert agent.pending_questions() == (pending,)  # refused answers leave it pending
                event = await agent.answer_question("call_1", ANSWERS, by="serve")
                assert event.type == "question/answered"
                with pytest.raises(QuestionNotPendingError, match="already answered"):
                    await agent.answer_question("call_1", ANSWERS)
                with pytest.raises(LookupError, match="never requested"):
                    await agent.answer_question("call_9", ANSWERS)
            events = agent.session.events
    types = [event.type for event in events]
    asked, answered = types.index("question/asked"), types.index("question/answered")
    assert types.index("tool/call") < asked < answered < types.index("tool/result")
    assert thaw_json(events[asked].data) == {"call_id": "call_1", "questions": QUESTIONS}
    assert thaw_json(events[answered].data) == {"call_id": "call_1", "answers": ANSWERS, "by": "serve"}
    (result,) = _results(events)
    assert json.loads(_text(result)) == {"answers": ANSWERS}
    assert agent.pending_questions() == ()


async def test_cancel_ends_a_waiting_question() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("ask_user", {"questions": QUESTIONS[:1]})])
    async with Harness(plugins=[QuestionsPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("asker", agent_options=MODEL) as handle:
            agent = handle.agent
            watch = _AskedWatch()
            agent.ctx.register_plugin(watch)
            async with anyio.create_task_group() as tg:
                outcomes: list[Any] = []

                async def run() -> None:
                    outcomes.append(await agent.run("ask"))

                tg.start_soon(run)
                await _wait_pending(agent, watch)
                agent.cancel()
            assert outcomes[0].kind == "aborted"
            answered = [e for e in agent.session.events if e.type == "question/answered"]
            assert thaw_json(answered[0].data) == {"call_id": "call_1", "answers": {}, "by": "cancel"}
            assert _results(agent.session.events)[0].data["error_code"] == "ABORTED"
            assert agent.pending_questions() == ()


class Chooser:
    """A ``question`` service: answers with what it was given, or says nobody can be asked (``None``)."""

    name = "chooser"
    provides = ("question",)
    question_by = "cli"

    def __init__(self, answers: dict[str, Any] | None) -> None:
        self.answers = answers
        self.asked: list[PendingQuestion] = []

    def start(self, ctx: Any) -> None:
        ctx.provide("question", self)

    async def ask(self, execution: ToolExecution, question: PendingQuestion) -> dict[str, Any] | None:
        self.asked.append(question)
        return self.answers


@pytest.mark.parametrize("answers", [ANSWERS, None])
async def test_a_question_service_answers_or_says_nobody_can_be_asked(answers: dict[str, Any] | None) -> None:
    chooser = Chooser(answers)
    model = ScriptedModel([ScriptedModel.tool_call("ask_user", {"questions": QUESTIONS}), ScriptedModel.text("ok")])
    async with Harness(plugins=[chooser, QuestionsPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("asker", agent_options=MODEL) as handle:
            await handle.agent.run("ask")
            events = handle.agent.session.events
    (asked,) = chooser.asked
    assert asked.call_id == "call_1"
    (result,) = _results(events)
    (answered,) = [e for e in events if e.type == "question/answered"]
    if answers is None:
        assert result.data["error_code"] == "TOOL_ERROR"
        assert "nobody can be asked here" in _text(result)
        assert answered.data["by"] == "unavailable"
    else:
        assert json.loads(_text(result)) == {"answers": ANSWERS}
        assert answered.data["by"] == "cli"


async def test_malformed_questions_are_the_models_error() -> None:
    bad = [{"id": "a", "question": "x?"}, {"id": "a", "question": "y?"}]
    model = ScriptedModel([ScriptedModel.tool_call("ask_user", {"questions": bad}), ScriptedModel.text("ok")])
    async with Harness(plugins=[QuestionsPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("asker", agent_options=MODEL) as handle:
            await handle.agent.run("ask")
            (result,) = _results(handle.agent.session.events)
            assert result.data["error_code"] == "TOOL_ERROR"
            assert "questions[1].id 'a' is used twice" in _text(result)
            assert not [e for e in handle.agent.session.events if e.type == "question/asked"]


#: a process whose agent asks, and whose question service signals READY once asked, then hangs
DOOMED = textwrap.dedent(
    """
    import json, sys
    import anyio
    from dsh_core import AgentOptions, Harness
    from dsh_core.testing import ScriptedModel
    from dsh_persistence_jsonl import PersistencePlugin
    from dsh_questions import QuestionsPlugin

    class Stuck:
        name = "stuck"
        provides = ("question",)
        def start(self, ctx):
            ctx.provide("question", self)
        async def ask(self, execution, question):
            print("READY", flush=True)  # asked only once question/asked is durable
            await anyio.sleep_forever()

    async def main(root: str, questions: str) -> None:
        config = {"plugins": {"persistence-jsonl": {"root": root}}}
        model = ScriptedModel([ScriptedModel.tool_call("ask_user", {"questions": json.loads(questions)})])
        plugins = [PersistencePlugin(), Stuck(), QuestionsPlugin()]
        async with Harness(config=config, plugins=plugins, autoload=False) as ctx:
            ctx.llm.register_adapter("scripted", model)
            handle = await ctx.agents.create("doomed", agent_options=AgentOptions(model="scripted/x"))
            await handle.agent.run("ask, then die")

    anyio.run(main, sys.argv[1], sys.argv[2])
    """
)


async def test_a_pending_question_survives_a_sigkill_and_the_parked_step_goes_on(tmp_path: Path) -> None:
    """After a SIGKILL the turn is parked, not repaired: the question is pending again (same call_id),
    and once answered the ask_user call returns the answers and the turn goes on, no model call repeated."""
    await kill_when_ready(DOOMED, str(tmp_path), json.dumps(QUESTIONS))
    model = ScriptedModel([ScriptedModel.text("Setting up postgres with cache and search.")])
    config = {"plugins": {"persistence-jsonl": {"root": str(tmp_path)}}}
    async with Harness(config=config, plugins=[PersistencePlugin(), QuestionsPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.resume("doomed", agent_options=MODEL) as handle:
            agent = handle.agent
            events = agent.session.events
            assert [e.data["reason"]["kind"] for e in events if e.type == "turn/end"] == []  # parked, not repaired
            (pending,) = agent.pending_questions()
            assert pending.call_id == "call_1"
            assert [dict(q) for q in thaw_json(pending.questions)] == QUESTIONS
            await agent.answer_question("call_1", ANSWERS, by="api")
            await agent.when_idle()
            assert agent.pending_questions() == ()
            events = agent.session.events
            (result,) = _results(events)
            assert json.loads(_text(result)) == {"answers": ANSWERS}
            assert [e.data["reason"]["kind"] for e in events if e.type == "turn/end"] == ["completed"]
            assert len([e for e in events if e.type == "question/asked"]) == 1
    (request,) = model.requests  # the answer's step: the ask_user step itself was not asked for again
    assert json.loads(request.messages[-1].content[0].text) == {"answers": ANSWERS}



async def _open_turn_log(*, in_doubt: bool) -> list[Any]:
    """A log that ends inside a turn whose ask_user call waits; ``in_doubt``: a bash call of the same
    step ran without a result too."""
    from dsh_core import AssistantMessage, ToolCall
    from dsh_core.session_log import AssistantMessageEvent, QuestionAskedEvent, ToolCallEvent, TurnStartEvent

    calls = [ToolCall("q1", "ask_user", json.dumps({"questions": QUESTIONS[:1]}))]
    if in_doubt:
        calls.append(ToolCall("b1", "bash", '{"command": "make"}'))
    async with Harness(autoload=False) as ctx:
        session = await ctx.sessions.create("open")
        session.append(TurnStartEvent(turn=1))
        session.append(AssistantMessageEvent(turn=1, step=1, message=AssistantMessage(content=tuple(calls))))
        for call in calls:
            session.append(ToolCallEvent(turn=1, step=1, call_id=call.id, name=call.name, arguments=call.arguments))
        session.append(QuestionAskedEvent(call_id="q1", questions=QUESTIONS[:1]))
        return list(session.events)


async def test_crash_repair_parks_a_waiting_question_or_closes_it() -> None:
    """Only the question waits: the turn is parked (nothing repaired). Another call in doubt: the
    turn is repaired and the question closed by repair."""
    from dsh_core.session_log import parked_turn, repair_events

    alone = await _open_turn_log(in_doubt=False)
    assert repair_events(alone) == []
    parked = parked_turn(alone)
    assert parked is not None
    assert (parked.asking, parked.waiting) == (frozenset({"q1"}), frozenset())
    doubt = await _open_turn_log(in_doubt=True)
    assert parked_turn(doubt) is None
    added = repair_events(doubt)
    assert [event.type for event in added] == ["question/answered", "tool/result", "tool/result", "turn/end"]
    assert thaw_json(added[0].data) == {"call_id": "q1", "answers": {}, "by": "repair"}
    assert [event.data["error_code"] for event in added[1:3]] == ["TOOL_OUTCOME_UNKNOWN"] * 2


async def _leave_while_asking(config: dict[str, Any], session_id: str) -> None:
    """Create ``session_id``, let its ask_user call ask, and dispose the agent while it waits."""
    model = ScriptedModel([ScriptedModel.tool_call("ask_user", {"questions": QUESTIONS[:1]})])
    async with Harness(config=config, plugins=[PersistencePlugin(), QuestionsPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        handle = await ctx.agents.create(session_id, agent_options=MODEL)
        watch = _AskedWatch()
        handle.agent.ctx.register_plugin(watch)
        handle.agent.send("ask me")
        await _wait_pending(handle.agent, watch)
        await handle.dispose()


async def test_disposed_while_asking_the_turn_stays_parked_and_is_asked_again(tmp_path: Path) -> None:
    """Leaving (disposing the agent) while a question waits closes nothing: the next harness asks again."""
    config = {"plugins": {"persistence-jsonl": {"root": str(tmp_path)}}}
    await _leave_while_asking(config, "leaver")
    model = ScriptedModel([ScriptedModel.text("postgres, then.")])
    async with Harness(config=config, plugins=[PersistencePlugin(), QuestionsPlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.resume("leaver", agent_options=MODEL) as handle:
            agent = handle.agent
            types = [event.type for event in agent.session.events]
            assert "turn/end" not in types
            assert "question/answered" not in types
            (pending,) = agent.pending_questions()
            await agent.answer_question(pending.call_id, {"db": "postgres"})
            await agent.when_idle()
            (result,) = _results(agent.session.events)
            assert json.loads(_text(result)) == {"answers": {"db": "postgres"}}
    assert len(model.requests) == 1


async def test_a_parked_question_resumed_without_the_plugin_is_closed_not_left_pending(tmp_path: Path) -> None:
    """Parked with the questions plugin, resumed without it: ask_user is an unknown tool now, and its
    question is closed ``{}`` by repair instead of staying listed as pending; the turn goes on."""
    config = {"plugins": {"persistence-jsonl": {"root": str(tmp_path)}}}
    await _leave_while_asking(config, "orphan")
    model = ScriptedModel([ScriptedModel.text("I will assume sqlite.")])
    async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.resume("orphan", agent_options=MODEL) as handle:
            agent = handle.agent
            assert [q.call_id for q in agent.pending_questions()] == ["call_1"]  # parked: pending again
            await agent.when_idle()
            assert agent.pending_questions() == ()
            events = agent.session.events
            (result,) = _results(events)
            assert result.data["error_code"] == "UNKNOWN_TOOL"
            closed = [thaw_json(e.data) for e in events if e.type == "question/answered"]
            assert closed == [{"call_id": "call_1", "answers": {}, "by": "repair"}]
            assert [e.data["reason"]["kind"] for e in events if e.type == "turn/end"] == ["completed"]
    assert len(model.requests) == 1
