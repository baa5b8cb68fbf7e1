"""Compaction in a running agent: the threshold, tool pairs, the derived history, failures, cancel, resume."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from dsh_core import AgentOptions, Harness, SurfaceOp, ToolResultMessage, UserMessage, tool
from dsh_core.llm import LlmRequest, Usage
from dsh_core.testing import Reply, ScriptedModel

from .compaction_kit import (
    MODEL,
    Responder,
    check_pairs,
    compactions,
    is_summary_request,
    read_note,
    replaces,
    running,
    summaries,
    summary_reply,
)

pytestmark = pytest.mark.anyio

#: Three prompts of about 300 tokens each against a 1000-token window: the third step is over 80%.
PROMPT = "x" * 1200
SMALL = {"keep_recent_tokens": 150}


async def test_threshold_triggers_compaction_before_the_step() -> None:
    """Before the step whose request would be over the threshold, the old exchanges are summarised."""
    model = ScriptedModel(["ok 1", "ok 2", summary_reply(), "ok 3"], context_window=1000)
    async with running(model, SMALL) as ctx, await ctx.agents.create("a", agent_options=MODEL) as handle:
        agent = handle.agent
        for number in (1, 2):
            await agent.run(f"prompt {number} {PROMPT}")
        before = list(agent.session.derive_messages())
        assert compactions(agent.session.events) == []
        outcome = await agent.run(f"prompt 3 {PROMPT}")
        events = agent.session.events
        messages = list(agent.session.derive_messages())
    assert outcome.kind == "completed"
    assert outcome.text == "ok 3"
    model.assert_consumed()
    summary_request = model.requests[2]
    assert is_summary_request(summary_request)
    # the two whole earlier exchanges (shortened to fit this tiny window: same messages, same ids)
    assert [m.id for m in summary_request.messages[:4]] == [m.id for m in before[:4]]
    assert len(summary_request.messages) == 5
    [facts] = compactions(events)
    assert facts["reason"] == "threshold"
    assert (facts["turn"], facts["step"], facts["start"], facts["end"]) == (3, 1, 0, 4)
    assert facts["tokens_before"] > 800 > facts["tokens_after"]
    assert facts["context_window"] == 1000
    assert facts["model"] == "scripted/test"
    [replace] = replaces(events)
    assert replace.type == "user/message"
    assert replace.surface == SurfaceOp.replace(0, 4)
    assert facts["message_seq"] == replace.seq
    assert (
        facts["shadowed_seqs"]
        == tuple(
            e.seq for e in events if e.type in ("user/message", "assistant/message") and e.seq < replace.seq
        )[:4]
    )
    # derive_messages(): the summary first, then the tail, as the next request saw it
    assert summaries(messages) == [messages[0]]
    assert messages[0].text.startswith("<conversation-summary>")
    assert "The user asked for notes" in messages[0].text
    assert messages[1].text.startswith("prompt 3")
    assert messages[2].text == "ok 3"
    assert list(model.requests[3].messages) == messages[:2]


async def test_reported_usage_calibrates_the_estimate() -> None:
    """When the model counts more tokens than the estimate, compaction comes earlier."""
    prompt = "y" * 600  # about 150 tokens by the estimate
    counted = ScriptedModel.text("ok 1", usage=Usage(input_tokens=700, output_tokens=10))
    model = ScriptedModel([counted, summary_reply(), "ok 2"], context_window=1000)
    async with running(model, SMALL) as ctx, await ctx.agents.create("a", agent_options=MODEL) as handle:
        await handle.agent.run(prompt)
        pressure = await ctx.compaction.measure(handle.agent)
        await handle.agent.run(prompt)
        events = handle.agent.session.events
    assert pressure.calibrated
    assert pressure.tokens == 710
    assert is_summary_request(model.requests[1])
    [facts] = compactions(events)
    assert facts["tokens_before"] > 800
    model.assert_consumed()


def tool_turn_model(steps: int, window: int) -> Responder:
    """``steps`` calls of ``read_note`` in one turn, then an answer; summaries whenever asked."""
    made = 0

    def answer(request: LlmRequest) -> Reply:
        nonlocal made
        if is_summary_request(request):
            return summary_reply()
        made += 1
        return (
            ScriptedModel.tool_call("read_note", {"name": str(made)})
            if made <= steps
            else ScriptedModel.text("done")
        )

    return Responder(answer, context_window=window)


async def test_tool_calls_are_never_separated_from_their_results() -> None:
    """Within one long tool turn, compaction cuts between steps only; every request stays well formed."""
    model = tool_turn_model(8, window=1500)
    async with running(model, {"keep_recent_tokens": 250}) as ctx:
        ctx.tools.register(read_note)
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("read the notes")
            events = handle.agent.session.events
            messages = list(handle.agent.session.derive_messages())
    assert outcome.kind == "completed"
    facts = compactions(events)
    assert len(facts) >= 2
    for request in model.requests:
        if not is_summary_request(request):
            check_pairs(request.messages)
    check_pairs(messages)
    assert summaries(messages) == [messages[0]]
    # the kept tail holds at least the configured tokens: the cut is never right before the last result
    assert not isinstance(messages[1], ToolResultMessage)


async def test_a_seeded_copy_derives_the_same_messages() -> None:
    """The log alone rebuilds the compacted history: a session seeded with it derives the same messages."""
    model = ScriptedModel(["ok 1", "ok 2", summary_reply(), "ok 3"], context_window=1000)
    async with running(model, SMALL) as ctx, await ctx.agents.create("a", agent_options=MODEL) as handle:
        for number in (1, 2, 3):
            await handle.agent.run(f"prompt {number} {PROMPT}")
        session = handle.agent.session
        copy = ctx.sessions.prepare("copy", seed=session.events)
        assert len(compactions(session.events)) == 1
        assert list(copy.derive_messages()) == list(session.derive_messages())
        assert copy.surface == session.surface


async def test_resume_after_compaction_gives_the_same_messages(tmp_path: Any) -> None:
    """A session resumed from disk after a compaction derives the same messages and continues."""
    persistence = pytest.importorskip("dsh_persistence_jsonl")
    plugin = persistence.PersistencePlugin
    config = {"persistence-jsonl": {"root": str(tmp_path)}}
    model = ScriptedModel(["ok 1", "ok 2", summary_reply(), "ok 3", "ok 4"], context_window=1000)
    table: dict[str, Any] = {"plugins": {"compaction": SMALL, **config}}
    from dsh_compaction import CompactionPlugin

    async with Harness(config=table, plugins=[CompactionPlugin, plugin], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            for number in (1, 2, 3):
                await handle.agent.run(f"prompt {number} {PROMPT}")
            expected = list(handle.agent.session.derive_messages())
    async with Harness(config=table, plugins=[CompactionPlugin, plugin], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.resume("a", agent_options=MODEL) as handle:
            assert list(handle.agent.session.derive_messages()) == expected
            outcome = await handle.agent.run("prompt 4")
    assert outcome.text == "ok 4"
    assert list(model.requests[-1].messages[:3]) == expected


@pytest.mark.parametrize(
    "failing",
    [
        ScriptedModel.failure("SERVER", "overloaded"),
        ScriptedModel.raises(RuntimeError("adapter bug")),
        ScriptedModel.text(""),
    ],
    ids=["error-finish", "adapter-raises", "no-text"],
)
async def test_failed_summarisation_leaves_the_log_intact(
    failing: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    """A failed summary appends nothing, logs a warning, and the step runs on the full history."""
    model = ScriptedModel(["ok 1", "ok 2", failing, "ok 3"], context_window=1000)
    async with running(model, SMALL) as ctx, await ctx.agents.create("a", agent_options=MODEL) as handle:
        for number in (1, 2):
            await handle.agent.run(f"prompt {number} {PROMPT}")
        with caplog.at_level(logging.WARNING, logger="dsh.compaction"):
            outcome = await handle.agent.run(f"prompt 3 {PROMPT}")
        events = handle.agent.session.events
        messages = list(handle.agent.session.derive_messages())
    assert outcome.kind == "completed"
    assert outcome.text == "ok 3"
    assert compactions(events) == []
    assert replaces(events) == []
    assert summaries(messages) == []
    assert len(model.requests[3].messages) == 5  # the whole history went out
    assert any("compaction before step 3.1 failed" in record.getMessage() for record in caplog.records)
    model.assert_consumed()


async def test_a_vetoed_append_leaves_the_log_intact(caplog: pytest.LogCaptureFixture) -> None:
    """If the session refuses the summary (a validator vetoes it), nothing is appended and the turn goes on."""

    def no_summaries(session: object, kind: str, data: Any) -> None:
        if kind == "user/message" and data["message"]["source"]["kind"] == "compaction":
            raise ValueError("summaries are not allowed here")

    model = ScriptedModel(["ok 1", "ok 2", summary_reply(), "ok 3"], context_window=1000)
    async with running(model, SMALL) as ctx, await ctx.agents.create("a", agent_options=MODEL) as handle:
        handle.agent.session.add_validator(no_summaries)
        for number in (1, 2):
            await handle.agent.run(f"prompt {number} {PROMPT}")
        with caplog.at_level(logging.WARNING, logger="dsh.compaction"):
            outcome = await handle.agent.run(f"prompt 3 {PROMPT}")
        events = handle.agent.session.events
    assert outcome.kind == "completed"
    assert compactions(events) == []
    assert replaces(events) == []
    [warning] = [r for r in caplog.records if "compaction before step 3.1 failed" in r.getMessage()]
    assert warning.exc_info is not None
    assert "summaries are not allowed here" in str(warning.exc_info[1])


class Watched(ScriptedModel):
    """A scripted model that says when the summarisation request arrives."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.summarising = anyio.Event()

    def stream(self, request: LlmRequest) -> Any:
        if is_summary_request(request):
            self.summarising.set()
        return super().stream(request)


