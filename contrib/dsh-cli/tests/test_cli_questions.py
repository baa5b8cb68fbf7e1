"""ask_user in the dsh command: the chat takes the next line as the answer; dsh run without a terminal refuses at once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from dsh_cli._questions import parse_reply

from .cli_kit import DSH, FakeLlm, run_dsh, spawn_dsh

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


def test_chat_asks_and_sends_the_answers(project: Path, dsh_env: dict[str, str], llm: FakeLlm) -> None:
    """The questions are printed; each line typed answers one; the model gets {"answers": ...}."""
    llm.tool_call("ask_user", {"questions": QUESTIONS})
    llm.text("Got the answers.")
    child = spawn_dsh("chat", cwd=project, env=dsh_env)
    try:
        child.expect("new session")
        child.sendline("set up the service")
        child.expect("Which database?")
        child.expect("2. postgres")
        child.sendline("2")
        child.expect("Which extras?")
        child.sendline("1,2")
        child.expect("What should it be called?")
        child.sendline("widgets")
        child.expect("Got the answers.")
        llm.wait_for_requests(2)
        result = [m for m in llm.messages(1) if m["role"] == "tool"]
        assert json.loads(result[-1]["content"]) == {
            "answers": {"db": "postgres", "extras": ["cache", "search"], "name": "widgets"}
        }
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
