"""``dsh --version``, ``dsh models``, ``dsh completion`` and ``dsh config init``."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from .cli_kit import FakeLlm, run_dsh


def test_version(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """`dsh --version` prints the distribution's version and exits 0."""
    done = run_dsh("--version", cwd=tmp_path, env=dsh_env)
    assert done.returncode == 0
    assert done.stdout.startswith("dsh 0.")


def test_models_lists_providers_models_and_windows(
    project: Path, llm: FakeLlm, dsh_env: dict[str, str]
) -> None:
    """`dsh models`: each configured model with its context window, output limit and prices, the default marked."""
    done = run_dsh("models", cwd=project, env=dsh_env)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if "local/fake" in line)
    assert line.split()[:5] == ["*", "local/fake", "32k", "4k", "-"]  # no price known
    assert "not needed" in line
    builtin = next(line for line in done.stdout.splitlines() if "deepseek/deepseek-v4-flash" in line)
    assert "DEEPSEEK_API_KEY (not set)" in builtin
    assert "0.15 / 0.60" in builtin  # the model table's price per million tokens


def _complete(script: str, *words: str) -> list[str]:
    """What bash completes for ``words`` (the last one being typed) with ``script`` loaded."""
    line = " ".join(words)
    program = f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _dsh; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True, timeout=30)
    return done.stdout.split()


def test_bash_completion_completes_commands_verbs_and_options(
    tmp_path: Path, dsh_env: dict[str, str]
) -> None:
    """The bash script, loaded in a real bash, completes commands, `sessions` verbs and each command's options."""
    script = run_dsh("completion", "bash", cwd=tmp_path, env=dsh_env).stdout
    assert _complete(script, "dsh", "ses") == ["sessions"]
    assert _complete(script, "dsh", "sessions", "f") == ["fork"]
    assert _complete(script, "dsh", "sessions", "fork", "--") == ["--at", "--config", "--help", "--set"]
    assert "--plain" in _complete(script, "dsh", "run", "--p")


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_name_every_command(tmp_path: Path, dsh_env: dict[str, str], shell: str) -> None:
    """The zsh and fish scripts cover the same commands (and parse, where the shell is installed)."""
    done = run_dsh("completion", shell, cwd=tmp_path, env=dsh_env)
    assert done.returncode == 0
    for command in ("run", "chat", "sessions", "models", "completion", "config"):
        assert command in done.stdout
    binary = shutil.which(shell)
    if binary is not None:
        check = ["zsh", "-n"] if shell == "zsh" else ["fish", "--no-execute"]
        script = tmp_path / f"dsh.{shell}"
        script.write_text(done.stdout, encoding="utf-8")
        assert subprocess.run([*check, str(script)], capture_output=True, timeout=30).returncode == 0


def test_config_init_writes_a_commented_file_once(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """`dsh config init` writes a valid dsh.toml that sets only the model; a second run refuses, --force replaces."""
    done = run_dsh("config", "init", cwd=tmp_path, env=dsh_env)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "dsh.toml").read_text(encoding="utf-8")
    assert tomllib.loads(text) == {"plugins": {"cli": {"model": "deepseek/deepseek-v4-flash"}}}
    assert "# max_attempts = 5" in text, "the other plugins' defaults are there, commented out"
    assert "# [plugins.retry]" in text
    shown = run_dsh("config", cwd=tmp_path, env=dsh_env)
    assert shown.returncode == 0, shown.stderr
    again = run_dsh("config", "init", cwd=tmp_path, env=dsh_env)
    assert again.returncode == 2
    assert "--force" in again.stderr
    assert run_dsh("config", "init", "--force", cwd=tmp_path, env=dsh_env).returncode == 0


def test_a_bad_option_is_reported_by_its_command(tmp_path: Path, dsh_env: dict[str, str]) -> None:
    """`dsh run --bogus` prints `dsh run`'s usage and error (not dsh's); config has no --resume; chat lists its keys."""
    done = run_dsh("run", "--bogus", "hi", cwd=tmp_path, env=dsh_env)
    assert done.returncode == 2
    assert done.stderr.startswith("usage: dsh run ")
    assert "dsh run: error: unrecognized arguments: --bogus" in done.stderr
    shown = run_dsh("sessions", "show", "--bogus", "x", cwd=tmp_path, env=dsh_env)
    assert shown.returncode == 2
    assert shown.stderr.startswith("usage: dsh sessions show ")
    config_help = run_dsh("config", "--help", cwd=tmp_path, env=dsh_env)
    assert "--resume" not in config_help.stdout
    assert "--continue" not in config_help.stdout
    chat_help = run_dsh("chat", "--help", cwd=tmp_path, env=dsh_env).stdout
    for key in ("Esc, Ctrl-C", "Tab", "Alt-Enter", "Ctrl-D", "@PATH", "!COMMAND", "-c, --continue"):
        assert key in chat_help, key
    assert "-y, --yes" in run_dsh("run", "--help", cwd=tmp_path, env=dsh_env).stdout
