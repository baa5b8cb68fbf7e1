"""Plugin subcommands (entry-point group ``dsh.commands``): found, loaded only when used, given the usual configuration."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from .cli_kit import run_dsh

_HELLO = '''
"""A plugin command: prints what the configuration layers say, and exits with --status."""
import argparse
import pathlib

import anyio

import dsh_cli

help = "say hello with the configuration"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--status", type=int, default=0)


async def run(args: argparse.Namespace) -> int:
    config = dsh_cli.config_from_args(args)
    await anyio.sleep(0)
    print("greeting:", config.get("plugins.hello.greeting"), "from", config.origin("plugins.hello.greeting"))
    print("model:", config.model)
    return args.status
'''

_SYNC = """
import pathlib
pathlib.Path(__file__).with_name("sync-imported").write_text("yes")
help = "a synchronous command"
def add_arguments(parser):
    parser.add_argument("word")
def run(args):
    print("sync", args.word)
    return 0
"""


def _install(site: Path, dist: str, modules: dict[str, str], commands: dict[str, str]) -> None:
    """A distribution on ``site`` (a directory on PYTHONPATH): its modules and ``dsh.commands`` entry points."""
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8")
    lines = "".join(f"{name} = {target}\n" for name, target in commands.items())
    (info / "entry_points.txt").write_text(f"[dsh.commands]\n{lines}", encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path, dsh_env: dict[str, str]) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    dsh_env["PYTHONPATH"] = str(path)
    _install(
        path,
        "dsh_hello",
        {
            "dsh_hello_cmd": _HELLO,
            "dsh_sync_cmd": _SYNC,
            "dsh_broken_cmd": "raise ImportError('no such thing')\n",
        },
        {
            "hello": "dsh_hello_cmd",
            "sync": "dsh_sync_cmd",
            "broken": "dsh_broken_cmd",
            "notacommand": "pathlib:Path",
            "run": "dsh_sync_cmd",
        },
    )
    return path


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "dsh.toml").write_text('[plugins.hello]\ngreeting = "hi"\n', encoding="utf-8")
    return root


def test_a_plugin_command_gets_the_layered_configuration(
    site: Path, workdir: Path, dsh_env: dict[str, str]
) -> None:
    """`dsh hello` runs the plugin's async run(); config_from_args sees the project file and --set; its result is the exit status."""
    done = run_dsh("hello", "--status", "7", cwd=workdir, env=dsh_env)
    assert done.returncode == 7, done.stderr
    assert f"greeting: hi from {workdir / 'dsh.toml'}" in done.stdout
    assert "model: deepseek/deepseek-v4-flash" in done.stdout
    flagged = run_dsh("hello", "--set", "hello.greeting=hey", "--model", "x/y", cwd=workdir, env=dsh_env)
    assert flagged.returncode == 2, "--model is not an option of a plugin command"
    flagged = run_dsh("hello", "--set", "hello.greeting=hey", cwd=workdir, env=dsh_env)
    assert flagged.returncode == 0, flagged.stderr
    assert "greeting: hey from --set plugins.hello.greeting" in flagged.stdout


def test_commands_are_loaded_only_when_used(site: Path, workdir: Path, dsh_env: dict[str, str]) -> None:
    """A built-in command imports no plugin command; a broken one breaks only itself, named in one line."""
    assert run_dsh("plugins", cwd=workdir, env=dsh_env).returncode == 0
    assert not (site / "sync-imported").exists(), "a built-in command must not import plugin commands"
    done = run_dsh("sync", "word", cwd=workdir, env=dsh_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "sync word\n"
    assert (site / "sync-imported").exists()
    broken = run_dsh("broken", cwd=workdir, env=dsh_env)
    assert broken.returncode == 3
    assert broken.stderr.count("\n") == 1, broken.stderr
    assert (
        "command 'broken' (dsh_broken_cmd, from dsh_hello 1.0) cannot be loaded: ImportError" in broken.stderr
    )
    wrong = run_dsh("notacommand", cwd=workdir, env=dsh_env)
    assert wrong.returncode == 3
    assert "is not a dsh command: it lacks help, add_arguments, run" in wrong.stderr


def test_help_lists_plugin_commands_and_builtins_win(
    site: Path, workdir: Path, dsh_env: dict[str, str]
) -> None:
    """`dsh --help` lists each plugin command with its help (a broken one says so); `run` stays dsh's own."""
    shown = run_dsh("--help", cwd=workdir, env=dsh_env)
    assert shown.returncode == 0, shown.stderr
    assert "say hello with the configuration" in shown.stdout
    assert "a synchronous command" in shown.stdout
    assert "(cannot be loaded: command 'broken'" in shown.stdout
    own = run_dsh("hello", "--help", cwd=workdir, env=dsh_env)
    assert "--status" in own.stdout
    assert "--config" in own.stdout
    assert "--set" in own.stdout
    listed = run_dsh("plugins", cwd=workdir, env=dsh_env)
    assert "dsh hello  (dsh_hello 1.0, dsh_hello_cmd)" in listed.stdout
    assert "dsh run  (dsh_hello 1.0, dsh_sync_cmd)  (ignored: a dsh command has this name)" in listed.stdout
    run_help = run_dsh("run", "--help", cwd=workdir, env=dsh_env)
    assert "--json" in run_help.stdout, "dsh run is the built-in, not the plugin's `run`"
