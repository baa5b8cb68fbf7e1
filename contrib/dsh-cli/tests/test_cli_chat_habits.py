"""The habits of Claude Code and aider in `dsh chat`: @file, !cmd, /undo, Esc, Tab, -c, and what leaving prints."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dsh_cli._render import PROMPT_MARK

from .cli_kit import FakeLlm, Terminal, run_dsh, spawn_dsh

pexpect = pytest.importorskip("pexpect")


@pytest.fixture
def chat(project: Path, dsh_env: dict[str, str]) -> Iterator[Any]:
    child = spawn_dsh("chat", "--mode", "full-access", cwd=project, env=dsh_env)
    try:
        child.expect("new session")
        yield child
    finally:
        child.close(force=True)


def _leave(child: Any) -> str:
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    tail = str(child.before)
    child.close()
    assert child.exitstatus == 0
    return tail


def _user_texts(llm: FakeLlm, index: int) -> list[str]:
    return [str(m["content"]) for m in llm.messages(index) if m["role"] == "user"]


def test_at_path_attaches_the_file_and_tab_completes_it(chat: Any, llm: FakeLlm) -> None:
    """`@no` + Tab completes to @notes.txt; the sent prompt carries the file's text as context."""
    llm.text("It says bananas.")
    chat.send("what does @no")
    chat.send("\t")
    chat.expect("tes\\.txt")  # the completion is drawn after what was typed
    chat.sendline(" say?")
    chat.expect("notes.txt \\(1 line\\)")
    chat.expect("It says bananas.")
    sent = _user_texts(llm, 0)[-1]
    assert sent.startswith("what does @notes.txt say?")
    assert '<file path="notes.txt">\nbananas are yellow\n</file>' in sent
    _leave(chat)


def test_tab_completes_slash_commands(chat: Any) -> None:
    """`/und` + Tab is /undo; the typed command is echoed before its output."""
    chat.send("/und\t")
    chat.sendline("")
    chat.expect(f"{PROMPT_MARK}/undo")
    chat.expect("nothing to undo")
    _leave(chat)


def test_bang_runs_a_command_and_keeps_its_output_as_context(
    project: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    """`!cmd` goes through the bash tool (an ask rule asks), shows the output, calls no model; the next
    prompt carries it."""
    child = spawn_dsh("chat", cwd=project, env=dsh_env)
    try:
        child.expect("new session")
        child.sendline("!echo shell-output-$((40 + 2))")
        child.expect("allow bash")  # the project's rule asks for bash: the same rules as the agent's
        child.sendline("yes")
        child.expect("shell-output-42")
        child.expect("kept as context")
        assert llm.requests == [], "the model is not called"
        llm.text("It printed 42.")
        child.sendline("what did it print?")
        child.expect("It printed 42.")
        texts = _user_texts(llm, 0)
        assert any("$ echo shell-output-$((40 + 2))" in t and "shell-output-42" in t for t in texts), texts
        assert texts[-1] == "what did it print?"
        _leave(child)
    finally:
        child.close(force=True)


def test_undo_restores_the_last_turns_files(chat: Any, llm: FakeLlm, project: Path) -> None:
    """/undo puts back the file the turn edited (its mode too) and removes the one it created, says which,
    and tells the model."""
    (project / "notes.txt").chmod(0o640)
    llm.tool_call("edit_file", {"path": "notes.txt", "old_text": "yellow", "new_text": "green"})
    llm.tool_call("write_file", {"path": "made.txt", "content": "new file\n"})
    llm.text("Changed two files.")
    chat.sendline("change things")
    chat.expect("Changed two files.")
    chat.expect("done")
    assert (project / "notes.txt").read_text(encoding="utf-8") == "bananas are green\n"
    assert (project / "made.txt").exists()
    chat.sendline("/undo")
    chat.expect("undid turn 1: notes.txt \\(restored\\), made.txt \\(removed\\)")
    assert (project / "notes.txt").read_text(encoding="utf-8") == "bananas are yellow\n"
    assert (project / "notes.txt").stat().st_mode & 0o777 == 0o640
    assert not (project / "made.txt").exists()
    assert not list(project.rglob("*undo*")), "the journal is not in the workspace"
    chat.sendline("/undo")
    chat.expect("nothing to undo")
    llm.text("Understood.")
    chat.sendline("ok")
    chat.expect("Understood.")
    assert any("undid the file changes of turn 1" in t for t in _user_texts(llm, 3))
    _leave(chat)


def test_escape_cancels_a_running_turn(chat: Any, llm: FakeLlm) -> None:
    """Esc interrupts like Ctrl-C: the turn is cancelled and the chat goes on."""
    llm.held("Thinking slowly")
    chat.sendline("go")
    chat.expect("Thinking slowly")
    chat.send("\x1b")
    chat.expect("cancelled")
    llm.text("Next.")
    chat.sendline("again")
    chat.expect("Next.")
    _leave(chat)


def test_leaving_prints_tokens_and_how_to_resume_and_c_continues(
    project: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    """Leaving names the session, its tokens and the resume command; `dsh chat -c` continues it."""
    first = spawn_dsh("chat", cwd=project, env=dsh_env)
    try:
        first.expect("new session")
        llm.text("Noted.")
        first.sendline("remember 42")
        first.expect("done")
        tail = _leave(first)
    finally:
        first.close(force=True)
    found = re.search(
        r"session ([0-9a-f-]+): ↑12 ↓5 tokens(?:\x1b\[[0-9;]*m|\s)+"
        r"resume with `dsh chat --resume ([0-9a-f-]+)` \(or `dsh chat -c` here\)",
        tail,
    )
    assert found is not None, tail
    assert found.group(1) == found.group(2)
    second = spawn_dsh("chat", "-c", cwd=project, env=dsh_env)
    try:
        second.expect("remember 42")
        second.expect(f"resumed session (?:\x1b\\[[0-9;]*m)*{found.group(1)}")
        _leave(second)
    finally:
        second.close(force=True)


def test_the_spinner_counts_tokens_while_text_streams(project: Path, dsh_env: dict[str, str], llm: FakeLlm) -> None:
    """Before the request's usage arrives the spinner's output count grows with the streamed text."""
    release = llm.held("x" * 400)
    child = spawn_dsh("chat", cwd=project, env=dsh_env)
    screen = Terminal(child)
    try:
        screen.wait_for("new session")
        child.sendline("stream")
        screen.wait_for("↓~100 tokens")
        release.set()
        screen.wait_for("done")
    finally:
        child.close(force=True)
    assert run_dsh("sessions", "list", cwd=project, env=dsh_env).returncode == 0


def test_a_list_item_is_rendered_while_the_list_streams(
    project: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    """The first item shows rendered (a bullet, no **) while the model is still writing the list;
    a resumed chat renders the stored answer's Markdown too."""
    release = llm.held("Points:\n\n- point **10**\n- point ")
    child = spawn_dsh("chat", cwd=project, env=dsh_env)
    screen = Terminal(child)
    try:
        screen.wait_for("new session")
        child.sendline("list")
        screen.wait_for("• point 10")
        assert "**10**" not in screen.text()
        release.set()
        screen.wait_for("done")
        _leave(child)
    finally:
        child.close(force=True)
    again = spawn_dsh("chat", "-c", cwd=project, env=dsh_env)
    screen = Terminal(again)
    try:
        screen.wait_for("resumed session")
        assert "• point 10" in screen.text()
        assert "**10**" not in screen.text()
    finally:
        again.close(force=True)
