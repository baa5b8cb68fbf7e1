"""ask_user in the dsh command: the chat takes the next line as the answer; dsh run without a terminal refuses at once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from dsh_cli._questions import parse_reply

from .cli_kit import DSH, FakeLlm, Terminal, run_dsh, spawn_dsh

pexpect = pytest.importorskip("pexpect")

QUESTIONS = [
    {"id": "db", "question": "Which database?", "options": ["sqlite", "postgres"]},
    {"id": "extras", "question": "Which extras?", "options": ["cache", "search"], "multi_select": True},
    {"id": "name", "question": "What should it be called?"},
]


@pytest.mark.parametrize(
    ("question", "line", "answer"),
    [
        (QUESTIONS[0], "2", "postgres"),
        (QUESTIONS[0], "SQLite", "sqlite"),
        (QUESTIONS[0], "1,2", "1,2"),  # one answer only: taken as typed
        (QUESTIONS[0], "mysql please", "mysql please"),
        (QUESTIONS[1], "1, 2", ["cache", "search"]),
        (QUESTIONS[1], "search", ["search"]),
        (QUESTIONS[1], "neither", ["neither"]),
        (QUESTIONS[2], " widgets ", "widgets"),
    ],
)
def test_a_typed_line_is_read_as_options_or_text(question: dict[str, Any], line: str, answer: Any) -> None:
    assert parse_reply(question, line) == answer


def test_the_chooser_moves_ticks_and_answers() -> None:
    """Arrows wrap around the options; Space ticks only in a multi-select question; Enter takes the
    highlighted option, the ticked ones, or typed text; with no options only typed text answers."""
    from dsh_cli._chooser import Chooser

    one = Chooser(QUESTIONS[0])
    one.move(-1)
    assert one.selected == 1
    one.tick()
    assert one.ticked == set(), "Space ticks nothing in a one-answer question"
    assert one.confirm("")
    assert one.result == "postgres"
    many = Chooser(QUESTIONS[1])
    assert many.confirm("")
    assert many.result == ["cache"], "nothing ticked: the highlighted one"
    many = Chooser(QUESTIONS[1])
    many.tick()
    many.move(1)
    many.tick()
    many.tick()
    assert many.confirm("")
    assert many.result == ["cache"]
    free = Chooser(QUESTIONS[2])
    assert not free.confirm("   ")
    assert free.hint == "type your answer, then Enter"
    assert not free.answered.is_set()
    assert free.confirm("widgets")
    assert free.result == "widgets"
    typed = Chooser(QUESTIONS[0])
    assert typed.confirm("2")
    assert typed.result == "postgres"


def test_chat_asks_in_a_chooser_and_sends_the_answers(project: Path, dsh_env: dict[str, str], llm: FakeLlm) -> None:
    """Each question opens a chooser: arrows and Enter pick an option, Space ticks in a multi-select
    question, a question without options takes typed text; the model gets {"answers": ...}."""
    llm.tool_call("ask_user", {"questions": QUESTIONS})
    llm.text("Got the answers.")
    child = spawn_dsh("chat", cwd=project, env=dsh_env)
    screen = Terminal(child)  # the chooser is redrawn in place: read it off an emulated screen
    try:
        screen.wait_for("new session")
        child.sendline("set up the service")
        screen.wait_for("? Which database?")
        screen.wait_for(" > 1. sqlite")
        assert "   2. postgres" in screen.text()
        child.send("\x1b[B")  # the down arrow: from sqlite to postgres
        screen.wait_for(" > 2. postgres")
        child.send("\r")
        screen.wait_for("? Which database?  ↳ postgres")
        screen.wait_for("space ticks")
        child.send(" ")  # tick cache
        screen.wait_for(" > [x] 1. cache")
        child.send("\x1b[B")
        screen.wait_for(" > [ ] 2. search")
        child.send(" ")
        screen.wait_for(" > [x] 2. search")
        child.send("\r")
        screen.wait_for("↳ cache, search")
        screen.wait_for("? What should it be called?")
        child.send("\r")  # nothing typed, no option to take: the chooser stays open
        screen.wait_for("type your answer, then Enter")
        child.send("widgets\r")
        screen.wait_for("Got the answers.")
        llm.wait_for_requests(2)
        result = [m for m in llm.messages(1) if m["role"] == "tool"]
        assert json.loads(result[-1]["content"]) == {
            "answers": {"db": "postgres", "extras": ["cache", "search"], "name": "widgets"}
        }
        assert "↳ widgets" in screen.text()
    finally:
        child.close(force=True)


def test_chat_chooser_takes_typed_text_as_a_free_answer(project: Path, dsh_env: dict[str, str], llm: FakeLlm) -> None:
    """Typed text answers a question with options too: a number picks one, other words are the answer."""
    llm.tool_call("ask_user", {"questions": QUESTIONS[:2]})
    llm.text("Noted.")
    child = spawn_dsh("chat", cwd=project, env=dsh_env)
    try:
        child.expect("new session")
        child.sendline("set up the service")
        child.expect("Which database?")
        child.expect("Enter answers")
        child.sendline("mysql, if possible")
        child.expect("Which extras?")
        child.expect("space ticks")
        child.sendline("2")
        child.expect("Noted.")
        llm.wait_for_requests(2)
        result = [m for m in llm.messages(1) if m["role"] == "tool"]
        assert json.loads(result[-1]["content"]) == {"answers": {"db": "mysql, if possible", "extras": ["search"]}}
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_run_without_a_terminal_tells_the_model_nobody_can_be_asked(
    project: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    llm.tool_call("ask_user", {"questions": QUESTIONS[:1]})
    llm.text("I will assume sqlite.")
    done = subprocess.run(
        [DSH, "run", "set it up"], cwd=project, env=dsh_env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "I will assume sqlite." in done.stdout
    result = [m for m in llm.messages(1) if m["role"] == "tool"]
    assert "nobody can be asked here" in result[-1]["content"]


def test_sessions_show_prints_the_todo_list_the_questions_and_the_answers(
    project: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    """`dsh sessions show` prints todo/updated as a checklist and question/asked, question/answered readably."""
    plan = [
        {"id": "ask", "content": "Ask which database", "status": "completed"},
        {"id": "build", "content": "Build the service", "status": "in_progress"},
    ]
    llm.tool_call("todo_write", {"todos": plan})
    llm.tool_call("ask_user", {"questions": QUESTIONS})
    llm.text("Building it.")
    child = spawn_dsh("run", "set up the service", cwd=project, env=dsh_env)
    try:
        child.expect("Which database?")
        child.expect("then Enter: ")
        child.sendline("2")
        child.expect("then Enter: ")
        child.sendline("1,2")
        child.expect("then Enter: ")
        child.sendline("widgets")
        child.expect("Building it.")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    listed = run_dsh("sessions", "list", cwd=project, env=dsh_env).stdout.splitlines()
    session_id = listed[1].split()[0]  # the one stored session, under the table's header
    shown = run_dsh("sessions", "show", session_id, cwd=project, env=dsh_env)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "☰ todo 1/2 done" in out, out
    assert "✔ Ask which database" in out
    assert "▶ Build the service" in out
    assert "? Which database?  (sqlite / postgres)" in out
    assert "? Which extras?  (cache / search; more than one)" in out
    assert "? What should it be called?" in out
    assert "answered by cli: db: postgres · extras: cache, search · name: widgets" in out
    assert "todo/updated" not in out
    assert "question/asked" not in out
