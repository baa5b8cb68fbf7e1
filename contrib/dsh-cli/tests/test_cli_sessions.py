"""``dsh sessions list | show | delete`` and ``dsh plugins``."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from .cli_kit import DSH, FakeLlm, run_dsh


def _run(llm: FakeLlm, project: Path, env: dict[str, str], prompt: str, answer: str) -> str:
    llm.text(answer)
    done = run_dsh("run", prompt, cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    found = re.search(r"session (\S+) · continue", done.stderr)
    assert found is not None
    return found.group(1)


def test_list_show_delete(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """A stored session is listed with its first prompt, shown as a transcript, then deleted."""
    first = _run(llm, project, dsh_env, "first question", "first answer")
    second = _run(llm, project, dsh_env, "second question", "second answer")
    listed = run_dsh("sessions", "list", cwd=project, env=dsh_env)
    assert listed.returncode == 0, listed.stderr
    assert first in listed.stdout
    assert second in listed.stdout
    assert listed.stdout.index(second) < listed.stdout.index(first), "newest first"
    assert "first question" in listed.stdout
    shown = run_dsh("sessions", "show", first, cwd=project, env=dsh_env)
    assert shown.returncode == 0, shown.stderr
    assert "first question" in shown.stdout
    assert "first answer" in shown.stdout
    assert "  ·  1 turn  ·  " in shown.stdout, "one turn, not `1 turns`"
    prefix = run_dsh("sessions", "show", second[:-2], cwd=project, env=dsh_env)
    assert "second answer" in prefix.stdout, "a unique prefix names the session"
    deleted = run_dsh("sessions", "delete", first, cwd=project, env=dsh_env)
    assert deleted.returncode == 0, deleted.stderr
    assert first not in run_dsh("sessions", "list", cwd=project, env=dsh_env).stdout
    again = run_dsh("sessions", "delete", first, cwd=project, env=dsh_env)
    assert again.returncode == 3
    assert "no stored session" in again.stderr


def test_unknown_session(project: Path, dsh_env: dict[str, str]) -> None:
    """Showing or resuming an unknown session is one clear line and exit 3."""
    for args in (("sessions", "show", "nope"), ("run", "--resume", "nope", "hi")):
        done = run_dsh(*args, cwd=project, env=dsh_env)
        assert done.returncode == 3
        assert "no stored session 'nope'" in done.stderr


def test_empty_list(project: Path, dsh_env: dict[str, str]) -> None:
    """No sessions yet: a hint, exit 0."""
    done = run_dsh("sessions", "list", cwd=project, env=dsh_env)
    assert done.returncode == 0
    assert "no stored sessions" in done.stdout


def test_plugins_lists_the_installed_plugins(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """`dsh plugins` shows each plugin with its distribution."""
    done = run_dsh("plugins", cwd=tmp_path, env=dsh_env)
    assert done.returncode == 0, done.stderr
    for name in ("cli", "openai", "workspace", "permissions", "persistence-jsonl", "agent-loop"):
        assert name in done.stdout
    assert "dsh-harness-cli" in done.stdout


def test_list_shows_prompts_as_typed_and_whole_when_piped(
    llm: FakeLlm, project: Path, dsh_env: dict[str, str]
) -> None:
    """A prompt with brackets is not taken as markup, and a piped listing is not cut to 80 columns."""
    long = "explain why the median of an even list is wrong, and fix it"  # the store keeps 80 characters
    _run(llm, project, dsh_env, "return s[len(s) // 2] [bold]x[/bold]", "ok")
    _run(llm, project, dsh_env, long, "ok")
    listed = run_dsh("sessions", "list", cwd=project, env=dsh_env)
    assert listed.returncode == 0, listed.stderr
    assert "return s[len(s) // 2] [bold]x[/bold]" in listed.stdout
    assert long in listed.stdout, "a piped line is as long as it needs (a long cwd comes before the prompt)"
    assert max(len(line) for line in listed.stdout.splitlines()) > 120


def test_delete_takes_a_unique_prefix(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """`dsh sessions delete PREFIX` deletes the one session the prefix names, like show and resume."""
    ident = _run(llm, project, dsh_env, "to delete", "ok")
    done = run_dsh("sessions", "delete", ident[:-3], cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    assert f"deleted session {ident}" in done.stdout
    assert ident not in run_dsh("sessions", "list", cwd=project, env=dsh_env).stdout


@pytest.mark.parametrize("flags", [["--json"], []], ids=["json", "transcript"])
def test_show_into_a_closed_pipe_exits_141(
    llm: FakeLlm, project: Path, dsh_env: dict[str, str], flags: list[str]
) -> None:
    """`dsh sessions show ID [--json] | head`: a reader that goes away ends the command with 141, like
    `dsh run`, without a traceback (the transcript went through rich, whose own exit status is 1)."""
    ident = _run(llm, project, dsh_env, "a question", "an answer")
    process = subprocess.Popen(
        [DSH, "sessions", "show", ident, *flags],
        cwd=project,
        env=dsh_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    process.stdout.close()  # gone before the first line
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 141, stderr
    assert stderr == b""


def test_fork_copies_a_session_up_to_a_seq(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """`dsh sessions fork ID --at SEQ` stores a new session with the events up to SEQ and its parent named."""
    ident = _run(llm, project, dsh_env, "first question", "first answer")
    llm.text("second answer")
    assert run_dsh("run", "--resume", ident, "second question", cwd=project, env=dsh_env).returncode == 0
    shown = run_dsh("sessions", "show", ident, "--json", cwd=project, env=dsh_env)
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    first_end = next(e["seq"] for e in events if e["type"] == "turn/end")
    done = run_dsh("sessions", "fork", ident, "--at", str(first_end), cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    found = re.search(r"into (\S+)", done.stdout)
    assert found is not None, done.stdout
    child = found.group(1)
    child_events = [
        json.loads(line)
        for line in run_dsh("sessions", "show", child, "--json", cwd=project, env=dsh_env).stdout.splitlines()
    ]
    assert [e["type"] for e in child_events] == [e["type"] for e in events[: first_end + 1]]
    child_shown = run_dsh("sessions", "show", child, cwd=project, env=dsh_env)
    assert f"forked from {ident}" in child_shown.stdout
    assert "first answer" in child_shown.stdout
    assert "second question" not in child_shown.stdout
    inside = run_dsh("sessions", "fork", ident, "--at", "2", cwd=project, env=dsh_env)
    assert inside.returncode == 2
    assert "turn 1 is open there" in inside.stderr


def test_replay_a_stored_session(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """A stored session replays against the installed plugins: exit 0 on a match, 1 at a divergence."""
    ident = _run(llm, project, dsh_env, "what is up?", "nothing much")
    served = len(llm.requests)
    same = run_dsh("sessions", "replay", ident[:-2], cwd=project, env=dsh_env)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "matches the recording" in same.stdout
    assert len(llm.requests) == served, "a replay never calls the model"
    persona = ("--set", "system-prompt.persona=Answer in French.")
    changed = run_dsh("sessions", "replay", ident, *persona, cwd=project, env=dsh_env)
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "request/header: data.system differs" in changed.stdout
    as_json = run_dsh("sessions", "replay", ident, "--json", *persona, cwd=project, env=dsh_env)
    assert as_json.returncode == 1
    outcome = json.loads(as_json.stdout)
    assert outcome["diverged"] is True
    assert outcome["first_divergence"]["path"] == "data.system"
    assert outcome["first_divergence"]["expected"]["type"] == "request/header"
    assert outcome["recorded_events"] == outcome["replayed_events"]


def test_repair_cuts_a_damaged_session_keeping_a_backup(
    llm: FakeLlm, project: Path, dsh_env: dict[str, str], tmp_path: Path
) -> None:
    """A damaged complete line makes `show` fail naming file and line; `repair` cuts there and keeps the original."""
    ident = _run(llm, project, dsh_env, "first question", "first answer")
    log = next((tmp_path / "sessions").glob("*/session.jsonl"))
    original = log.read_bytes() + b'{"type":"tool/call","seq":999,"time":1.0,"data":{"turn":1}}\n'
    lines = original.split(b"\n")
    log.write_bytes(original)
    broken = run_dsh("sessions", "show", ident, cwd=project, env=dsh_env)
    assert broken.returncode != 0
    assert f"{log}:{len(lines) - 1}:" in broken.stderr
    repaired = run_dsh("sessions", "repair", ident, cwd=project, env=dsh_env)
    assert repaired.returncode == 0, repaired.stderr
    assert f"cut at line {len(lines) - 1}: dropped 1 lines" in repaired.stdout
    (backup,) = log.parent.glob("session.jsonl.damaged-*")
    assert str(backup) in repaired.stdout.replace("\n", "")
    assert backup.read_bytes() == original
    assert log.read_bytes() == b"\n".join(lines[:-2]) + b"\n"
    shown = run_dsh("sessions", "show", ident, cwd=project, env=dsh_env)
    assert shown.returncode == 0, shown.stderr
    assert "first answer" in shown.stdout
    again = run_dsh("sessions", "repair", ident, cwd=project, env=dsh_env)
    assert "nothing to repair" in again.stdout



def test_show_at_a_terminal_renders_markdown(llm: FakeLlm, project: Path, dsh_env: dict[str, str]) -> None:
    """`dsh sessions show ID` at a terminal renders the answers' Markdown; piped it stays plain text."""
    import pexpect

    from .cli_kit import spawn_dsh

    ident = _run(llm, project, dsh_env, "a question", "Some **bold** words")
    piped = run_dsh("sessions", "show", ident, cwd=project, env=dsh_env)
    assert "Some **bold** words" in piped.stdout
    child = spawn_dsh("sessions", "show", ident, cwd=project, env=dsh_env)
    try:
        child.expect(pexpect.EOF)
        shown = str(child.before)
    finally:
        child.close(force=True)
    assert "bold" in shown
    assert "**bold**" not in shown