async def test_cancel_during_summarisation() -> None:
    """cancel() while the summary streams: nothing is appended, and the turn ends aborted."""
    model = Watched(
        ["ok 1", "ok 2", ScriptedModel.hang("## Goals\npartial")], context_window=1000, checkpoints=True
    )
    async with running(model, SMALL) as ctx, await ctx.agents.create("a", agent_options=MODEL) as handle:
        agent = handle.agent
        for number in (1, 2):
            await agent.run(f"prompt {number} {PROMPT}")
        waiting = agent.send(f"prompt 3 {PROMPT}")
        assert waiting
        with anyio.fail_after(10):
            await model.summarising.wait()
            agent.cancel()
            await agent.when_idle()
        events = agent.session.events
        messages = list(agent.session.derive_messages())
    assert events[-1].type == "turn/end"
    assert events[-1].data["reason"]["kind"] == "aborted"
    assert compactions(events) == []
    assert replaces(events) == []
    assert summaries(messages) == []
    assert [e.type for e in events].count("step/start") == 2  # the third step never started


async def test_overflow_compacts_and_retries_once_then_fails_cleanly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """CONTEXT_WINDOW_EXCEEDED: compact, retry once; a second overflow in the step ends the turn ``error``."""
    overflow = ScriptedModel.failure("CONTEXT_WINDOW_EXCEEDED", "prompt is too long")
    model = ScriptedModel(["ok 1", overflow, summary_reply(), overflow, "ok 3"], context_window=100_000)
    async with running(model) as ctx, await ctx.agents.create("a", agent_options=MODEL) as handle:
        agent = handle.agent
        await agent.run("prompt 1")
        with caplog.at_level(logging.WARNING, logger="dsh.compaction"):
            failed = await agent.run("prompt 2")
        facts = compactions(agent.session.events)
        after = await agent.run("prompt 3")
    assert failed.kind == "error"
    assert failed.reason["failure"]["code"] == "CONTEXT_WINDOW_EXCEEDED"
    [fact] = facts
    assert (fact["reason"], fact["turn"], fact["step"]) == ("overflow", 2, 1)
    assert (fact["start"], fact["end"]) == (0, 2)  # the largest head: all but the new prompt
    assert is_summary_request(model.requests[2])
    assert len(model.requests) == 5  # request, summary, one retry; then the next turn
    assert any("overflowed the context window again" in r.getMessage() for r in caplog.records)
    assert after.kind == "completed"
    assert after.text == "ok 3"
    model.assert_consumed()


