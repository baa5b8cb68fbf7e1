"""``dsh chat`` in a real pseudo-terminal against the fake server: streaming, approvals, steering, Ctrl-C, resume."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .cli_kit import FakeLlm, Terminal, run_dsh, spawn_dsh

pexpect = pytest.importorskip("pexpect")


@pytest.fixture
def chat(project: Path, dsh_env: dict[str, str]) -> Iterator[Any]:
    """``dsh chat`` started in the project, at its first prompt."""
    child = spawn_dsh("chat", cwd=project, env=dsh_env)
    try:
        child.expect("new session")
        yield child
    finally:
        child.close(force=True)


def _leave(child: Any) -> None:
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_answer_streams(chat: Any, llm: FakeLlm) -> None:
    """A prompt is sent as the user's message and the streamed answer is printed."""
    llm.text("Hello", " from", " the fake model.")
    chat.sendline("hi there")
    chat.expect("Hello from the fake model.")
    chat.expect("done")
    assert llm.messages(0)[-1] == {"role": "user", "content": "hi there"}
    _leave(chat)


def test_reasoning_is_collapsed_and_expandable(chat: Any, llm: FakeLlm) -> None:
    """Reasoning shows as one dim summary line; /reasoning prints it in full."""
    llm.reasoning("First line of thought.\nSecond line of thought.", "The answer.")
    chat.sendline("think")
    chat.expect("thought: First line of thought.")
    chat.expect("The answer.")
    chat.sendline("/reasoning")
    chat.expect("Second line of thought.")
    _leave(chat)


def test_approval_once_always_and_deny(chat: Any, llm: FakeLlm) -> None:
    """An `ask` tool waits for a whole answer and Enter: yes (once), arrows to always, no with a reason."""
    llm.tool_call("bash", {"command": "echo first-run"})
    llm.text("ran once")
    chat.sendline("run it")
    chat.expect("allow bash")
    chat.sendline("maybe")  # its y must not answer: a typed line that is no answer gets a hint
    chat.expect("'maybe' is no answer")
    assert "allowed" not in chat.before
    chat.sendcontrol("u")
    chat.sendline("yes")
    chat.expect("allowed once")
    chat.expect("first-run")
    chat.expect("ran once")

    llm.tool_call("bash", {"command": "echo second-run"})
    llm.text("denied, fine")
    chat.sendline("again")
    chat.expect("allow bash")
    chat.sendline("no, list the files instead")
    chat.expect("denied")
    chat.expect("denied, fine")
    tool_message = llm.messages(3)[-1]
    assert tool_message["role"] == "tool"
    assert "the user denied the call" in tool_message["content"]
    assert "list the files instead" in tool_message["content"]
    assert "second-run\n" not in tool_message["content"], "the command did not run"

    llm.tool_call("bash", {"command": "echo third-run"})
    llm.text("always now")
    chat.sendline("once more")
    chat.expect("allow bash")
    chat.send("\x1b[C")  # the right arrow: from "once" to "always"
    chat.expect("> always")
    chat.sendline("")
    chat.expect("allowed for this session")
    chat.expect("always now")
    llm.tool_call("bash", {"command": "echo fourth-run"})
    llm.text("not asked")
    chat.sendline("and again")
    chat.expect("fourth-run")
    chat.expect("not asked")
    assert "fourth-run" in llm.messages(7)[-1]["content"]
    _leave(chat)


def test_typing_while_it_works_steers(chat: Any, llm: FakeLlm) -> None:
    """A line entered while the model streams is steering: the next request carries it."""
    release = llm.held_tool_call("Looking around", "list_dir", {"path": "."})
    llm.text("Bananas noted.")
    chat.sendline("start")
    chat.expect("Looking around")
    chat.sendline("also mention bananas")
    chat.expect("steering")
    release.set()
    chat.expect("Bananas noted.")
    llm.wait_for_requests(2)
    steering = [m for m in llm.messages(1) if m["role"] == "user" and "bananas" in str(m.get("content"))]
    assert steering, llm.messages(1)
    _leave(chat)


