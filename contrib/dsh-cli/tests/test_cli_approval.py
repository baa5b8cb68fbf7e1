"""The ``cli`` plugin and its approval service, and ``dsh run``'s output listener, in process (asyncio and trio)."""

from __future__ import annotations

import io
from typing import Any

import anyio
import pytest
from dsh_cli import CliPlugin
from dsh_cli._approval import (
    Answer,
    Choice,
    RefusingPrompter,
    SessionApproval,
    TerminalPrompter,
    closing_words,
    parse_answer,
    parse_choice,
)
from dsh_cli._run import RunOutput
from rich.console import Console

from dsh_core import AgentOptions, ApprovalAnswer, Ask, Deny, Harness, ToolExecution, hookimpl, tool
from dsh_core.session_log import ApprovalResolvedEvent
from dsh_core.testing import ScriptedModel

pytestmark = pytest.mark.anyio


class Scripted:
    """A prompter that answers from a list and records what it was asked."""

    def __init__(self, *answers: Choice | Answer) -> None:
        self.answers = [a if isinstance(a, Answer) else Answer(a) for a in answers]
        self.asked: list[str] = []

    async def ask(self, execution: ToolExecution, reason: str) -> Answer:
        self.asked.append(execution.name)
        return self.answers.pop(0)


def _execution(name: str, session: str = "s1") -> ToolExecution:
    return ToolExecution(call_id="c", name=name, arguments="{}", session_id=session)


async def test_answers_become_records_by_cli() -> None:
    """Each answer is what the tool runtime logs as ``approval/resolved`` by ``cli`` ("always" is kept by the log)."""
    prompter = Scripted("always", "once", "deny")
    approval = SessionApproval(prompter)
    assert approval.approval_by == "cli"
    assert await approval.approve(_execution("bash"), "why") == ApprovalAnswer("always")
    assert await approval.approve(_execution("bash"), "why") == ApprovalAnswer("once")
    assert await approval.approve(_execution("write_file"), "why") == ApprovalAnswer("deny")
    assert prompter.asked == ["bash", "bash", "write_file"]


async def test_a_denial_carries_the_users_reason_or_says_nobody_was_asked() -> None:
    """`no, REASON` reaches the model as the user's words; with no terminal the model is told nobody was asked."""
    approval = SessionApproval(Scripted(Answer("deny", reason="run the tests first")))
    denied = await approval.approve(_execution("bash"), "bash needs approval")
    assert denied == ApprovalAnswer("deny", reason="run the tests first")
    stream = io.StringIO()
    unasked = await SessionApproval(RefusingPrompter(stream)).approve(_execution("bash"), "rule says ask")
    assert isinstance(unasked, Deny)
    assert "nobody could be asked" in unasked.reason
    assert "rejected" not in unasked.reason
    assert "--mode" not in stream.getvalue(), "no mode allows what an ask rule covers"
    assert 'action = "allow"' in stream.getvalue()


class Waiting:
    """A prompter whose question stays open until cancelled; records how it was closed."""

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.closed_with: list[str] = []

    async def ask(self, execution: ToolExecution, reason: str) -> Answer:
        self.asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    def closed(self, execution: ToolExecution, resolved: Any) -> None:
        self.closed_with.append(closing_words(resolved))


class AskEveryCall:
    name = "ask-every-call"

    @hookimpl
    def dsh_tools_pre_execute(self, execution: ToolExecution) -> Ask:
        return Ask("needs a yes")


