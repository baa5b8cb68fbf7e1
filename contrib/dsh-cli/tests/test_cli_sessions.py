"""``dsh sessions list | show | delete`` and ``dsh plugins``."""

from __future__ import annotations

import re
from pathlib import Path

from .cli_kit import FakeLlm, run_dsh


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
    assert "1 turns" in shown.stdout
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
    assert "dsh-cli" in done.stdout
