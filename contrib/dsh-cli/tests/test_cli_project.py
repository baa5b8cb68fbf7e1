"""Project instructions (AGENTS.md) and the facts of the workspace reach the model in the system prompt."""

from __future__ import annotations

import datetime
import shutil
import subprocess
from pathlib import Path

import pytest

from .cli_kit import FakeLlm, project_toml, run_dsh


def _system(llm: FakeLlm, index: int = 0) -> str:
    messages = llm.messages(index)
    assert messages[0]["role"] == "system"
    return str(messages[0]["content"])


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_agents_md_from_the_git_root_down_and_the_users_own(
    tmp_path: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    """~/.config/dsh/AGENTS.md first, then each AGENTS.md from the git root to the workspace, nearest last;
    none above the git root; the prompt names the directory, the date and the branch."""
    above = tmp_path / "above"
    repo = above / "repo"
    work = repo / "pkg" / "sub"
    work.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "feature-x", str(repo)], check=True)
    (above / "AGENTS.md").write_text("ABOVE THE REPO: never read\n", encoding="utf-8")
    (repo / "AGENTS.md").write_text("ROOT RULE: use tabs {{not a variable}}\n", encoding="utf-8")
    (repo / "pkg" / "AGENTS.md").write_text("PKG RULE: run make check\n", encoding="utf-8")
    (work / "AGENTS.md").write_text("SUB RULE: spaces here\n", encoding="utf-8")
    user = Path(dsh_env["XDG_CONFIG_HOME"]) / "dsh"
    user.mkdir(parents=True)
    (user / "AGENTS.md").write_text("USER RULE: answer briefly\n", encoding="utf-8")
    (work / "dsh.toml").write_text(project_toml(llm.base_url, tmp_path / "sessions"), encoding="utf-8")
    llm.text("ok")
    done = run_dsh("run", "hi", cwd=work, env=dsh_env)
    assert done.returncode == 0, done.stderr
    system = _system(llm)
    order = [system.index(rule) for rule in ("USER RULE", "ROOT RULE", "PKG RULE", "SUB RULE")]
    assert order == sorted(order), system
    assert "ABOVE THE REPO" not in system
    assert "{{not a variable}}" in system, "an AGENTS.md is text, not a prompt template"
    assert f"Working directory (the workspace; relative paths are from here): {work}" in system
    assert datetime.date.today().isoformat() in system
    assert f"root {repo}, branch feature-x" in system


def test_outside_a_repository_the_prompt_says_so(
    project: Path, dsh_env: dict[str, str], llm: FakeLlm
) -> None:
    """No git, no AGENTS.md: the environment section says it is not a repository and no instructions appear."""
    llm.text("ok")
    done = run_dsh("run", "hi", cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    system = _system(llm)
    assert "Git repository: no" in system
    assert "Project instructions" not in system
    (project / "AGENTS.md").write_text("LOCAL RULE: be nice\n", encoding="utf-8")
    llm.text("ok")
    again = run_dsh("run", "hi", cwd=project, env=dsh_env)
    assert again.returncode == 0, again.stderr
    assert "LOCAL RULE: be nice" in _system(llm, 1)
