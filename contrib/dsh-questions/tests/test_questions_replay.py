"""A recorded session that spilled an output and asked questions replays without divergence (SPEC §9.8, §10.6).

The session is recorded for real: the spill and questions plugins, the JSONL store on disk, the
questions answered through the API and by a question service, one cancelled. The replay reads the
stored file and re-runs it in recorded mode with the same plugins.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from dsh_persistence_jsonl import PersistencePlugin
from dsh_questions import QuestionsPlugin
from dsh_spill import SpillPlugin

from dsh_core import AgentOptions, Harness, SessionEvent, ToolExecution, hookimpl, tool
from dsh_core.testing import ScriptedModel, assert_replay_matches, replay_session

pytestmark = pytest.mark.anyio

MODEL = AgentOptions(model="scripted/x")
QUESTIONS = [
    {"id": "db", "question": "Which database?", "options": ["sqlite", "postgres"]},
    {"id": "extras", "question": "Which extras?", "options": ["cache", "search"], "multi_select": True},
]
#: over spill's 32 KiB: stored with the session, a preview in the result
BIG = "".join(f"line {n}: {'x' * 60}\n" for n in range(800))


@tool
def build_log() -> str:
    """Print the build log."""
    return BIG


class Tools:
    name = "replay-tools"

    def start(self, ctx: Any) -> None:
        ctx.tools.register(build_log)


class AskedWatch:
    """Root-scoped listener: ``asked`` is set each time a ``question/asked`` is appended."""

    name = "asked-watch"

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.changed = anyio.Event()

    @hookimpl
    def dsh_session_event(self, event: Any) -> None:
        if event.type == "question/asked":
            self.asked.append(event.data["call_id"])
            self.changed.set()

    async def next_question(self) -> str:
        with anyio.fail_after(10):
            while not self.asked:
                self.changed = anyio.Event()
                await self.changed.wait()
        return self.asked.pop(0)


class Channel:
    """A question service answering the third question itself (like the CLI's chooser)."""

    name = "channel"
    provides = ("question",)
    question_by = "cli"

    def start(self, ctx: Any) -> None:
        ctx.provide("question", self)

    async def ask(self, execution: ToolExecution, question: Any) -> Mapping[str, Any] | None:
        if execution.call_id != "call_4":
            await anyio.sleep_forever()  # the API answers these (or the cancel closes them)
        return {"db": "sqlite", "extras": []}


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedModel.tool_call("build_log", {}, text="Reading the log."),
            ScriptedModel.tool_call("ask_user", {"questions": QUESTIONS}),
            ScriptedModel.text("Postgres with cache and search."),
            ScriptedModel.tool_call("ask_user", {"questions": QUESTIONS[:1]}),
            ScriptedModel.tool_call("ask_user", {"questions": QUESTIONS}),
            ScriptedModel.text("Sqlite, no extras."),
        ]
    )


async def record(root: Path) -> list[SessionEvent]:
    watch = AskedWatch()
    config = {"plugins": {"persistence-jsonl": {"root": str(root)}}}
    plugins = [PersistencePlugin(), SpillPlugin(), QuestionsPlugin(), Tools(), Channel(), watch]
    async with Harness(config=config, plugins=plugins, autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", script())
        async with await ctx.agents.create("recorded", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.send("set up the service")
            asked = await watch.next_question()
            await agent.answer_question(asked, {"db": "postgres", "extras": ["cache", "search"]}, by="api")
            await agent.when_idle()
            agent.send("and the second one")
            await watch.next_question()
            agent.cancel()  # the question is closed {} by cancel, the turn aborted
            await agent.when_idle()
            agent.send("try again")  # the channel answers this one
            await agent.when_idle()
            return list(agent.session.events)


async def test_a_recorded_session_with_spill_and_questions_replays_identically(tmp_path: Path) -> None:
    recorded = await record(tmp_path / "sessions")
    types = [event.type for event in recorded]
    assert types.count("spill/stored") == 1
    answered = [(e.data["by"], dict(e.data["answers"])) for e in recorded if e.type == "question/answered"]
    assert [by for by, _ in answered] == ["api", "cancel", "cli"]
    assert answered[1][1] == {}
    stored = tmp_path / "sessions" / "recorded"
    report = await replay_session(
        stored, plugins=[SpillPlugin(), QuestionsPlugin(), Tools()], session_id="recorded"
    )
    assert_replay_matches(report)
    assert report.problems == ()
    replayed = [event.type for event in report.log]
    assert replayed.count("spill/stored") == 1
    assert replayed.count("question/asked") == 3
    spill = next(event for event in report.log if event.type == "spill/stored")
    assert spill.data["text"] == BIG, "the spill plugin stored the whole output again"


async def test_a_replay_whose_answer_differs_diverges_at_it(tmp_path: Path) -> None:
    """The replay answers as recorded: a record changed by hand shows where it changed."""
    recorded = await record(tmp_path / "sessions")
    changed = []
    for event in recorded:
        if event.type == "question/answered" and event.data["by"] == "api":
            event = SessionEvent(event.type, event.seq, event.time, {**event.data, "answers": {"db": "sqlite", "extras": []}})
        changed.append(event)
    report = await replay_session(changed, plugins=[SpillPlugin(), QuestionsPlugin(), Tools()], session_id="recorded")
    assert report.diverged
    found = report.first_divergence
    assert found is not None
    assert found.expected is not None
    assert found.expected.type == "tool/result"