def test_ctrl_c_cancels_then_twice_exits(chat: Any, llm: FakeLlm) -> None:
    """Ctrl-C cancels a running turn (the chat goes on); twice on an empty prompt it exits."""
    llm.held("Thinking hard")
    chat.sendline("go")
    chat.expect("Thinking hard")
    chat.sendcontrol("c")
    chat.expect("cancelled")
    llm.text("Fresh answer.")
    chat.sendline("again")
    chat.expect("Fresh answer.")
    chat.expect("done")  # the turn has ended: the next Ctrl-C lands on an idle, empty prompt
    contents = [m.get("content") for m in llm.messages(1)]
    assert "Thinking hard" in contents, "the interrupted text is kept in the history"
    chat.sendcontrol("c")
    chat.expect("press Ctrl-C again to exit")
    chat.sendcontrol("c")
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0


def test_resume_a_session(project: Path, dsh_env: dict[str, str], llm: FakeLlm) -> None:
    """/resume ID in a new chat shows the stored history and continues the session."""
    first = spawn_dsh("chat", cwd=project, env=dsh_env)
    try:
        first.expect(r"new session (?:\x1b\[[0-9;]*m)*([0-9]{8}-[0-9]{6}-[0-9a-f]{6})")
        session = first.match.group(1)
        llm.text("Noted.")
        first.sendline("remember 42")
        first.expect("Noted.")
        _leave(first)
    finally:
        first.close(force=True)
    second = spawn_dsh("chat", cwd=project, env=dsh_env)
    try:
        second.expect("new session")
        second.sendline("/sessions")
        second.expect_exact(session)
        second.sendline(f"/resume {session}")
        second.expect("remember 42")
        second.expect("resumed session")
        llm.text("It was 42.")
        second.sendline("which number?")
        second.expect("It was 42.")
        contents = [m.get("content") for m in llm.messages(1)]
        assert contents[-3:] == ["remember 42", "Noted.", "which number?"]
        _leave(second)
    finally:
        second.close(force=True)


