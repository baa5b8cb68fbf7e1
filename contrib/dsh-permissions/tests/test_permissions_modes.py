"""Modes: what each allows, paths outside the workspace in each, and plan mode for one agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dsh_permissions import Mode, Permissions

from dsh_core import Context

from .conftest import Start
from .permissions_kit import Approval, ApprovalPlugin, call, listing, text

pytestmark = pytest.mark.anyio

READS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "a.txt"}),
    ("list_dir", {}),
    ("glob", {"pattern": "*"}),
    ("grep", {"pattern": "a"}),
]
CHANGES: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"path": "b.txt", "content": "b"}),
    ("edit_file", {"path": "a.txt", "old_text": "a", "new_text": "z"}),
    ("bash", {"command": "touch c.txt"}),
]


@pytest.mark.parametrize(("name", "arguments"), READS + CHANGES, ids=[n for n, _ in READS + CHANGES])
async def test_read_only_allows_only_the_read_tools(
    start: Start, ws: Path, name: str, arguments: dict[str, Any]
) -> None:
    """read-only runs the read tools and denies the others with a message naming the mode."""
    (ws / "a.txt").write_text("a\n")
    async with start(mode="read-only") as ctx:
        result = await call(ctx, name, ws, **arguments)
    if (name, arguments) in READS:
        assert not result.is_error, text(result)
    else:
        assert result.error_code == "DENIED"
        assert (
            "the permission mode is read-only: only the read tools (glob, grep, list_dir, read_file) may run, "
            f"and {name!r} is not one of them"
        ) in text(result)
    assert await listing(ws) == ["a.txt"]
    assert (ws / "a.txt").read_text() == "a\n"


@pytest.mark.parametrize("mode", ["workspace-write", "full-access"])
async def test_writing_modes_allow_every_tool_in_the_workspace(start: Start, ws: Path, mode: Mode) -> None:
    """workspace-write and full-access run writes, edits and commands inside the workspace."""
    (ws / "a.txt").write_text("a\n")
    async with start(mode=mode, sandbox="off") as ctx:
        for name, arguments in CHANGES:
            result = await call(ctx, name, ws, **arguments)
            assert not result.is_error, text(result)
    assert await listing(ws) == ["a.txt", "b.txt", "c.txt"]


ESCAPES = {
    "dotdot": "../outside/secret.txt",
    "absolute": "{outside}/secret.txt",
    "symlink": "door/secret.txt",
}


@pytest.mark.parametrize("how", list(ESCAPES))
@pytest.mark.parametrize("mode", ["read-only", "workspace-write", "full-access"])
async def test_escapes_in_each_mode(start: Start, ws: Path, mode: Mode, how: str) -> None:
    """Reading and writing outside the workspace is refused in read-only and workspace-write, allowed in full-access."""
    outside = ws.parent / "outside"
    (ws / "door").symlink_to(outside, target_is_directory=True)
    path = ESCAPES[how].format(outside=outside)
    async with start(mode=mode) as ctx:
        read = await call(ctx, "read_file", ws, path=path)
        write = await call(ctx, "write_file", ws, path=path, content="pwned\n")
    if mode == "full-access":
        assert text(read) == "     1\ttop secret"
        assert not write.is_error
        assert (outside / "secret.txt").read_text() == "pwned\n"
        return
    assert "refused to read" in text(read)
    assert read.error_code == "TOOL_ERROR"
    assert write.error_code == ("DENIED" if mode == "read-only" else "TOOL_ERROR")
    assert (outside / "secret.txt").read_text() == "top secret\n"


async def test_allow_rule_opens_a_path_outside_the_workspace(start: Start, ws: Path) -> None:
    """An allow rule for an outside path lets the tools touch it; its neighbours stay refused."""
    outside = ws.parent / "outside"
    (outside / "other.txt").write_text("other\n")
    rules = [{"tool": "read_file", "pattern": f"{outside}/secret.txt", "action": "allow"}]
    async with start(rules=rules) as ctx:
        allowed = await call(ctx, "read_file", ws, path="../outside/secret.txt")
        refused = await call(ctx, "read_file", ws, path="../outside/other.txt")
        written = await call(ctx, "write_file", ws, path="../outside/secret.txt", content="x")
    assert text(allowed) == "     1\ttop secret"
    assert "refused to read" in text(refused)
    assert "refused to write" in text(written)


async def test_an_allow_rule_does_not_reach_through_a_symlink(start: Start, ws: Path) -> None:
    """Allowing 'docs/**' does not allow writing where a symlink below docs leads outside."""
    (ws / "docs").mkdir()
    (ws / "docs" / "door").symlink_to(ws.parent / "outside", target_is_directory=True)
    rules = [{"tool": "write_file", "pattern": "docs/**", "action": "allow"}]
    async with start(mode="read-only", rules=rules) as ctx:
        inside = await call(ctx, "write_file", ws, path="docs/ok.md", content="ok")
        through = await call(ctx, "write_file", ws, path="docs/door/secret.txt", content="pwned")
    assert not inside.is_error
    assert through.error_code == "DENIED"
    assert (ws.parent / "outside" / "secret.txt").read_text() == "top secret\n"


async def test_deny_rule_on_a_path_holds_in_full_access(start: Start, ws: Path) -> None:
    """full-access opens outside paths, but a deny rule on one still denies it."""
    rules = [{"tool": "*", "pattern": "**/outside/**", "action": "deny"}]
    async with start(mode="full-access", rules=rules) as ctx:
        result = await call(ctx, "read_file", ws, path="../outside/secret.txt")
    assert result.error_code == "DENIED"
    assert "'deny *(**/outside/**)'" in text(result)


async def test_ask_rule_for_an_outside_path_opens_it_once_approved(start: Start, ws: Path) -> None:
    """An ask rule matching an outside path asks, and the approved call may touch the path."""
    channel = Approval(True)
    rules = [{"tool": "read_file", "pattern": "../outside/*", "action": "ask"}]
    outside_rule = [{"tool": "read_file", "pattern": f"{ws.parent}/outside/*", "action": "ask"}]
    async with start([ApprovalPlugin(channel)], rules=rules + outside_rule) as ctx:
        result = await call(ctx, "read_file", ws, path="../outside/secret.txt")
    assert text(result) == "     1\ttop secret"
    assert len(channel.asked) == 1


# ---------------------------------------------------------------------- plan mode


async def test_plan_mode_switches_one_agent_only(start: Start, ws: Path) -> None:
    """set_mode(agent, 'read-only') denies that agent's writes; other agents and reads are untouched."""
    async with start() as ctx:
        permissions: Permissions = ctx.permissions
        permissions.set_mode("planner", "read-only")
        assert permissions.mode_for("planner") == "read-only"
        assert permissions.mode_for("worker") == "workspace-write"
        planned = await call(ctx, "write_file", ws, agent_id="planner", path="p.txt", content="")
        read = await call(ctx, "list_dir", ws, agent_id="planner")
        worked = await call(ctx, "write_file", ws, agent_id="worker", path="w.txt", content="")
        permissions.set_mode("planner", None)
        after = await call(ctx, "write_file", ws, agent_id="planner", path="p.txt", content="")
    assert planned.error_code == "DENIED"
    assert "read-only (switched for this agent, e.g. plan mode)" in text(planned)
    assert not read.is_error
    assert not worked.is_error
    assert not after.is_error


