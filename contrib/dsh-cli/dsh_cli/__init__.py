"""The ``dsh`` command: ``run`` one turn, ``chat`` in the terminal, manage ``sessions``, and an offline ``demo``.

``main`` is the console script; ``CliPlugin`` (entry point ``cli``) owns the ``[plugins.cli]``
table and, inside the command, provides the ``approval`` service. Plugin commands
(entry-point group ``dsh.commands``) build their configuration with ``config_from_args`` and start
the harness with ``open_harness``. Names are imported on first use, so ``import dsh_cli`` (and
``dsh --version``) does not import the harness.
"""

# Not `from typing import TYPE_CHECKING`: typing (and the collections, re and functools it imports)
# would be most of what `import dsh_cli` costs. mypy and pyright read a module's own TYPE_CHECKING
# as typing's (the idiom PEP 781 builds on).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._commands import COMMAND_GROUP as COMMAND_GROUP
    from ._commands import Command as Command
    from ._config import EffectiveConfig as EffectiveConfig
    from ._config import config_from_args as config_from_args
    from ._errors import CliError as CliError
    from ._exit import ExitCode as ExitCode
    from ._launch import open_harness as open_harness
    from ._main import main as main
    from ._plugin import CliConfig as CliConfig
    from ._plugin import CliPlugin as CliPlugin

del TYPE_CHECKING  # not part of the front

__all__ = [
    "COMMAND_GROUP",
    "CliConfig",
    "CliError",
    "CliPlugin",
    "Command",
    "EffectiveConfig",
    "ExitCode",
    "config_from_args",
    "main",
    "open_harness",
]

_HOMES = {
    "COMMAND_GROUP": "._commands",
    "Command": "._commands",
    "EffectiveConfig": "._config",
    "config_from_args": "._config",
    "CliError": "._errors",
    "ExitCode": "._exit",
    "open_harness": "._launch",
    "main": "._main",
    "CliConfig": "._plugin",
    "CliPlugin": "._plugin",
}


def __getattr__(name: str) -> "Any":  # a string: Any is imported for type checkers only
    home = _HOMES.get(name)
    if home is None:
        msg = f"module 'dsh_cli' has no attribute {name!r}"
        raise AttributeError(msg)
    from importlib import import_module

    value = getattr(import_module(home, __name__), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
