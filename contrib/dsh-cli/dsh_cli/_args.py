"""The command line of ``dsh``: subcommands, their options, and the help text users read first."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ._commands import Command, CommandLoadError

__all__ = ["BUILTIN_COMMANDS", "MODES", "SESSION_VERBS", "build_parser", "config_options"]

#: The permission modes of dsh-permissions (``--mode``, ``DSH_MODE``, ``/mode``).
MODES: Final = ("read-only", "workspace-write", "full-access")

_DESCRIPTION = """\
dsh: an extensible LLM agent in your terminal.

  dsh demo                     an offline tour (no API key needed)
  dsh run "fix the failing test"   one turn: answer on stdout, tool activity on stderr
  dsh chat                     an interactive session (the default with no command)
  dsh sessions list            stored sessions; show, resume or delete one
  dsh config                   the effective configuration and where each value came from
  dsh plugins                  the installed plugins (and the commands they add)
  dsh models                   the configured providers and models
"""

_EPILOG = """\
configuration (lowest precedence first): built-in defaults, $XDG_CONFIG_HOME/dsh/config.toml,
the project's dsh.toml or [tool.dsh] in pyproject.toml, the environment (DSH_MODEL, DSH_MODE,
DSH_SESSIONS_DIR), then flags. API keys come only from the environment (DEEPSEEK_API_KEY, ...).
"""


_CHAT_KEYS = """\
keys:
  Enter              send the prompt (while the agent works: steer it)
  Alt-Enter, Ctrl-J  a new line in the prompt
  Tab                complete a /command, or a workspace path after @
  Up, Down           the prompts typed before (an open question: choose the answer)
  Space              (an ask_user question with several answers) tick the highlighted option
  Esc, Ctrl-C        deny an open question and cancel the turn, else cancel the running turn
                     (Ctrl-C idle: clear the line; twice on an empty prompt: exit)
  Ctrl-D             exit (on an empty prompt)

in a prompt:
  @PATH              attach that workspace file's text
  !COMMAND           run a shell command (same mode and sandbox); its output joins the context
  /help              the commands: /new /clear /resume /sessions /model /mode /compact /reasoning
                     /last /undo /exit
"""

#: The commands dsh itself has; a plugin command of the same name is not offered.
BUILTIN_COMMANDS: Final = (
    "run", "chat", "sessions", "plugins", "config", "models", "completion", "demo"
)  # fmt: skip

#: The verbs of ``dsh sessions``; each has a parser in ``_sessions_parsers`` and a function in ``_sessions``.
SESSION_VERBS: Final = ("list", "show", "resume", "fork", "delete", "replay", "repair")


def config_options() -> argparse.ArgumentParser:
    """Options every command that reads the configuration takes (after the command name)."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("configuration")
    group.add_argument(
        "--config", metavar="PATH", help="use this dsh.toml/pyproject.toml instead of searching"
    )
    group.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="assignments",
        help="set a configuration value, e.g. --set retry.max_attempts=2 (repeatable)",
    )
    return parent


def _agent_options() -> argparse.ArgumentParser:
    """Options of the commands that run an agent."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("agent")
    group.add_argument(
        "-m", "--model", metavar="PROVIDER/MODEL", help="the model, e.g. deepseek/deepseek-v4-flash"
    )
    group.add_argument("--mode", choices=MODES, help="the permission mode for tools")
    group.add_argument(
        "--cwd", metavar="DIR", help="the workspace directory (default: the current directory)"
    )
    return parent


def _session_options() -> argparse.ArgumentParser:
    """Which session ``run`` and ``chat`` work in: a new one, a stored one, or this workspace's latest."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("session").add_mutually_exclusive_group()
    group.add_argument(
        "-r", "--resume", metavar="ID", help="continue a stored session (an id or a unique prefix)"
    )
    group.add_argument(
        "-c",
        "--continue",
        dest="continue_latest",
        action="store_true",
        help="continue the most recent session of this workspace",
    )
    return parent


