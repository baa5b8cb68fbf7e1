"""``dsh``'s entry point: parse the command line, layer the configuration, run the command, map failures to exit statuses.

Only the standard library is imported up front: each command imports what it needs when it runs,
so ``dsh --version``, ``dsh --help`` and shell completion stay fast and ``dsh run`` pays only for
the harness. Plugin commands (``dsh.commands``) are imported only when named, or for ``--help``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._args import BUILTIN_COMMANDS, build_parser
from ._exit import ExitCode

if TYPE_CHECKING:
    import argparse

    from ._commands import Command, CommandLoadError

__all__ = ["main"]

#: what is appended to the prompt around text piped to ``dsh run``
_CONTEXT_OPEN = "<stdin>"
_CONTEXT_CLOSE = "</stdin>"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dsh-harness-cli")
    except PackageNotFoundError:  # running from a source tree
        return "unknown"


def _report(error: BaseException) -> int:
    """Print ``error`` as ``dsh: ...`` on stderr and return its exit status."""
    from rich.console import Console
    from rich.text import Text

    from ._sanitize import clean

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(Text(f"dsh: {clean(str(error))}", style="red"))
    hint = getattr(error, "hint", None)
    if hint:
        console.print(Text(f"     {clean(hint)}", style="dim"))
    if getattr(error, "source", None) == "--set":
        return int(ExitCode.USAGE)
    return int(getattr(error, "code", ExitCode.SETUP))


def _expected(error: BaseException) -> BaseException | None:
    """The user-facing error in ``error`` (also when a task group wrapped it), else ``None``."""
    from ._commands import CommandLoadError

    if isinstance(error, CommandLoadError):
        return error
    if "dsh_core" in sys.modules:
        from dsh_core import DshError

        if isinstance(error, DshError):  # CliError and ConfigError are DshErrors
            return error
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        return _expected(error.exceptions[0])
    return None


def _run_async(fn: Callable[..., Awaitable[int]], *args: Any, **kwargs: Any) -> int:
    import anyio

    async def runner() -> int:
        return await fn(*args, **kwargs)

    return anyio.run(runner, backend="asyncio", backend_options=event_loop_options())


def event_loop_options() -> dict[str, bool]:
    """anyio's asyncio options for a command: uvloop's event loop when it is installed.

    Every streamed chunk is a wake-up of the event loop, and uvloop's (libuv, in C) costs a
    fraction of asyncio's own (``docs/plugins/openai.md``, "Transports", has the figures).
    """
    import importlib.util

    return {"use_uvloop": importlib.util.find_spec("uvloop") is not None}


def _command_name(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (``dsh`` itself has no option values)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _plugin_commands(argv: Sequence[str]) -> dict[str, Command | CommandLoadError]:
    """The plugin commands the parser needs for ``argv``: none for a built-in, the named one, or all (help).

    Without a command and without ``-h``/``--help`` none are loaded (``dsh --version``, or ``dsh``
    going on to chat or to run piped input): ``_dispatch`` loads them all if it prints the help.
    """
    name = _command_name(argv)
    if name is None and not {"-h", "--help"} & set(argv):
        return {}
    name = name or ""
    if name in BUILTIN_COMMANDS:
        return {}
    from ._commands import CommandLoadError, command_entry_points, load_command

    available = command_entry_points()
    if name not in available:
        _missing_command(name)
    wanted = [name] if name in available else list(available)  # no or an unknown command: the help lists all
    loaded: dict[str, Command | CommandLoadError] = {}
    each: str
    for each in wanted:
        try:
            loaded[each] = load_command(available[each])
        except CommandLoadError as exc:
            if each == name:
                raise
            loaded[each] = exc
    return loaded


def _missing_command(name: str) -> None:
    """:raises CommandLoadError: when ``name`` is a command of a contrib plugin that is not installed."""
    from ._commands import CommandLoadError
    from ._install_hints import COMMAND_PLUGINS, install_hint

    plugin = COMMAND_PLUGINS.get(name)
    if plugin is not None:
        msg = f"dsh {name} comes with the {plugin} plugin, which is not installed: {install_hint(plugin)}"
        raise CommandLoadError(msg, name=name)


def _piped_stdin() -> str | None:
    """What was piped to stdin (a pipe or a file, read to the end), or ``None`` for a terminal or nothing."""
    import stat

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
        return None
    return sys.stdin.read()


def run_prompt(argument: str | None, piped: str | None) -> str:
    """The prompt of ``dsh run``: the argument, with piped text appended as context; ``-``/none: stdin is the prompt.

    :raises CliError: when there is no prompt at all.
    """
    from ._errors import CliError

    if argument is None or argument == "-":
        if piped is None:
            msg = 'no prompt: give one (dsh run "..."), or pipe it in (echo ... | dsh run)'
            raise CliError(msg, code=ExitCode.USAGE)
        prompt = piped
    elif piped is not None and piped.strip():
        prompt = f"{argument}\n\n{_CONTEXT_OPEN}\n{piped.rstrip()}\n{_CONTEXT_CLOSE}"
    else:
        prompt = argument
    if not prompt.strip():
        raise CliError("the prompt is empty", code=ExitCode.USAGE)
    return prompt


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dsh`` with ``argv`` (default: ``sys.argv[1:]``) and return its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        plugin_commands = _plugin_commands(argv)
        parser = build_parser(plugin_commands)
        args, extra = parser.parse_known_args(argv)
        if extra:  # said by the command they were given to, with its usage (not dsh's)
            _innermost(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
        if args.version:
            print(f"dsh {_version()}")
            return int(ExitCode.OK)
        return _dispatch(parser, args, plugin_commands)
    except KeyboardInterrupt:
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except BaseException as error:
        if _only(error, BrokenPipeError):  # closed while a task group was open
            return _quiet_broken_pipe()
        expected = _expected(error)
        if expected is None:
            raise
        return _report(expected)


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` chose: ``dsh sessions show``'s, ``dsh run``'s, or ``dsh``'s."""
    import argparse

    for attribute in ("command", "verb", "config_verb"):
        chosen = getattr(args, attribute, None)
        subparsers = next(
            (a for a in parser._actions if isinstance(a, argparse._SubParsersAction)),  # no public accessor
            None,
        )
        if chosen is None or subparsers is None or chosen not in subparsers.choices:
            continue
        parser = subparsers.choices[chosen]
    return parser