def test_chat_resume_asks_again_for_a_call_parked_on_approval(
    project: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    """Leaving while a question is open parks the turn; `dsh chat --resume` asks again, the model is not re-asked."""
    first = spawn_dsh("chat", cwd=project, env=dsh_env)
    try:
        first.expect(r"new session (?:\x1b\[[0-9;]*m)*([0-9]{8}-[0-9]{6}-[0-9a-f]{6})")
        session = first.match.group(1)
        llm.tool_call("bash", {"command": "echo after-resume"})
        first.sendline("run it")
        first.expect("allow bash")
        first.sendcontrol("d")
        first.expect(pexpect.EOF)
    finally:
        first.close(force=True)
    second = spawn_dsh("chat", "--resume", session, cwd=project, env=dsh_env)
    try:
        second.expect("allow bash")
        llm.text("ran after the resume")
        second.sendline("yes")
        second.expect("allowed once")
        second.expect("after-resume")
        second.expect("ran after the resume")
        assert len(llm.requests) == 2, "the model's step was not repeated"
        assert "after-resume" in llm.messages(1)[-1]["content"]
        _leave(second)
    finally:
        second.close(force=True)


def test_commands(chat: Any) -> None:
    """/help lists the commands; /model refuses an unknown model; /mode switches the permission mode."""
    chat.sendline("/help")
    chat.expect("/resume ID")
    chat.sendline("/model local/nope")
    chat.expect("unknown model")
    chat.sendline("/model")
    chat.expect("local/fake")
    chat.sendline("/mode read-only")
    chat.expect("mode → ")
    chat.expect("read-only")
    chat.sendline("/mode")
    chat.expect("read-only")
    chat.sendline("/bogus")
    chat.expect("unknown command")
    _leave(chat)


def test_sessions_resume_opens_a_chat(project: Path, dsh_env: dict[str, str], llm: FakeLlm) -> None:
    """`dsh sessions resume ID` is a chat on the stored session, its history shown first."""
    llm.text("Stored answer.")
    done = run_dsh("run", "stored question", cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    session = done.stderr.split("session ")[-1].split(" ")[0]
    child = spawn_dsh("sessions", "resume", session, cwd=project, env=dsh_env)
    try:
        child.expect("stored question")
        child.expect("Stored answer.")
        child.expect("resumed session")
        _leave(child)
    finally:
        child.close(force=True)


def test_ctrl_c_on_a_question_denies_and_cancels(chat: Any, llm: FakeLlm) -> None:
    """Ctrl-C while an approval question is open denies the call and cancels the turn."""
    llm.tool_call("bash", {"command": "echo never"})
    chat.sendline("run something")
    chat.expect("allow bash")
    chat.sendcontrol("c")
    chat.expect("denied")
    chat.expect("cancelled")
    llm.text("Still here.")
    chat.sendline("hello?")
    chat.expect("Still here.")
    _leave(chat)


def test_steering_dropped_by_a_cancel_is_reported_and_put_back(chat: Any, llm: FakeLlm) -> None:
    """Steering typed during a turn, then Ctrl-C: the chat says it was not delivered and puts it back in the input."""
    llm.held("Working on it")
    chat.sendline("start")
    chat.expect("Working on it")
    chat.sendline("use the fast path")
    chat.expect("steering: seen at the next step")
    chat.sendcontrol("c")
    chat.expect("not delivered")
    chat.expect("cancelled")
    llm.text("Fast path it is.")
    chat.sendline("")  # Enter sends what was put back, as a prompt
    chat.expect("Fast path it is.")
    assert llm.messages(1)[-1] == {"role": "user", "content": "use the fast path"}
    _leave(chat)


def test_ctrl_c_while_a_line_is_handled_cancels_it_and_the_chat_goes_on(chat: Any, llm: FakeLlm) -> None:
    """Ctrl-C while no input line is open (the terminal sends SIGINT) cancels what the line started, like the key."""
    llm.text("Something to compact.")
    chat.sendline("hello")
    chat.expect("Something to compact.")
    chat.expect("done")
    llm.held("The conversation so far")  # the summarisation call of /compact, still streaming
    chat.sendline("/compact")
    chat.expect("compacting…")
    llm.wait_for_requests(2)  # /compact is being handled: the input line is closed
    chat.sendcontrol("c")
    chat.expect("cancelled")
    llm.text("Still here.")
    chat.sendline("ping")
    chat.expect("Still here.")
    assert llm.messages(2)[-1] == {"role": "user", "content": "ping"}
    _leave(chat)


def test_a_steering_notice_does_not_split_a_streamed_word(chat: Any, llm: FakeLlm) -> None:
    """Steering sent in the middle of a word: the notice goes above, the streamed line stays whole."""
    release = llm.held("Looking aro", then=[_content("und here\n"), *_finish()])
    llm.text("ok")
    chat.sendline("start")
    chat.expect("Looking aro")
    chat.sendline("and mention the tests")
    chat.expect("steering: seen at the next step")
    release.set()
    chat.expect("Looking around here")
    _leave(chat)


def test_model_switch_to_an_unknown_model_blames_the_command(chat: Any) -> None:
    """`/model local/nosuch` names /model as the source of the bad model, not the configuration file."""
    chat.sendline("/model local/nosuch")
    chat.expect("unknown model 'local/nosuch' \\(from /model\\)")
    assert "dsh.toml" not in chat.before
    _leave(chat)


def test_ctrl_j_inserts_a_newline(chat: Any, llm: FakeLlm) -> None:
    """Ctrl-J (and Alt-Enter) add a line to the prompt; Enter sends both lines as one message."""
    llm.text("Two lines received.")
    chat.send("first line")
    chat.sendcontrol("j")
    chat.send("second line")
    chat.send("\x1b\r")  # Alt-Enter
    chat.sendline("third line")
    chat.expect("Two lines received.")
    assert llm.messages(0)[-1] == {"role": "user", "content": "first line\nsecond line\nthird line"}
    _leave(chat)


def _content(text: str) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}


def _finish() -> list[dict[str, Any]]:
    return [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        },
    ]