def _sessions_parsers(
    sessions: argparse.ArgumentParser, config: argparse.ArgumentParser, agent: argparse.ArgumentParser
) -> None:
    """``dsh sessions VERB``: one parser per verb of ``SESSION_VERBS`` (add a verb here and in ``_sessions``)."""
    verbs = sessions.add_subparsers(dest="verb", metavar="VERB")
    verbs.add_parser("list", parents=[config], help="the stored sessions, newest first")
    show = verbs.add_parser("show", parents=[config], help="print a stored session's history")
    show.add_argument("id", help="a session id or a unique prefix")
    show.add_argument("--json", action="store_true", help="print its events as JSON lines")
    resume = verbs.add_parser("resume", parents=[config, agent], help="continue a stored session in a chat")
    resume.add_argument("id", help="a session id or a unique prefix")
    fork = verbs.add_parser(
        "fork", parents=[config], help="copy a stored session (up to an event) into a new one"
    )
    fork.add_argument("id", help="a session id or a unique prefix")
    fork.add_argument(
        "--at", type=int, metavar="SEQ", help="keep the events up to and including SEQ (default: all)"
    )
    delete = verbs.add_parser("delete", parents=[config], help="delete a stored session")
    delete.add_argument("id", help="a session id or a unique prefix")
    replay = verbs.add_parser(
        "replay",
        parents=[config],
        help="re-run a stored session with the installed plugins; exit 1 where it diverges",
    )
    replay.add_argument("id", help="a session id or a unique prefix")
    replay.add_argument(
        "--live-tools", action="store_true", help="run the tools for real (default: recorded results)"
    )
    replay.add_argument("--json", action="store_true", help="print the outcome as one JSON object")
    repair = verbs.add_parser(
        "repair",
        parents=[config],
        help="cut a damaged session before its first damaged line (keeps a backup)",
    )
    repair.add_argument("id", help="a session id or a unique prefix")


def build_parser(
    plugin_commands: Mapping[str, Command | CommandLoadError] | None = None,
) -> argparse.ArgumentParser:
    """The ``dsh`` argument parser, with the ``plugin_commands`` given (loaded, or why they are not)."""
    config = config_options()
    agent = _agent_options()
    session = _session_options()
    parser = argparse.ArgumentParser(
        prog="dsh",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        parents=[config, agent, session],
        help="run one turn and exit",
        description="Run one turn. The answer streams to stdout, tool activity to stderr; the exit "
        "status says how the turn ended (0 completed, 1 error, 3 setup, 4 max-tokens, 5 stopped, "
        "6 rejected, 130 cancelled with Ctrl-C). Text piped to stdin is added to the prompt as context.",
    )
    run.add_argument("prompt", nargs="?", help="the prompt; '-' or nothing reads it from stdin")
    run.add_argument("--json", action="store_true", help="print every session event as one JSON line instead")
    run.add_argument(
        "--plain", action="store_true", help="print the answer as plain text, also at a terminal"
    )
    run.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="answer every approval question with 'allow once' (each is reported on stderr); for unattended runs",
    )

    chat = commands.add_parser(
        "chat",
        parents=[config, agent, session],
        help="an interactive session",
        description="An interactive session. Type while the agent works to steer it; /help lists the commands.",
        epilog=_CHAT_KEYS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chat.add_argument(
        "--temporal", action="store_true", help="drive a session hosted on Temporal ([plugins.temporal], dsh-temporal)"
    )

    sessions = commands.add_parser(
        "sessions", help="list, show, resume, fork, delete or repair stored sessions"
    )
    _sessions_parsers(sessions, config, agent)

    commands.add_parser("plugins", parents=[config], help="the installed plugins and what they provide")
    show_config = commands.add_parser(
        "config", parents=[config, agent], help="the effective configuration and where each value came from"
    )
    show_config.add_argument("--json", action="store_true", help="print it as JSON (values and origins)")
    config_verbs = show_config.add_subparsers(dest="config_verb", metavar="VERB")
    init = config_verbs.add_parser(
        "init", help="write a commented dsh.toml in the current directory (or --cwd)"
    )
    init.add_argument("--force", action="store_true", help="replace an existing dsh.toml")

    commands.add_parser(
        "models", parents=[config], help="the configured providers and models, with their context windows"
    )
    completion = commands.add_parser("completion", help="print a shell completion script (bash, zsh or fish)")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"))

    demo = commands.add_parser(
        "demo",
        help="an offline tour: a scripted model fixes a bug in a temporary workspace",
        description="A scripted model (no API key, no network) fixes a bug in a temporary workspace "
        "through the real loop, tools, permissions and persistence, then the session is resumed "
        "from disk and its history shown.",
    )
    demo.add_argument(
        "--keep", metavar="DIR", help="keep the workspace and sessions in DIR (default: a temp dir)"
    )
    demo.add_argument(
        "--pace", type=float, default=0.006, metavar="SECONDS", help="delay between streamed chunks (0: none)"
    )
    for name, command in (plugin_commands or {}).items():
        if name in BUILTIN_COMMANDS:
            continue
        if isinstance(command, Exception):
            commands.add_parser(name, help=f"(cannot be loaded: {command})")
            continue
        sub = commands.add_parser(name, parents=[config], help=command.help, description=command.help)
        command.add_arguments(sub)
    return parser
