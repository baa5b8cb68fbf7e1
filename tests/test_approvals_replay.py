"""Replay re-applies recorded approvals (SPEC §9.8, §10.1): approved, edited, denied, always and cancelled calls
replay with no divergence, and a changed answer shows where it changed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dsh_core import AgentOptions, Ask, Context, Harness, SessionEvent, ToolExecution, hookimpl, tool
from dsh_core.testing import ScriptedModel, assert_replay_matches, replay_session

pytestmark = pytest.mark.anyio

MODEL = AgentOptions(model="scripted/test")


class Asking:
    """Every call asks first; the recording and the replay load the same plugin."""

    name = "asking"

    def __init__(self) -> None:
        self.requested: list[str] = []
        self.changed = anyio.Event()

    def start(self, ctx: Context) -> None:
        @tool
        def write(text: str) -> str:
            """Write text."""
            return f"wrote {text}"

        @tool
        def erase(text: str) -> str:
            """Erase text."""
            return f"erased {text}"

        ctx.tools.register(write)
        ctx.tools.register(erase)

    @hookimpl
    def dsh_tools_pre_execute(self, execution: ToolExecution) -> Ask:
        return Ask(f"{execution.name} needs a yes")

    @hookimpl
    def dsh_session_event(self, session: Any, event: Any) -> None:
        if event.type == "approval/requested":
            self.requested.append(event.data["call_id"])
            self.changed.set()

    async def next_request(self) -> str:
        while not self.requested:
            self.changed = anyio.Event()
            await self.changed.wait()
        return self.requested.pop(0)


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedModel.tool_call("write", {"text": "a"}, text="One."),
            ScriptedModel.tool_call("write", {"text": "b"}),
            ScriptedModel.tool_call("write", {"text": "c"}),
            ScriptedModel.text("Three done."),
            ScriptedModel.tool_call("write", {"text": "d"}),
            ScriptedModel.tool_call("write", {"text": "e"}),
            ScriptedModel.text("Two more."),
            ScriptedModel.tool_call("erase", {"text": "f"}),
        ]
    )


async def record() -> list[SessionEvent]:
    """A session whose calls were approved once, edited, denied with words, always, then one cancelled."""
    asking = Asking()
    async with Harness(plugins=[asking], autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", script())
        async with await ctx.agents.create("recorded", agent_options=MODEL) as handle:
            agent = handle.agent
            agent.send("write three")
            await agent.resolve_approval(await asking.next_request(), "once", by="cli")
            await agent.resolve_approval(await asking.next_request(), "once", arguments={"text": "B!"}, by="serve")
            await agent.resolve_approval(await asking.next_request(), "deny", reason="not c", by="api")
            await agent.when_idle()
            agent.send("write two")
            await agent.resolve_approval(await asking.next_request(), "always", by="policy")  # e runs unasked
            await agent.when_idle()
            agent.send("erase f")  # another tool: "always" was for write only
            await asking.next_request()
            agent.cancel()
            await agent.when_idle()
            return list(agent.session.events)


async def test_a_session_with_approved_edited_denied_always_and_cancelled_calls_replays_identically() -> None:
    recorded = await record()
    decisions = [(e.data["decision"], e.data["by"]) for e in recorded if e.type == "approval/resolved"]
    assert decisions == [
        ("once", "cli"),
        ("once", "serve"),
        ("deny", "api"),
        ("always", "policy"),
        ("cancelled", "cancel"),
    ]
    results = [e.data for e in recorded if e.type == "tool/result"]
    assert [r["message"]["content"][0]["text"] for r in results][:2] == ["wrote a", "wrote B!"]
    assert [r.get("error_code") for r in results] == [None, None, "DENIED", None, None, "ABORTED"]
    report = await replay_session(recorded, plugins=[Asking()])
    assert_replay_matches(report)


async def test_a_replay_whose_answer_differs_diverges_at_the_result() -> None:
    recorded = await record()
    # the same recording, but the first call was denied: the replay answers as recorded, so a changed
    # record (edited by hand) shows at that call's result
    changed = []
    for event in recorded:
        data = event.data
        if event.type == "approval/resolved" and data["call_id"] == "call_1":
            event = SessionEvent(event.type, event.seq, event.time, {**data, "decision": "deny"})
        changed.append(event)
    report = await replay_session(changed, plugins=[Asking()])
    assert report.diverged
    found = report.first_divergence
    assert found is not None
    assert found.expected is not None
    assert found.expected.type == "tool/result"