async def test_set_mode_checks_its_arguments(start: Start) -> None:
    """An unknown mode is a ValueError, a wrong type a TypeError, each naming the choices."""
    async with start() as ctx:
        with pytest.raises(ValueError, match="unknown permission mode 'plan'; expected one of read-only"):
            ctx.permissions.set_mode("a1", "plan")
        with pytest.raises(TypeError, match="a permission mode is a str"):
            ctx.permissions.set_mode("a1", 3)
        with pytest.raises(TypeError, match="set_mode takes the agent's id"):
            ctx.permissions.set_mode(None, "read-only")


async def test_configured_mode_is_the_default(start: Start) -> None:
    """The configured mode applies to agents never switched, and to calls without an agent."""
    async with start(mode="full-access") as ctx:
        assert ctx.permissions.default_mode == "full-access"
        assert ctx.permissions.mode_for(None) == "full-access"
        assert ctx.permissions.mode_for("anyone") == "full-access"


async def test_services_are_provided(start: Start) -> None:
    """The plugin provides permissions, workspace_policy and sandbox."""
    async with start() as ctx:
        assert isinstance(ctx.permissions, Permissions)
        assert ctx.workspace_policy is ctx.permissions
        assert ctx.get_service("sandbox") is not None


async def test_unknown_tools_use_their_first_required_string_argument(start: Start, ws: Path) -> None:
    """A rule pattern on another plugin's tool matches its first required string parameter."""

    def fetch(url: str, retries: int = 0) -> str:
        """Fetch a URL."""
        return f"fetched {url}"

    class Web:
        name = "web"

        def start(self, ctx: Context) -> None:
            ctx.tools.register(fetch)

    rules = [{"tool": "fetch", "pattern": "https://internal.example/*", "action": "deny"}]
    async with start([Web()], rules=rules) as ctx:
        denied = await call(ctx, "fetch", ws, url="https://internal.example/admin")
        allowed = await call(ctx, "fetch", ws, url="https://example.org/")
    assert denied.error_code == "DENIED"
    assert text(allowed) == "fetched https://example.org/"
