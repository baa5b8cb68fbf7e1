"""The permissions plugin: its front, entry point, configuration errors, and real agents under it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dsh_permissions
import importlib_metadata
import pytest
from dsh_permissions import PermissionsPlugin

from dsh_core import AgentOptions, ConfigError, Harness
from dsh_core.testing import ScriptedModel

from .conftest import Start
from .permissions_kit import Approval, ApprovalPlugin

pytestmark = pytest.mark.anyio

MODEL = AgentOptions(model="scripted/x")


def test_front_is_exact() -> None:
    """The package exports exactly its documented names."""
    assert dsh_permissions.__all__ == sorted(dsh_permissions.__all__)
    assert set(dsh_permissions.__all__) == {
        name for name in vars(dsh_permissions) if not name.startswith("_")
    }


def test_entry_point_is_registered() -> None:
    """The distribution registers `permissions` in the `dsh` entry-point group."""
    [entry] = [ep for ep in importlib_metadata.entry_points(group="dsh") if ep.name == "permissions"]
    assert entry.load() is PermissionsPlugin
    assert entry.dist is not None
    assert entry.dist.name == "dsh-harness-permissions"


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ({"mode": "plan"}, r"plugins\.permissions\.mode"),
        ({"sandbox": "maybe"}, r"plugins\.permissions\.sandbox"),
        ({"rules": [{"tool": "bash", "action": "perhaps"}]}, r"plugins\.permissions\.rules\[0\]\.action"),
        ({"rules": [{"tool": "bash"}]}, r"plugins\.permissions\.rules\[0\]\.action"),
        (
            {"rules": [{"tool": "bash(x)", "pattern": "y", "action": "deny"}]},
            r"rules\[0\]: the pattern is given twice",
        ),
        ({"modes": "read-only"}, "modes"),
    ],
)
async def test_bad_config_is_refused(table: dict[str, Any], problem: str) -> None:
    """Unknown modes, actions and keys, and malformed rules fail at start-up naming where."""
    with pytest.raises(ConfigError, match=problem):
        async with Harness(
            config={"plugins": {"permissions": table}}, plugins=[PermissionsPlugin], autoload=False
        ):
            pass


async def test_plan_mode_through_the_agent_loop(start: Start, ws: Path) -> None:
    """An agent in plan mode gets DENIED for a write through the loop; switched back, the write succeeds."""
    write = ScriptedModel.tool_call("write_file", {"path": "plan.md", "content": "step 1\n"})
    model = ScriptedModel([write, ScriptedModel.text("blocked"), write, ScriptedModel.text("written")])
    async with start() as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("a1", meta={"cwd": str(ws)}, agent_options=MODEL) as handle:
            ctx.permissions.set_mode("a1", "read-only")
            first = await handle.agent.run("write the plan")
            assert not (ws / "plan.md").exists()
            ctx.permissions.set_mode("a1", None)
            second = await handle.agent.run("now write it")
            events = list(handle.agent.session.events)
    assert (first.kind, second.kind) == ("completed", "completed")
    assert (ws / "plan.md").read_text() == "step 1\n"
    results = [event.data for event in events if event.type == "tool/result"]
    assert [data.get("error_code") for data in results] == ["DENIED", None]
    assert "the permission mode is read-only" in results[0]["message"]["content"][0]["text"]
    assert [event.data for event in events if event.type == "permissions/mode"] == [
        {"mode": "read-only"},
        {"mode": None},
    ]
    notices = [event.data["message"] for event in events if event.type == "context/message"]
    assert [notice["source"] for notice in notices] == [{"kind": "plugin", "plugin": "permissions"}] * 2
    assert notices[0]["content"][0]["text"].startswith("Permission mode is now read-only (plan mode)")
    assert notices[1]["content"][0]["text"].startswith("Permission mode is now workspace-write")
    first_request = [message.text for message in model.requests[0].messages]
    assert any(text.startswith("Permission mode is now read-only") for text in first_request)
    model.assert_consumed()


async def test_plan_mode_is_inherited_by_a_fork(start: Start, ws: Path) -> None:
    """A session seeded from one in plan mode starts in plan mode too (the mode is in its log)."""
    model = ScriptedModel([ScriptedModel.tool_call("bash", {"command": "touch x"}), ScriptedModel.text("no")])
    async with start(sandbox="off") as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("parent", meta={"cwd": str(ws)}, agent_options=MODEL) as parent:
            ctx.permissions.set_mode("parent", "read-only")
            seed = list(parent.agent.session.events)
        meta = {"cwd": str(ws)}
        async with await ctx.agents.create("child", meta=meta, seed=seed, agent_options=MODEL) as child:
            await child.agent.run("try to touch x")
            results = [event.data for event in child.agent.session.events if event.type == "tool/result"]
            assert ctx.permissions.mode_for("child") == "read-only"
        assert ctx.permissions.mode_for("child") == "workspace-write"  # forgotten once disposed
    assert results[0]["error_code"] == "DENIED"
    assert not (ws / "x").exists()


async def test_approval_through_the_agent_loop(start: Start, ws: Path) -> None:
    """An ask rule sends the loop's call to the approval service; approved, the command runs."""
    channel = Approval(True)
    model = ScriptedModel(
        [ScriptedModel.tool_call("bash", {"command": "echo deployed > out.txt"}), ScriptedModel.text("done")]
    )
    rules = [{"tool": "bash(echo *)", "action": "ask"}]
    async with start([ApprovalPlugin(channel)], rules=rules, sandbox="off") as ctx:
        ctx.llm.register_adapter("scripted", model)
        async with await ctx.agents.create("a1", meta={"cwd": str(ws)}, agent_options=MODEL) as handle:
            outcome = await handle.agent.run("deploy")
    assert outcome.kind == "completed"
    assert (ws / "out.txt").read_text() == "deployed\n"
    assert len(channel.asked) == 1
