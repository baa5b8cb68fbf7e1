"""A shell command made ready to start the way ``bash`` starts it: the shell found, the sandbox asked,
the environment cleaned.

``bash`` and the plugins that run commands of their own (background jobs) share it, so the same
command runs in the same confinement and environment whichever tool started it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from dsh_core import ToolExecution

from ._command_env import COMMAND_ENV
from ._paths import WorkspaceError
from ._seams import SANDBOX_SERVICE, Confined

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["ConfinedCommand", "command_environment", "confined_command"]

#: environment for commands: no pager waits for a key, no git prompt waits for a password
_QUIET_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}

#: names of variables that hold credentials: never handed to a command the model wrote
_SECRET_NAME = re.compile(
    r"(API_KEY|_TOKEN|_SECRET|PASSWORD|ACCESS_KEY|PRIVATE_KEY)$|^(AWS|AZURE|GCP)_", re.IGNORECASE
)


def command_environment(parent: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a ``bash`` command runs with: the harness's, minus credentials, plus no pagers,
    plus ``extra`` (what a plugin set in ``COMMAND_ENV`` for this call).

    The model reads everything a command prints, and the session log keeps it: an API key in the
    environment would end up in both.
    """
    kept = {name: value for name, value in parent.items() if not _SECRET_NAME.search(name)}
    return {**kept, **_QUIET_ENV, **(extra or {})}


@attrs.frozen
class ConfinedCommand:
    """What to start for a command: the argv (the sandbox's wrapper, when one is loaded), the
    descriptors it inherits under the same numbers, and its environment.

    ``pass_fds`` belong to whoever starts the process: closed once it has started, or failed to
    (``start_process`` callers close them; ``run_command`` does it itself).
    """

    argv: tuple[str, ...]
    pass_fds: tuple[int, ...]
    env: Mapping[str, str]


async def confined_command(
    ctx: Context, command: str, *, shell: str, cwd: str, execution: ToolExecution
) -> ConfinedCommand:
    """``shell -c command`` in ``cwd``, through the ``sandbox`` service when one is loaded.

    :raises WorkspaceError: the shell is not installed, or the sandbox refuses the command (it
        fails closed: nothing runs unconfined after a refusal).
    """
    found = shutil.which(shell)
    if found is None:
        msg = f"the shell {shell!r} is not installed (not found on PATH); commands cannot run"
        raise WorkspaceError(msg)
    argv: tuple[str, ...] = (found, "-c", command)
    pass_fds: tuple[int, ...] = ()
    sandbox = ctx.get_service(SANDBOX_SERVICE)
    if sandbox is not None:
        try:
            wrapped = await sandbox.wrap(list(argv), cwd=cwd, execution=execution)
        except Exception as exc:  # a refusing sandbox fails closed: the command does not run
            msg = f"the command was not run: {exc}"
            raise WorkspaceError(msg) from exc
        if isinstance(wrapped, Confined):
            argv, pass_fds = tuple(wrapped.argv), tuple(wrapped.pass_fds)
        else:
            argv = tuple(wrapped)
    return ConfinedCommand(argv, pass_fds, command_environment(os.environ, COMMAND_ENV.get()))