async def test_overflow_retry_sends_the_compacted_history() -> None:
    """The retried request carries the summary instead of the history it replaced."""
    overflow = ScriptedModel.failure("CONTEXT_WINDOW_EXCEEDED", "prompt is too long")
    model = ScriptedModel(["ok 1", overflow, summary_reply(), "ok 2"], context_window=100_000)
    async with running(model) as ctx, await ctx.agents.create("a", agent_options=MODEL) as handle:
        await handle.agent.run("prompt 1")
        outcome = await handle.agent.run("prompt 2")
        messages = list(handle.agent.session.derive_messages())
    assert outcome.kind == "completed"
    retried = model.requests[3]
    assert summaries(retried.messages) == [retried.messages[0]]
    assert list(retried.messages) == messages[:-1]


async def test_overflow_hook_keeps_an_earlier_decision_and_ignores_other_failures() -> None:
    """An earlier listener's Retry stands; failures other than an overflow are not this plugin's."""
    from dsh_compaction import CompactionPlugin

    from dsh_core import CancelSignal, Retry
    from dsh_core.llm import Failure

    plugin = CompactionPlugin()
    model = ScriptedModel(["ok 1"], context_window=1000)
    async with running(model) as ctx, await ctx.agents.create("a", agent_options=MODEL) as handle:
        await handle.agent.run("hi")
        overflow = Failure("too long", "CONTEXT_WINDOW_EXCEEDED")
        signal = CancelSignal()
        kept = await plugin.dsh_agent_request_error(handle.agent, Retry(1.0), overflow, 1, 1, signal)
        other = await plugin.dsh_agent_request_error(handle.agent, None, Failure("x", "SERVER"), 1, 1, signal)
        assert compactions(handle.agent.session.events) == []
    assert kept is None
    assert other is None
    model.assert_consumed()


