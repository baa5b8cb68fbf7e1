"""Escapes from the workspace: '..', absolute paths and symlinks are refused unless the policy allows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dsh_workspace import WorkspacePlugin, WorkspacePolicy

from dsh_core import Context, Harness, ToolExecution

from .workspace_kit import call, text

pytestmark = pytest.mark.anyio

#: one call per tool that takes a path, aimed at `target`
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {}),
    ("write_file", {"content": "pwned"}),
    ("edit_file", {"old_text": "top", "new_text": "pwned"}),
    ("list_dir", {}),
    ("glob", {"pattern": "*"}),
    ("grep", {"pattern": "secret"}),
]


def _target(tool_name: str, ws: Path, how: str) -> str:
    outside = ws.parent / "outside"
    file_or_dir = tool_name not in ("list_dir", "glob", "grep")
    if how == "dotdot":
        return "../outside/secret.txt" if file_or_dir else "../outside"
    if how == "absolute":
        return str(outside / "secret.txt") if file_or_dir else str(outside)
    if how == "symlink-dir":
        (ws / "door").symlink_to(outside, target_is_directory=True)
        return "door/secret.txt" if file_or_dir else "door"
    (ws / "door.txt").symlink_to(outside / "secret.txt")
    return "door.txt"


EXPECTED = {
    "dotdot": "it leaves the workspace through '..'",
    "absolute": "it is an absolute path outside the workspace",
    "symlink-dir": "it goes through a symlink that points outside the workspace",
    "symlink-file": "it goes through a symlink that points outside the workspace",
}


#: a file symlink names no directory, so the directory tools are tried with the other escapes only
ESCAPES = [
    pytest.param(name, extra, how, id=f"{name}-{how}")
    for name, extra in CALLS
    for how in EXPECTED
    if not (how == "symlink-file" and name in ("list_dir", "glob"))
]


@pytest.mark.parametrize(("tool_name", "extra", "how"), ESCAPES)
async def test_escapes_are_refused(
    ctx: Context, ws: Path, tool_name: str, extra: dict[str, Any], how: str
) -> None:
    """Every path tool refuses '..', absolute paths and symlinks that lead out, and touches nothing."""
    path = _target(tool_name, ws, how)
    result = await call(ctx, tool_name, ws, path=path, **extra)
    assert result.is_error
    assert result.error_code == "TOOL_ERROR"
    shown = text(result)
    assert EXPECTED[how] in shown
    assert f"inside the workspace {ws}" in shown
    assert (ws.parent / "outside" / "secret.txt").read_text() == "top secret\n"


async def test_writing_through_a_symlinked_directory_is_refused(ctx: Context, ws: Path) -> None:
    """A new file below a symlinked directory that leads out is not created."""
    (ws / "door").symlink_to(ws.parent / "outside", target_is_directory=True)
    result = await call(ctx, "write_file", ws, path="door/new/planted.txt", content="x")
    assert "symlink that points outside" in text(result)
    assert not (ws.parent / "outside" / "new").exists()


async def test_dotdot_that_stays_inside_is_fine(ctx: Context, ws: Path) -> None:
    """'..' is only a problem when it leaves the workspace."""
    (ws / "a").mkdir()
    (ws / "b.txt").write_text("fine\n")
    result = await call(ctx, "read_file", ws, path="a/../b.txt")
    assert text(result) == "     1\tfine"


async def test_absolute_path_inside_the_workspace_is_fine(ctx: Context, ws: Path) -> None:
    """An absolute path into the workspace works, and is shown relative to it."""
    result = await call(ctx, "write_file", ws, path=str(ws / "abs.txt"), content="ok")
    assert "to abs.txt" in text(result)


async def test_symlinked_workspace_root_is_resolved(ctx: Context, tmp_path: Path, ws: Path) -> None:
    """A cwd reached through a symlink works: paths inside the real directory are inside."""
    (ws / "f.txt").write_text("via link\n")
    alias = tmp_path / "alias"
    alias.symlink_to(ws, target_is_directory=True)
    result = await call(ctx, "read_file", alias, path=str(ws / "f.txt"))
    assert text(result) == "     1\tvia link"


class RecordingPolicy:
    """A workspace_policy that allows what `allowed` says and records every question."""

    def __init__(self, allowed: bool) -> None:
        self.allowed = allowed
        self.asked: list[tuple[str, str, str]] = []

    async def allows_outside(self, execution: ToolExecution, path: str, access: str) -> bool:
        self.asked.append((execution.name, path, access))
        return self.allowed


class PolicyPlugin:
    name = "test-policy"
    provides = ("workspace_policy",)

    def __init__(self, policy: RecordingPolicy) -> None:
        self.policy = policy

    def start(self, ctx: Context) -> None:
        ctx.provide("workspace_policy", self.policy)


async def test_policy_is_asked_with_the_resolved_path_and_access(ws: Path) -> None:
    """The workspace_policy service is asked about outside paths only, with the real path and the access."""
    policy = RecordingPolicy(allowed=True)
    assert isinstance(policy, WorkspacePolicy)
    (ws / "door").symlink_to(ws.parent / "outside", target_is_directory=True)
    (ws / "inside.txt").write_text("in\n")
    async with Harness(plugins=[WorkspacePlugin, PolicyPlugin(policy)], autoload=False) as ctx:
        assert text(await call(ctx, "read_file", ws, path="inside.txt")) == "     1\tin"
        assert policy.asked == []
        read = await call(ctx, "read_file", ws, path="door/secret.txt")
        written = await call(ctx, "write_file", ws, path="../outside/new.txt", content="allowed\n")
    secret = str((ws.parent / "outside" / "secret.txt").resolve())
    assert text(read) == "     1\ttop secret"
    assert not written.is_error
    assert (ws.parent / "outside" / "new.txt").read_text() == "allowed\n"
    assert policy.asked == [
        ("read_file", secret, "read"),
        ("write_file", str((ws.parent / "outside" / "new.txt").resolve()), "write"),
    ]


async def test_policy_can_refuse(ws: Path) -> None:
    """A policy that says no leaves the refusal in place."""
    policy = RecordingPolicy(allowed=False)
    async with Harness(plugins=[WorkspacePlugin, PolicyPlugin(policy)], autoload=False) as ctx:
        result = await call(ctx, "read_file", ws, path="../outside/secret.txt")
    assert "refused to read" in text(result)
    assert len(policy.asked) == 1
