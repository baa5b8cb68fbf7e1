"""``dsh``'s entry point: parse the command line, layer the configuration, run the command, map failures to exit statuses."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.text import Text

from dsh_core import ConfigError, DshError

from ._args import build_parser
from ._config import EffectiveConfig, Overrides, load_config, parse_assignment
from ._exit import CliError, ExitCode
from ._launch import resolve_cwd

__all__ = ["main"]


def _version() -> str:
    try:
        return version("dsh-cli")
    except PackageNotFoundError:  # running from a source tree
        return "unknown"


def _report(error: BaseException, config: EffectiveConfig | None) -> int:
    """Print ``error`` as ``dsh: ...`` on stderr and return its exit status."""
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    if isinstance(error, CliError):
        console.print(Text(f"dsh: {error}", style="red"))
        if error.hint:
            console.print(Text(f"     {error.hint}", style="dim"))
        return int(error.code)
    if isinstance(error, ConfigError):
        text = config.explain(error) if config is not None else str(error)
        console.print(Text(f"dsh: {text}", style="red"))
        return int(ExitCode.SETUP)
    console.print(Text(f"dsh: {error}", style="red"))
    return int(ExitCode.SETUP)


def _expected(error: BaseException) -> BaseException | None:
    """The user-facing error in ``error`` (also when a task group wrapped it), else ``None``."""
    if isinstance(error, CliError | ConfigError | DshError):
        return error
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        return _expected(error.exceptions[0])
    return None


def _run_async(fn: Callable[..., Awaitable[int]], *args: Any, **kwargs: Any) -> int:
    async def runner() -> int:
        return await fn(*args, **kwargs)

    return anyio.run(runner, backend="asyncio")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dsh`` with ``argv`` (default: ``sys.argv[1:]``) and return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(f"dsh {_version()}")
        return int(ExitCode.OK)
    command = args.command
    if command is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            parser.print_help()
            return int(ExitCode.USAGE)
        command = "chat"
        args = parser.parse_args(["chat"])
    if command == "demo":
        from ._demo import run_demo

        return run_demo(keep=Path(args.keep) if args.keep else None, pace=max(0.0, args.pace))
    if command == "sessions" and args.verb is None:
        parser.parse_args(["sessions", "--help"])
    config: EffectiveConfig | None = None
    try:
        cwd = resolve_cwd(getattr(args, "cwd", None))
        try:
            assignments = tuple(parse_assignment(text) for text in args.assignments)
        except ValueError as exc:
            raise CliError(f"--set: {exc}", code=ExitCode.USAGE) from exc
        overrides = Overrides(
            model=getattr(args, "model", None), mode=getattr(args, "mode", None), assignments=assignments
        )
        config = load_config(
            cwd=cwd, overrides=overrides, config_file=Path(args.config) if args.config else None
        )
        return _dispatch(command, args, config, cwd)
    except KeyboardInterrupt:
        return int(ExitCode.INTERRUPTED)
    except BaseException as error:
        expected = _expected(error)
        if expected is None:
            raise
        return _report(expected, config)


def _dispatch(command: str, args: Any, config: EffectiveConfig, cwd: Path) -> int:
    if command == "run":
        from ._run import run_command

        prompt = args.prompt
        if prompt is None or prompt == "-":
            if sys.stdin.isatty():
                msg = 'no prompt: give one (dsh run "..."), or pipe it in (echo ... | dsh run)'
                raise CliError(msg, code=ExitCode.USAGE)
            prompt = sys.stdin.read()
        if not prompt.strip():
            raise CliError("the prompt is empty", code=ExitCode.USAGE)
        return _run_async(
            run_command, config, prompt=prompt, cwd=cwd, resume=args.resume, json_lines=args.json
        )
    if command == "chat":
        from ._chat import chat_command

        return _run_async(chat_command, config, cwd=cwd, resume=args.resume)
    if command == "sessions":
        from . import _sessions

        if args.verb == "resume":
            from ._chat import chat_command

            return _run_async(chat_command, config, cwd=cwd, resume=args.id)
        return _run_async(
            _sessions.sessions_command,
            config,
            verb=args.verb,
            ident=getattr(args, "id", None),
            json_lines=getattr(args, "json", False),
        )
    if command == "plugins":
        from ._inspect import plugins_command

        return plugins_command(config)
    if command == "config":
        from ._inspect import config_command

        return config_command(config, json_output=args.json)
    msg = f"unknown command {command!r}"
    raise CliError(msg, code=ExitCode.USAGE)