async def test_compact_now_while_idle() -> None:
    """compact_now summarises an idle agent's history on demand, keeping the recent tail."""
    model = ScriptedModel(["ok 1", "ok 2", summary_reply()], context_window=100_000)
    async with (
        running(model, {"keep_recent_tokens": 10}) as ctx,
        await ctx.agents.create("a", agent_options=MODEL) as handle,
    ):
        agent = handle.agent
        assert await ctx.compaction.compact_now(agent) is None  # nothing yet
        await agent.run("prompt 1")
        await agent.run("prompt 2")
        result = await ctx.compaction.compact_now(agent)
        messages = list(agent.session.derive_messages())
        facts = compactions(agent.session.events)
    assert result is not None
    assert (result.reason, result.turn, result.step, result.start, result.end) == ("manual", None, None, 0, 2)
    assert result.summary == "The user asked for notes; the agent read them."
    assert [fact["message_seq"] for fact in facts] == [result.message_seq]
    assert [m.text for m in messages[1:]] == ["prompt 2", "ok 2"]
    model.assert_consumed()


async def test_compact_now_refuses_while_running() -> None:
    """compact_now while a turn runs is a clear error, and changes nothing."""
    from dsh_compaction import CompactionBusyError

    entered = anyio.Event()
    release = anyio.Event()

    @tool
    async def wait_here() -> str:
        """Block until released."""
        entered.set()
        await release.wait()
        return "released"

    model = ScriptedModel([ScriptedModel.tool_call("wait_here"), "done"], context_window=1000)
    async with running(model) as ctx:
        ctx.tools.register(wait_here)
        async with await ctx.agents.create("a", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.send("go")
            with anyio.fail_after(10):
                await entered.wait()
                with pytest.raises(CompactionBusyError, match="only while it is idle"):
                    await ctx.compaction.compact_now(agent)
                release.set()
                await agent.when_idle()
            assert compactions(agent.session.events) == []
    model.assert_consumed()


async def test_compact_now_reports_a_failed_summary() -> None:
    """A manual compaction whose summary fails raises CompactionFailedError; the log is untouched."""
    from dsh_compaction import CompactionFailedError

    model = ScriptedModel(["ok 1", ScriptedModel.failure("SERVER", "down")], context_window=1000)
    async with running(model) as ctx, await ctx.agents.create("a", agent_options=MODEL) as handle:
        await handle.agent.run("prompt 1")
        length = len(handle.agent.session.events)
        with pytest.raises(CompactionFailedError) as caught:
            await ctx.compaction.compact_now(handle.agent)
        assert len(handle.agent.session.events) == length
    assert caught.value.failure.code == "SERVER"


async def test_an_agent_without_a_model_is_left_alone() -> None:
    """No model to measure with: compaction stands aside (the loop reports the missing model)."""
    from dsh_compaction import CompactionError

    model = ScriptedModel([], context_window=1000)
    async with running(model) as ctx, await ctx.agents.create("a", agent_options=AgentOptions()) as handle:
        outcome = await handle.agent.run("hi")
        with pytest.raises(CompactionError, match="no model"):
            await ctx.compaction.measure(handle.agent)
    assert outcome.kind == "error"
    assert "no model" in outcome.reason["failure"]["message"]


def test_user_message_source_is_compaction() -> None:
    """The summary's source is exactly ``{"kind": "compaction"}`` (SPEC §3)."""
    from dsh_compaction._summarise import summary_message

    assert summary_message("s").source == {"kind": "compaction"}
    assert isinstance(summary_message("s"), UserMessage)


async def test_summaries_written_by_the_configured_model() -> None:
    """``model`` in the table picks who writes the summary; the event names it."""
    model = ScriptedModel(["ok 1", "ok 2", summary_reply(), "ok 3"], context_window=1000)
    async with (
        running(model, {**SMALL, "model": "scripted/summariser"}) as ctx,
        await ctx.agents.create("a", agent_options=MODEL) as handle,
    ):
        for number in (1, 2, 3):
            await handle.agent.run(f"prompt {number} {PROMPT}")
        [facts] = compactions(handle.agent.session.events)
    assert model.requests[2].model == "summariser"
    assert facts["model"] == "scripted/summariser"


async def test_an_unknown_summary_model_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """A summary model no adapter serves fails the compaction loudly, and the turn goes on."""
    model = ScriptedModel(["ok 1", "ok 2", "ok 3"], context_window=1000)
    async with (
        running(model, {**SMALL, "model": "nobody/small"}) as ctx,
        await ctx.agents.create("a", agent_options=MODEL) as handle,
    ):
        for number in (1, 2):
            await handle.agent.run(f"prompt {number} {PROMPT}")
        with caplog.at_level(logging.WARNING, logger="dsh.compaction"):
            outcome = await handle.agent.run(f"prompt 3 {PROMPT}")
    assert outcome.text == "ok 3"
    assert any("plugins.compaction.model" in record.getMessage() for record in caplog.records)
    model.assert_consumed()
