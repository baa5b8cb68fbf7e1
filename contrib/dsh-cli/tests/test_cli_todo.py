"""``dsh chat`` shows the agent's todo list as a checklist above the prompt while an item is open."""

from __future__ import annotations

from pathlib import Path

import pytest

from .cli_kit import FakeLlm, Terminal, spawn_dsh

pytest.importorskip("pexpect")

PLAN = [
    {"id": "read", "content": "Read the failing test", "status": "completed"},
    {"id": "fix", "content": "Fix the parser", "status": "in_progress"},
    {"id": "docs", "content": "Update the docs", "status": "pending"},
]


def test_the_checklist_shows_while_the_list_is_open(project: Path, dsh_env: dict[str, str], llm: FakeLlm) -> None:
    """After todo_write the checklist is drawn above the prompt; once all is done it goes."""
    llm.tool_call("todo_write", {"todos": PLAN})
    release = llm.held_tool_call("Working on it", "list_dir", {"path": "."})
    llm.tool_call("todo_write", {"todos": [{**item, "status": "completed"} for item in PLAN]})
    llm.text("All done.")
    env = {key: value for key, value in dsh_env.items() if key != "PROMPT_TOOLKIT_NO_CPR"}
    child = spawn_dsh("chat", cwd=project, env=env)
    terminal = Terminal(child)
    try:
        terminal.wait_for("new session ")
        child.sendline("fix the parser")
        terminal.wait_for("Todo 1/3 done")
        screen = terminal.text()
        assert "✔ Read the failing test" in screen
        assert "▶ Fix the parser" in screen
        assert "○ Update the docs" in screen
        release.set()
        terminal.wait_for("All done.")
        child.sendline("/exit")
        terminal.wait_for("resume with")
        assert "Todo 1/3 done" not in terminal.text().split("All done.")[-1]
    finally:
        child.close(force=True)
