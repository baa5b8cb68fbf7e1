"""Subcommands that installed plugins add to ``dsh``: the entry-point group ``dsh.commands``, loaded only when used.

A distribution declares one entry point per command; its name is the subcommand and its value an
object (a module is fine) with ``help: str``, ``add_arguments(parser)`` and ``run(args)``, which
returns the exit status or an awaitable of it. ``dsh`` adds ``--config`` and ``--set`` to the
command's parser first, so ``dsh_cli.config_from_args(args)`` builds the usual configuration.

Entry points are listed (their names only) for ``dsh --help``, completion and ``dsh plugins``; a
command's module is imported only when that command runs or its help is printed, so an installed
command costs ``dsh run`` nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Final, Protocol, runtime_checkable

from ._exit import ExitCode

__all__ = ["COMMAND_GROUP", "Command", "CommandLoadError", "command_entry_points", "load_command"]

#: The entry-point group of plugin subcommands.
COMMAND_GROUP: Final = "dsh.commands"


@runtime_checkable
class Command(Protocol):
    """What a ``dsh.commands`` entry point names."""

    #: one line for ``dsh --help`` and the command's own help
    help: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's own arguments (``--config`` and ``--set`` are there already)."""

    def run(self, args: argparse.Namespace) -> int | Awaitable[int]:
        """Do the command; the result (awaited when awaitable, on asyncio) is the exit status."""


class CommandLoadError(Exception):
    """A ``dsh.commands`` entry point that cannot be imported or is not a command."""

    def __init__(self, message: str, *, name: str, code: ExitCode = ExitCode.SETUP) -> None:
        super().__init__(message)
        self.name = name
        self.code = code


def command_entry_points() -> Mapping[str, EntryPoint]:
    """The installed plugin commands by name, without importing any of them (the first of a name wins)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=COMMAND_GROUP):
        found.setdefault(ep.name, ep)
    return found


def _distribution(ep: EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"


def load_command(ep: EntryPoint) -> Command:
    """Import the object ``ep`` names and check that it is a command.

    :raises CommandLoadError: naming the command, its distribution and what is wrong.
    """
    where = f"command {ep.name!r} ({ep.value}, from {_distribution(ep)})"
    try:
        loaded = ep.load()
    except Exception as exc:
        msg = f"{where} cannot be loaded: {type(exc).__name__}: {exc}"
        raise CommandLoadError(msg, name=ep.name) from exc
    missing = [
        attribute
        for attribute, check in (
            ("help", lambda v: isinstance(v, str)),
            ("add_arguments", callable),
            ("run", callable),
        )
        if not check(getattr(loaded, attribute, None))
    ]
    if missing:
        msg = (
            f"{where} is not a dsh command: it lacks {', '.join(missing)} "
            "(a command has help: str, add_arguments(parser) and run(args))"
        )
        raise CommandLoadError(msg, name=ep.name)
    command: Command = loaded
    return command