def _only(error: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``error`` is ``kind``, or a group holding nothing else."""
    if isinstance(error, BaseExceptionGroup):
        return all(_only(inner, kind) for inner in error.exceptions)
    return isinstance(error, kind)


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (``| head``): exit quietly, without Python's flush error at shutdown."""
    from ._stdout import silence_stdout

    silence_stdout()
    return int(ExitCode.BROKEN_PIPE)


def _dispatch(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    plugin_commands: Mapping[str, Command | CommandLoadError],
) -> int:
    command = args.command
    if command is None:
        piped = _piped_stdin()
        if piped is not None and piped.strip():  # `echo prompt | dsh`
            args = parser.parse_args(["run", "-"])
            return _run(args, piped)
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            build_parser(_plugin_commands(["--help"])).print_help()  # the help lists every command
            return int(ExitCode.USAGE)
        command = "chat"
        args = parser.parse_args(["chat"])
    if command == "demo":
        from ._demo import run_demo

        return run_demo(keep=Path(args.keep) if args.keep else None, pace=max(0.0, args.pace))
    if command == "completion":
        from ._completion import completion_script

        sys.stdout.write(completion_script(args.shell, parser))
        return int(ExitCode.OK)
    if command == "sessions" and args.verb is None:
        parser.parse_args(["sessions", "--help"])
    if command in plugin_commands:
        return _plugin(plugin_commands[command], args)
    if command == "run":
        return _run(args, _piped_stdin())
    from ._config import config_from_args
    from ._launch import resolve_cwd

    cwd = resolve_cwd(getattr(args, "cwd", None))
    config = config_from_args(args, cwd=cwd)
    if command == "chat" and getattr(args, "temporal", False):  # the agent source: a session on Temporal
        from ._temporal_chat import temporal_chat_command

        if args.continue_latest:
            from ._errors import CliError

            raise CliError("--continue is not available with --temporal; give --resume ID", code=ExitCode.USAGE)

        return _run_async(temporal_chat_command, config, cwd=cwd, resume=args.resume)
    if command == "chat":
        from ._chat import chat_command

        return _run_async(
            chat_command, config, cwd=cwd, resume=args.resume, continue_latest=args.continue_latest
        )
    if command == "sessions" and args.verb == "resume":
        from ._chat import chat_command

        return _run_async(chat_command, config, cwd=cwd, resume=args.id)
    if command == "sessions":
        from . import _sessions

        return _run_async(_sessions.sessions_command, config, args, cwd=cwd)
    if command == "plugins":
        from ._inspect import plugins_command

        return plugins_command(config)
    if command == "models":
        from ._inspect import models_command

        return _run_async(models_command, config)
    if command == "config" and args.config_verb == "init":
        from ._config_init import config_init

        return config_init(cwd, force=args.force)
    if command == "config":
        from ._inspect import config_command

        return config_command(config, json_output=args.json)
    from ._errors import CliError

    msg = f"unknown command {command!r}"
    raise CliError(msg, code=ExitCode.USAGE)


def _run(args: argparse.Namespace, piped: str | None) -> int:
    from ._config import config_from_args
    from ._launch import resolve_cwd
    from ._run import run_command

    cwd = resolve_cwd(args.cwd)
    prompt = run_prompt(args.prompt, piped)
    config = config_from_args(args, cwd=cwd)
    return _run_async(
        run_command,
        config,
        prompt=prompt,
        cwd=cwd,
        resume=args.resume,
        continue_latest=args.continue_latest,
        json_lines=args.json,
        plain=args.plain,
        yes=args.yes,
    )


def _plugin(command: Command | CommandLoadError, args: argparse.Namespace) -> int:
    """Run a plugin's command; an awaitable result is awaited on asyncio."""
    if isinstance(command, Exception):
        raise command
    import inspect

    result = command.run(args)
    if inspect.isawaitable(result):

        async def wait() -> int:
            return int(await result)

        return _run_async(wait)
    return int(result)  # a command may return any int-like status
