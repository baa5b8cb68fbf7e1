"""An approval question shows the whole call (wrapped, never cut) and, for a file edit, the real diff first."""

from __future__ import annotations

from pathlib import Path

import pytest

from .cli_kit import FakeLlm, Terminal, project_toml, spawn_dsh

pexpect = pytest.importorskip("pexpect")

#: a harmless prefix long enough to push the rest of the command past one line at 80 columns
LONG = "echo this-is-a-long-harmless-prefix-to-push-the-dangerous-part-of-the-command-off-screen"
COMMAND = f"{LONG} && touch HIDDEN_SIDE_EFFECT.txt"


def _unwrapped(screen: str) -> str:
    """The screen's lines joined without their indentation: a wrapped command reads whole again."""
    return "".join(line.strip() for line in screen.splitlines())


def _call_part(screen: str) -> str:
    """The call as the question shows it (from ``? allow`` to the reason; the reason names the
    command too, so it must not count), unwrapped."""
    start = screen.index("? allow ")
    return _unwrapped(screen[start : screen.index("why:", start)])


def test_chat_question_at_80_columns_shows_every_character(
    project: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    """The question wraps a long bash command and its reason over lines instead of cutting them."""
    llm.tool_call("bash", {"command": COMMAND})
    llm.text("denied then")
    child = spawn_dsh("chat", cwd=project, env=dsh_env, columns=80)
    screen = Terminal(child, columns=80)
    try:
        screen.wait_for("new session")
        child.sendline("do it")
        screen.wait_for("←/→ choose")
        shown = screen.text()
        assert "? allow bash $ echo" in shown
        assert "touch HIDDEN_SIDE_EFFECT.txt" in _call_part(shown), shown
        assert COMMAND.replace(" ", "") in _call_part(shown).replace(" ", "")
        assert "why:" in shown
        assert "[plugins.permissions]" in _unwrapped(shown) or "rule" in shown, shown
        assert max(len(line) for line in shown.splitlines()) <= 80
        child.sendline("no")
        screen.wait_for("denied then")
        assert not (project / "HIDDEN_SIDE_EFFECT.txt").exists()
    finally:
        child.close(force=True)


def test_run_question_at_a_terminal_shows_every_character(
    project: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    """`dsh run` at a terminal asks on stderr with the whole command, wrapped to the terminal."""
    llm.tool_call("bash", {"command": COMMAND})
    llm.text("fine")
    child = spawn_dsh("run", "do it", cwd=project, env=dsh_env, columns=80)
    screen = Terminal(child, columns=80)
    try:
        screen.wait_for("allow? yes")
        assert "touch HIDDEN_SIDE_EFFECT.txt" in _call_part(screen.text()), screen.text()
        child.sendline("no")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert not (project / "HIDDEN_SIDE_EFFECT.txt").exists()


def test_write_over_a_file_shows_the_diff_before_asking(
    tmp_path: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    """An asked write_file over an existing file shows the lines it removes, at their line numbers, before the question."""
    root = tmp_path / "work"
    root.mkdir()
    toml = project_toml(llm.base_url, tmp_path / "sessions").replace(
        'rules = [{ tool = "bash", action = "ask" }]', 'rules = [{ tool = "write_file", action = "ask" }]'
    )
    (root / "dsh.toml").write_text(toml, encoding="utf-8")
    (root / "plan.txt").write_text("keep1\nsecret plan\nkeep3\n", encoding="utf-8")
    llm.tool_call("write_file", {"path": "plan.txt", "content": "keep1\nkeep3\n"})
    llm.text("ok")
    child = spawn_dsh("chat", cwd=root, env=dsh_env)
    screen = Terminal(child)
    try:
        screen.wait_for("new session")
        child.sendline("rewrite it")
        screen.wait_for("←/→ choose")
        screen.wait_for("- secret plan")  # printed above the live area as the question opens
        screen.wait_for("? allow write_file plan.txt")
        shown = screen.text()
        assert "@@ -1,3 +1,2 @@" in shown, shown
        assert "- secret plan" in shown
        assert shown.index("- secret plan") < shown.index("? allow write_file plan.txt")
        child.sendline("no")
        screen.wait_for("ok")
    finally:
        child.close(force=True)
    assert (root / "plan.txt").read_text(encoding="utf-8") == "keep1\nsecret plan\nkeep3\n"