_MARKDOWN = "# Plan\n\nSome **bold** words and `code`.\n\n- first item\n- second item\n\n```python\nprint('hi')\n```\n"


def test_answers_are_rendered_as_markdown(chat: Any, llm: FakeLlm) -> None:
    """Headings, emphasis, lists and code blocks are rendered as they stream, not shown as Markdown source."""
    llm.text(*[_MARKDOWN[i : i + 7] for i in range(0, len(_MARKDOWN), 7)])
    chat.sendline("plan it")
    chat.expect("done")
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", chat.before)  # the screen's text, without its styles
    assert "• first item" in shown
    assert "• second item" in shown
    assert "print('hi')" in shown
    assert "Some bold words and code." in shown, "emphasis and code spans rendered, not shown as ** and `"
    _leave(chat)


def test_status_line_last_output_and_resume_hint(
    project: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    """The status line shows context-window use and the session's cost (the model table's prices), the turn's
    line its cost; /last expands the tool output; /cost tells both; leaving prints the session's usage and how
    to resume."""
    toml = project / "dsh.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8").replace(
            "max_output_tokens = 4096 }", "max_output_tokens = 4096, input_price = 1000.0, output_price = 2000.0 }"
        ),
        encoding="utf-8",
    )
    (project / "long.txt").write_text("".join(f"row {n}\n" for n in range(1, 8)), encoding="utf-8")
    llm.tool_call("read_file", {"path": "long.txt"})
    llm.text("Seven rows.")
    # the status line needs the terminal's cursor-position reports, which Terminal answers
    env = {key: value for key, value in dsh_env.items() if key != "PROMPT_TOOLKIT_NO_CPR"}
    child = spawn_dsh("chat", cwd=project, env=env)
    terminal = Terminal(child)
    try:
        terminal.wait_for("new session ")
        session = terminal.text().split("new session ", 1)[1].split()[0]
        child.sendline("read long.txt")
        terminal.wait_for("(+6 lines)")
        terminal.wait_for("Seven rows.")
        # 12 input tokens of a 32768 window; 2 requests of 12 in, 5 out at $1000/$2000 per million
        terminal.wait_for("context 0% of 32k · session $0.0440")
        assert "tokens)  $0.0440" in terminal.text()  # the turn's line
        child.sendline("/last")
        terminal.wait_for("row 7")
        assert "row 4" in terminal.text()
        child.sendline("/cost")
        terminal.wait_for("this turn: ↑24 ↓10 tokens · $0.0440")
        terminal.wait_for("this session (1 turns): ↑24 ↓10 tokens · $0.0440")
        child.sendline("/exit")
        terminal.wait_for(f"session {session}: ↑24 ↓10 tokens · $0.0440")
        terminal.wait_for(f"resume with `dsh chat --resume {session}`")
    finally:
        child.close(force=True)


def test_a_retry_and_an_edit_are_shown(project: Path, dsh_env: dict[str, str], llm: FakeLlm) -> None:
    """In the chat too: `retrying 2/3 in 0 s (RATE_LIMIT)` for an llm/retry, a coloured diff for edit_file."""
    llm.fail(429, "slow down")
    llm.tool_call("edit_file", {"path": "notes.txt", "old_text": "yellow", "new_text": "green"})
    llm.text("Done editing.")
    child = spawn_dsh(
        "chat", "--mode", "full-access", "--set", "retry.max_attempts=3", "--set", "retry.initial_delay=0",
        cwd=project, env=dsh_env,
    )  # fmt: skip
    try:
        child.expect("new session")
        child.sendline("edit")
        child.expect("retrying 2/3 in 0 s \\(RATE_LIMIT\\)")
        child.expect("- yellow")
        child.expect("\\+ green")
        child.expect("Done editing.")
        _leave(child)
    finally:
        child.close(force=True)
    assert (project / "notes.txt").read_text(encoding="utf-8") == "bananas are green\n"
