"""replay_session: a recorded session re-runs identically, and each kind of change shows at its seq."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh_core import (
    AgentOptions,
    Allow,
    Block,
    Harness,
    SessionEvent,
    ToolExecution,
    hookimpl,
    tool,
)
from dsh_core.testing import (
    ReplayReport,
    ScriptedModel,
    assert_replay_matches,
    replay_session,
)

pytestmark = pytest.mark.anyio

MODEL = AgentOptions(model="scripted/test")


def lookup_tool(answers: dict[str, str]) -> Any:
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return answers.get(key, "unknown")

    return lookup


class ToolsPlugin:
    """Registers the tools given (the same in the recording and the replay, unless a test changes them)."""

    name = "test-tools"

    def __init__(self, *tools: Any) -> None:
        self.tools = tools

    def start(self, ctx: Any) -> None:
        for item in self.tools:
            ctx.tools.register(item)


def two_turn_model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedModel.tool_call("lookup", {"key": "colour"}, text="Let me look.", chunks=3),
            ScriptedModel.text("The colour is blue.", chunks=4),
            ScriptedModel.text("You are welcome.", chunks=2),
        ]
    )


async def record(model: ScriptedModel, plugins: Sequence[Any], prompts: Sequence[str], **options: Any) -> tuple[SessionEvent, ...]:
    """Run ``prompts`` as turns of one session; the log is the recording."""
    async with Harness(plugins=list(plugins), autoload=False, **options) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("s1", agent_options=MODEL) as handle:
            for prompt in prompts:
                await handle.agent.run(prompt)
            return tuple(handle.agent.session.events)


async def recorded_two_turns() -> tuple[SessionEvent, ...]:
    tools = ToolsPlugin(lookup_tool({"colour": "blue"}))
    return await record(two_turn_model(), [tools], ["What colour?", "Thanks"])


async def test_a_two_turn_tool_session_replays_identically() -> None:
    events = await recorded_two_turns()
    report = await replay_session(events, plugins=[ToolsPlugin(lookup_tool({"colour": "blue"}))])
    assert_replay_matches(report)
    assert not report.diverged
    assert report.first_divergence is None
    assert [e.type for e in report.log] == [e.type for e in events]
    assert report.problems == ()
    # fresh ids are new in the replay, and renamed consistently
    assert report.log[2].data["message"]["id"] != events[2].data["message"]["id"]


async def test_live_tools_report_a_changed_result_at_its_seq() -> None:
    events = await recorded_two_turns()
    recorded_result = next(e for e in events if e.type == "tool/result")
    report = await replay_session(
        events, plugins=[ToolsPlugin(lookup_tool({"colour": "green"}))], tools="live"
    )
    assert report.diverged
    found = report.first_divergence
    assert found is not None
    assert found.seq == recorded_result.seq
    assert found.path == "data.message.content[0].text"
    assert "blue" in found.describe()
    assert "green" in found.describe()
    assert found.describe().startswith(f"seq {found.seq}: tool/result: data.message.content[0].text differs")


async def test_recorded_tools_ignore_a_changed_tool_body() -> None:
    events = await recorded_two_turns()
    report = await replay_session(events, plugins=[ToolsPlugin(lookup_tool({"colour": "green"}))])
    assert_replay_matches(report)


class Blocker:
    name = "blocker"

    @hookimpl
    def dsh_agent_prompt_submit(self, message: Any) -> Any:
        return Block("no thanks") if "Thanks" in message.text else None


class AddsContext:
    name = "adds-context"

    @hookimpl
    def dsh_agent_prompt_submit(self) -> Any:
        return Allow(additional_context=("the user is in a hurry",))


class Persona:
    name = "persona"
    requires = ("system_prompt",)

    def start(self, ctx: Any) -> None:
        ctx.system_prompt.section("persona", "Answer in French.")


def first_seq(events: Sequence[SessionEvent], kind: str, after: int = -1) -> int:
    return next(e.seq for e in events if e.type == kind and e.seq > after)


async def test_a_plugin_that_blocks_a_prompt_diverges_at_the_prompt() -> None:
    events = await recorded_two_turns()
    second_turn = first_seq(events, "turn/start", after=first_seq(events, "turn/end"))
    report = await replay_session(events, plugins=[ToolsPlugin(lookup_tool({"colour": "blue"})), Blocker()])
    found = report.first_divergence
    assert found is not None
    assert found.seq == second_turn + 1  # user/message, now prompt/blocked
    assert found.expected is not None
    assert found.expected.type == "user/message"
    assert found.actual is not None
    assert found.actual.type == "prompt/blocked"
    assert found.path == "type"
    assert "user/message (recorded) != prompt/blocked (replayed)" in found.describe()


async def test_a_plugin_that_adds_context_diverges_after_the_prompt() -> None:
    events = await recorded_two_turns()
    report = await replay_session(events, plugins=[ToolsPlugin(lookup_tool({"colour": "blue"})), AddsContext()])
    found = report.first_divergence
    assert found is not None
    assert found.seq == 3
    assert found.expected is not None
    assert found.expected.type == "step/start"
    assert found.actual is not None
    assert found.actual.type == "context/message"


async def test_a_changed_system_prompt_diverges_at_the_request_header() -> None:
    events = await recorded_two_turns()
    header = first_seq(events, "request/header")
    report = await replay_session(events, plugins=[ToolsPlugin(lookup_tool({"colour": "blue"})), Persona()])
    found = report.first_divergence
    assert found is not None
    assert found.seq == header
    assert found.path == "data.system"
    assert "Answer in French." in str(found.actual_value)


async def test_a_changed_tool_schema_diverges_at_the_request_header() -> None:
    events = await recorded_two_turns()

    @tool
    def lookup(key: str, exact: bool = False) -> str:
        """Look a key up."""
        return "blue"

    report = await replay_session(events, plugins=[ToolsPlugin(lookup)])
    found = report.first_divergence
    assert found is not None
    assert found.seq == first_seq(events, "request/header")
    assert found.path.startswith("data.tools[0]")


async def test_asking_the_model_for_more_than_was_recorded_fails_clearly() -> None:
    events = await recorded_two_turns()
    cut = events[: first_seq(events, "turn/end") + 1]  # the first turn only ...
    shortened = [e for e in cut]
    # ... but a continuation plugin asks for one more step
    from dsh_core import ContinuationDecision

    class OneMore:
        name = "one-more"

        @hookimpl
        def dsh_agent_turn_continuation(self, step: int) -> Any:
            return ContinuationDecision("continue", reason="check again") if step == 2 else None

    report = await replay_session(shortened, plugins=[ToolsPlugin(lookup_tool({"colour": "blue"})), OneMore()])
    assert report.diverged
    assert any("does not have" in problem for problem in report.problems)
    error_end = next(e for e in report.log if e.type == "turn/end")
    assert error_end.data["reason"]["kind"] == "error"
    assert "recording does not have" in error_end.data["reason"]["failure"]["message"]


async def test_the_assertion_helper_prints_a_readable_diff() -> None:
    events = await recorded_two_turns()
    report = await replay_session(events, plugins=[ToolsPlugin(lookup_tool({"colour": "blue"})), Persona()])
    with pytest.raises(AssertionError) as caught:
        assert_replay_matches(report)
    text = str(caught.value)
    assert "the replay diverged" in text
    assert "recorded:" in text
    assert "replayed:" in text
    assert "> " in text
    assert "request/header" in text


def test_ids_are_compared_up_to_one_consistent_renaming() -> None:
    from dsh_core.testing._replay_compare import first_divergence

    a, b, c = "a" * 32, "b" * 32, "c" * 32
    recorded = [SessionEvent("x/y", 0, 0.0, {"id": a}), SessionEvent("x/y", 1, 0.0, {"id": a, "other": b})]
    same = [SessionEvent("x/y", 0, 1.0, {"id": c}), SessionEvent("x/y", 1, 1.0, {"id": c, "other": a})]
    assert first_divergence(recorded, same) is None
    split = [SessionEvent("x/y", 0, 1.0, {"id": c}), SessionEvent("x/y", 1, 1.0, {"id": b, "other": a})]
    found = first_divergence(recorded, split)
    assert found is not None
    assert (found.seq, found.path) == (1, "data.id")
    merged = [SessionEvent("x/y", 0, 1.0, {"id": c}), SessionEvent("x/y", 1, 1.0, {"id": c, "other": c})]
    found = first_divergence(recorded, merged)
    assert found is not None
    assert (found.seq, found.path) == (1, "data.other")
    not_ids = [SessionEvent("x/y", 0, 1.0, {"id": "plain"}), recorded[1]]
    found = first_divergence([SessionEvent("x/y", 0, 0.0, {"id": "other"}), recorded[1]], not_ids)
    assert found is not None
    assert found.path == "data.id"


def test_ids_inside_a_text_are_renamed_like_whole_ones() -> None:
    """A preview naming its locator matches when the locator pairs up and the rest is equal."""
    from dsh_core.testing._replay_compare import first_divergence

    a, b, c = "a" * 32, "b" * 32, "c" * 32
    recorded = [SessionEvent("x/y", 0, 0.0, {"id": a}), SessionEvent("x/y", 1, 0.0, {"text": f"see {a} here"})]
    renamed = [SessionEvent("x/y", 0, 1.0, {"id": b}), SessionEvent("x/y", 1, 1.0, {"text": f"see {b} here"})]
    assert first_divergence(recorded, renamed) is None
    other_id = [renamed[0], SessionEvent("x/y", 1, 1.0, {"text": f"see {c} here"})]
    found = first_divergence(recorded, other_id)
    assert found is not None
    assert (found.seq, found.path) == (1, "data.text")
    other_text = [renamed[0], SessionEvent("x/y", 1, 1.0, {"text": f"saw {b} here"})]
    found = first_divergence(recorded, other_text)
    assert found is not None
    assert (found.seq, found.path) == (1, "data.text")


def test_a_shorter_or_longer_replay_is_described() -> None:
    from dsh_core.testing._replay_compare import first_divergence

    one = [SessionEvent("turn/start", 0, 0.0, {"turn": 1})]
    found = first_divergence(one, [])
    assert found is not None
    assert found.actual is None
    assert found.describe() == "seq 0: the replay stopped short; the recording has turn/start here"
    found = first_divergence([], one)
    assert found is not None
    assert found.expected is None
    assert "past the end of the recording" in found.describe()


# ---------------------------------------------------------------------- steering, cancel, compaction, crashes


async def test_steering_during_a_tool_replays_at_its_seq() -> None:
    holder: dict[str, Any] = {}

    @tool
    async def slow(execution: ToolExecution) -> str:
        """Steered while it runs."""
        holder["agent"].steer("also mention the size")
        return "done"

    model = ScriptedModel(
        [ScriptedModel.tool_call("slow", {}), ScriptedModel.text("Done, and the size is 3.")]
    )
    async with Harness(plugins=[ToolsPlugin(slow)], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("s1", agent_options=MODEL) as handle:
            holder["agent"] = handle.agent
            await handle.agent.run("go")
            events = tuple(handle.agent.session.events)
    assert [e.data["kind"] for e in events if e.type == "inbox/queued"] == ["send", "steer"]
    assert any(e.type == "steering/message" for e in events)

    @tool
    async def slow_replayed(execution: ToolExecution) -> str:  # the body is never run in recorded mode
        """Steered while it runs."""
        raise AssertionError("recorded mode runs no tool body")

    replayed_tool = attrs_evolve_name(slow_replayed, "slow")
    report = await replay_session(events, plugins=[ToolsPlugin(replayed_tool)])
    assert_replay_matches(report)


def attrs_evolve_name(item: Any, name: str) -> Any:
    import attrs

    return attrs.evolve(item, name=name)


async def test_a_cancel_while_streaming_replays() -> None:
    model = ScriptedModel([ScriptedModel.hang("Half of an ans", chunks=3), ScriptedModel.text("Again.")])

    class CancelOnChunk:
        name = "cancel-on-chunk"

        def __init__(self) -> None:
            self.agent: Any = None
            self.chunks = 0

        @hookimpl
        def dsh_session_event(self, event: SessionEvent) -> None:
            if event.type == "assistant/chunk" and self.agent is not None:
                self.chunks += 1
                if self.chunks == 2:
                    self.agent.cancel()

    canceller = CancelOnChunk()
    async with Harness(plugins=[canceller], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("s1", agent_options=MODEL) as handle:
            canceller.agent = handle.agent
            first = await handle.agent.run("start")
            canceller.agent = None
            await handle.agent.run("again")
            events = tuple(handle.agent.session.events)
    assert first.kind == "aborted"
    assert any(e.type == "assistant/message" and e.data.get("interrupted") for e in events)
    report = await replay_session(events)
    assert_replay_matches(report)


async def test_a_cancel_during_a_tool_replays() -> None:
    holder: dict[str, Any] = {}

    @tool
    async def wait_forever() -> str:
        """Runs until cancelled."""
        holder["agent"].cancel()
        await anyio.sleep_forever()
        return "never"

    model = ScriptedModel([ScriptedModel.tool_call("wait_forever", {}), ScriptedModel.text("Next.")])
    async with Harness(plugins=[ToolsPlugin(wait_forever)], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("s1", agent_options=MODEL) as handle:
            holder["agent"] = handle.agent
            outcome = await handle.agent.run("go")
            await handle.agent.run("next")
            events = tuple(handle.agent.session.events)
    assert outcome.kind == "aborted"
    assert any(e.type == "tool/result" and e.data.get("error_code") == "ABORTED" for e in events)
    report = await replay_session(events, plugins=[ToolsPlugin(wait_forever)])
    assert_replay_matches(report)


async def test_a_session_with_compaction_replays() -> None:
    from dsh_compaction import CompactionPlugin

    summary = ScriptedModel.text("## Goals\nThe user sent long prompts.")
    model = ScriptedModel(["ok 1", "ok 2", summary, "ok 3"], context_window=1000)
    config = {"plugins": {"compaction": {"keep_recent_tokens": 150}}}
    prompt = "x" * 1200
    async with Harness(config=config, plugins=[CompactionPlugin], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("s1", agent_options=MODEL) as handle:
            for number in (1, 2, 3):
                await handle.agent.run(f"prompt {number} {prompt}")
            events = tuple(handle.agent.session.events)
    assert any(e.type == "compaction/summary" for e in events)
    report = await replay_session(
        events, plugins=[CompactionPlugin], config=config, model_info=model.model_info("test")
    )
    assert_replay_matches(report)
    # a different window changes when compaction runs: the replay shows where
    other = await replay_session(events, plugins=[CompactionPlugin], config=config)
    assert other.diverged


async def test_a_crashed_and_repaired_session_replays(tmp_path: Path) -> None:
    """A log cut inside a tool (as a SIGKILL leaves it), resumed with crash repair, then a new turn."""
    from dsh_persistence_jsonl import PersistencePlugin
    from dsh_persistence_jsonl._format import Header, encode_event, encode_header

    from dsh_core import SessionMeta

    started = anyio.Event()

    @tool
    async def deploy() -> str:
        """Never finishes in the recorded process."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    model = ScriptedModel([ScriptedModel.tool_call("deploy", {}, text="Deploying.")])
    async with Harness(plugins=[ToolsPlugin(deploy)], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        handle = await ctx.agents.create("s1", agent_options=MODEL)
        handle.agent.send("deploy it")
        await started.wait()
        before_crash = tuple(handle.agent.session.events)
        await handle.dispose()
    folder = tmp_path / "s1"
    folder.mkdir()
    meta = SessionMeta()
    with (folder / "session.jsonl").open("wb") as file:
        file.write(encode_header(Header(id="s1", created=0.0, meta=meta)))
        for event in before_crash:
            file.write(encode_event(event))
    config = {"plugins": {"persistence-jsonl": {"root": str(tmp_path), "batch_delay": 0.0}}}
    model = ScriptedModel([ScriptedModel.text("It may have deployed; I will check first.")])
    async with Harness(config=config, plugins=[ToolsPlugin(deploy), PersistencePlugin], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.resume("s1", agent_options=MODEL) as handle:
            await handle.agent.run("did it deploy?")
    recorded_path = folder / "session.jsonl"
    report = await replay_session(recorded_path, plugins=[ToolsPlugin(deploy)])
    assert_replay_matches(report)
    kinds = [e.data.get("error_code") for e in report.log if e.type == "tool/result"]
    assert kinds == ["TOOL_OUTCOME_UNKNOWN"]
    assert [e.data["reason"]["kind"] for e in report.log if e.type == "turn/end"] == ["interrupted", "completed"]


# ---------------------------------------------------------------------- recorded sessions of the demo

SESSIONS = Path(__file__).parent / "sessions"


def demo_plugins() -> list[Any]:
    from dsh_compaction import CompactionPlugin
    from dsh_permissions import PermissionsPlugin
    from dsh_retry import RetryPlugin
    from dsh_subagents import SubagentsPlugin
    from dsh_workspace import WorkspacePlugin

    return [WorkspacePlugin, PermissionsPlugin, SubagentsPlugin, CompactionPlugin, RetryPlugin]


DEMO_CONFIG = {"plugins": {"permissions": {"mode": "workspace-write", "rules": [{"tool": "bash", "action": "ask"}]}}}


@pytest.mark.parametrize("name", sorted(path.name for path in SESSIONS.glob("*.jsonl")))
async def test_recorded_demo_sessions_replay(name: str) -> None:
    report: ReplayReport = await replay_session(SESSIONS / name, plugins=demo_plugins(), config=DEMO_CONFIG)
    assert_replay_matches(report)
    assert len(report.log) > 100


async def test_a_demo_session_without_its_approval_rule_diverges_at_the_bash_call() -> None:
    path = SESSIONS / sorted(SESSIONS.glob("*.jsonl"))[0].name
    config = {"plugins": {"permissions": {"mode": "read-only"}}}
    report = await replay_session(path, plugins=demo_plugins(), config=config)
    found = report.first_divergence
    assert found is not None
    assert found.expected is not None
    assert found.expected.type in ("request/header", "tool/result")
