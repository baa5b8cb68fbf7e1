"""Rules through the real tool pipeline: allow / ask / deny x modes x approval, and guard monotonicity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from dsh_permissions import Mode

from dsh_core import Allow, Ask, Deny, ToolExecution, hookimpl

from .conftest import Start
from .permissions_kit import Approval, ApprovalPlugin, call, listing, text

pytestmark = pytest.mark.anyio

MODES: list[Mode] = ["read-only", "workspace-write", "full-access"]
RULES = {
    "allow": [{"tool": "write_file", "pattern": "notes/**", "action": "allow"}],
    "ask": [{"tool": "write_file", "pattern": "notes/**", "action": "ask"}],
    "deny": [{"tool": "write_file", "pattern": "notes/**", "action": "deny"}],
    "none": [],
}
APPROVALS: dict[str, bool | None] = {"no-approval": None, "approves": True, "rejects": False}


def expected(mode: Mode, rule: str, approval: bool | None) -> str:
    """What a write to notes/a.md comes to: 'written', or the words its denial must contain."""
    if rule == "deny":
        return "the permissions rule 'deny write_file(notes/**)' (plugins.permissions.rules[0]) forbids it"
    if rule == "ask":
        if approval is None:
            return "no approval channel"
        return "written" if approval else "the user rejected the call"
    if rule == "none" and mode == "read-only":
        return "the permission mode is read-only"
    return "written"


@pytest.mark.parametrize("approval", list(APPROVALS.values()), ids=list(APPROVALS))
@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("mode", MODES)
async def test_rule_matrix(start: Start, ws: Path, mode: Mode, rule: str, approval: bool | None) -> None:
    """Each rule action in each mode, with no approval channel, one that approves and one that rejects."""
    channel = Approval(approval) if approval is not None else None
    plugins = [ApprovalPlugin(channel)] if channel is not None else []
    async with start(plugins, mode=mode, rules=RULES[rule]) as ctx:
        result = await call(ctx, "write_file", ws, path="notes/a.md", content="hi\n")
    want = expected(mode, rule, approval)
    if want == "written":
        assert not result.is_error, text(result)
        assert (ws / "notes" / "a.md").read_text() == "hi\n"
    else:
        assert result.error_code == "DENIED"
        assert want in text(result)
        assert not (ws / "notes").exists()
    asked = channel.asked if channel is not None else []
    if rule == "ask" and channel is not None:
        assert asked == [
            (
                "write_file",
                "write_file 'notes/a.md' matches the permissions rule 'ask write_file(notes/**)', which asks first",
            )
        ]
    else:
        assert asked == []


async def test_ask_without_approval_is_denied_with_a_clear_message(start: Start, ws: Path) -> None:
    """With no approval service an ask is a denial that names the rule and the missing channel."""
    async with start(rules=[{"tool": "bash(git push*)", "action": "ask"}], sandbox="off") as ctx:
        result = await call(ctx, "bash", ws, command="git push origin main")
    assert result.error_code == "DENIED"
    assert text(result) == (
        "Error: the call to tool 'bash' was denied: bash 'git push origin main' matches the permissions rule "
        "'ask bash(git push*)', which asks first; it needs approval, but this harness has no approval channel "
        "(no 'approval' service). Do not repeat the same call; try another approach, or ask the user."
    )


async def test_calls_outside_the_rules_are_not_asked_about(start: Start, ws: Path) -> None:
    """Only the calls an ask rule matches go to the approval service."""
    channel = Approval(True)
    rules = [{"tool": "bash", "pattern": "git status*", "action": "allow"}, {"tool": "bash", "action": "ask"}]
    async with start([ApprovalPlugin(channel)], rules=rules, sandbox="off") as ctx:
        status = await call(ctx, "bash", ws, command="git status --short")
        other = await call(ctx, "bash", ws, command="echo hi")
    assert status.error_code is None
    assert text(other).startswith("hi\n")
    assert [name for name, _ in channel.asked] == ["bash"]
    assert "'echo hi'" in channel.asked[0][1]


class Overrider:
    """Another plugin's pre-execute listener that allows everything, running after permissions.

    Among ``trylast`` listeners the one registered last runs last; requiring ``permissions``
    makes this one start, and register, after it.
    """

    name = "overrider"
    requires = ("permissions",)

    def __init__(self) -> None:
        self.seen: list[object] = []

    @hookimpl(trylast=True)
    def dsh_tools_pre_execute(self, execution: ToolExecution, decision: Allow | Deny | Ask) -> Allow:
        self.seen.append(decision)
        return Allow()


@pytest.mark.parametrize(
    ("config", "call_args", "reason"),
    [
        (
            {"mode": "read-only"},
            ("write_file", {"path": "x", "content": "x"}),
            "the permission mode is read-only",
        ),
        (
            {"rules": [{"tool": "bash(rm *)", "action": "deny"}], "sandbox": "off"},
            ("bash", {"command": "rm -rf ./*"}),
            "'deny bash(rm *)'",
        ),
    ],
)
async def test_another_plugin_cannot_re_allow_a_denial(
    start: Start, ws: Path, config: dict[str, Any], call_args: tuple[str, dict[str, Any]], reason: str
) -> None:
    """A later pre-execute Allow overrides the permissions Deny, and the guard still denies the call."""
    (ws / "keep.txt").write_text("keep")
    overrider = Overrider()
    async with start([overrider], **config) as ctx:
        name, arguments = call_args
        result = await call(ctx, name, ws, **arguments)
    assert overrider.seen
    assert isinstance(overrider.seen[0], Deny)  # it ran after permissions and said Allow
    assert result.error_code == "DENIED"
    assert reason in text(result)
    assert await listing(ws) == ["keep.txt"]


async def test_another_plugins_denial_stands(start: Start, ws: Path) -> None:
    """Permissions never turns another plugin's Deny into anything else."""

    class Denier:
        name = "denier"

        @hookimpl(tryfirst=True)
        def dsh_tools_pre_execute(self, execution: ToolExecution) -> Deny:
            return Deny("not today")

    async with start([Denier()], mode="full-access", rules=[{"tool": "*", "action": "allow"}]) as ctx:
        result = await call(ctx, "read_file", ws, path="x")
    assert "not today" in text(result)


async def test_guard_and_pre_execute_agree_under_concurrency(start: Start, ws: Path) -> None:
    """Parallel calls of one agent each get their own verdict."""
    (ws / "a.txt").write_text("a\n")
    results: dict[str, str] = {}
    async with start(mode="read-only") as ctx:

        async def one(name: str, **arguments: Any) -> None:
            results[name] = text(await call(ctx, name, ws, **arguments))

        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: one("read_file", path="a.txt"))
            tg.start_soon(lambda: one("write_file", path="b.txt", content=""))
    assert results["read_file"] == "     1\ta"
    assert "read-only" in results["write_file"]