async def test_the_question_closes_saying_who_answered_when_another_answerer_wins() -> None:
    """The prompt races the API: a server's answer lands first, the question closes and says so."""

    @tool
    def touch(name: str) -> str:
        """Touch a file."""
        return "touched"

    prompter = Waiting()
    model = ScriptedModel([ScriptedModel.tool_call("touch", {"name": "a"}), ScriptedModel.text("done")])
    async with Harness(plugins=[CliPlugin(SessionApproval(prompter)), AskEveryCall()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        ctx.tools.register(touch)
        async with await ctx.agents.create("s1", agent_options=AgentOptions(model="scripted/test")) as handle:
            agent = handle.agent
            agent.send("touch a")
            await prompter.asked.wait()
            await agent.resolve_approval("call_1", "deny", reason="not that one", by="serve")
            await agent.when_idle()
    assert prompter.closed_with == ["answered by serve: denied (not that one)"]
    stream = io.StringIO()
    resolved = ApprovalResolvedEvent(call_id="c", decision="once", by="serve")
    TerminalPrompter(stream=stream).closed(_execution("bash"), resolved)
    assert stream.getvalue() == "\n  answered by serve: allowed once\n"


def test_parse_answer() -> None:
    """A typed answer is a whole word, or no/deny with a reason; a word that merely starts like one is not."""
    assert parse_answer("no, run the tests first") == Answer("deny", reason="run the tests first")
    assert parse_answer("deny: use pytest -x") == Answer("deny", reason="use pytest -x")
    assert parse_answer("Always") == Answer("always")
    for text in ("maybe", "mbe", "yes please", "nope", "anything"):
        assert parse_answer(text) is None, text


def test_parse_choice() -> None:
    """Answers are read leniently; anything else is no answer."""
    assert [parse_choice(a) for a in ("y", "Once", "a", "ALWAYS", "n", "deny", "", "maybe")] == [
        "once",
        "once",
        "always",
        "always",
        "deny",
        "deny",
        None,
        None,
    ]


async def test_the_plugin_provides_approval_only_when_given_a_channel() -> None:
    """Discovered (no channel) the plugin is inert; the command's instance provides ctx.approval."""
    async with Harness(autoload=False, plugins=[CliPlugin()]) as ctx:
        assert ctx.get_service("approval") is None
    approval = SessionApproval(Scripted())
    async with Harness(autoload=False, plugins=[CliPlugin(approval)]) as ctx:
        assert ctx.get_service("approval") is approval


async def test_run_output_streams_text_and_summarises_tools() -> None:
    """RunOutput writes the answer's text to stdout and one line per tool call and result to stderr."""

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    model = ScriptedModel(
        [
            ScriptedModel.tool_call("lookup", {"key": "k"}, text="Checking.", chunks=3),
            ScriptedModel.text("Done.", chunks=2),
        ]
    )
    out, err = io.StringIO(), io.StringIO()
    output = RunOutput(out=out, err=Console(file=err, width=100, color_system=None), json_lines=False)
    async with Harness(autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        ctx.tools.register(lookup)
        handle = await ctx.agents.create(
            "run",
            agent_options=AgentOptions(model="scripted/x"),
            setup=lambda c: c.register_plugin(output) and None,
        )
        async with handle:
            outcome = await handle.agent.run("go")
    output.finish()
    assert outcome.kind == "completed"
    assert out.getvalue() == "Checking.\nDone.\n"
    assert err.getvalue().splitlines() == ['⏺ lookup(key="k")', "  ⎿ value of k"]
    assert output.reason == {"kind": "completed"}


def test_the_spinner_stays_off_an_open_question() -> None:
    """The run's spinner draws while waiting, is cleared for an approval question and does not draw over it."""
    out, err = io.StringIO(), io.StringIO()
    output = RunOutput(
        out=out, err=Console(file=err, width=100, color_system=None), json_lines=False, spinner=True
    )
    output.tick()
    assert "waiting for the model" in err.getvalue()
    output.pause_for_question()
    assert err.getvalue().endswith("\r\x1b[K"), "the spinner line is cleared before the question"
    drawn = err.getvalue()
    output.tick()
    assert err.getvalue() == drawn, "nothing is drawn while the question is open"
    output.asking = False
    output.tick()
    assert err.getvalue() != drawn


async def test_sessions_show_prints_each_approval_and_who_answered() -> None:
    """The transcript ``dsh sessions show`` prints has the question, the decision, who answered and an edit."""
    from dsh_cli._sessions import print_history

    @tool
    def touch(name: str) -> str:
        """Touch a file."""
        return "touched"

    model = ScriptedModel(
        [
            ScriptedModel.tool_call("touch", {"name": "a"}),
            ScriptedModel.tool_call("touch", {"name": "b"}),
            ScriptedModel.text("done"),
        ]
    )
    prompter = Waiting()
    async with Harness(plugins=[CliPlugin(SessionApproval(prompter)), AskEveryCall()], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        ctx.tools.register(touch)
        async with await ctx.agents.create("s1", agent_options=AgentOptions(model="scripted/test")) as handle:
            agent = handle.agent
            agent.send("touch two")
            await prompter.asked.wait()
            prompter.asked = anyio.Event()
            await agent.resolve_approval("call_1", "once", arguments={"name": "c"}, by="serve")
            await prompter.asked.wait()
            await agent.resolve_approval("call_2", "deny", reason="enough files", by="api")
            await agent.when_idle()
            events = list(agent.session.events)
    console = Console(record=True, width=120, force_terminal=False)
    print_history(console, events)
    shown = console.export_text()
    assert shown.count("approval asked: needs a yes") == 2
    assert "allowed once by serve (arguments edited)" in shown
    assert "denied by api: enough files" in shown
