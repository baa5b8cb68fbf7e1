"""Exit statuses of the ``dsh`` command and how a turn's end maps to one (no imports: ``dsh --version`` stays fast)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

__all__ = ["ExitCode", "exit_code_for"]


class ExitCode(enum.IntEnum):
    """What ``dsh`` exits with. ``docs/plugins/cli.md`` lists them for users."""

    #: the turn completed (or the command did what it was asked)
    OK = 0
    #: the turn ended ``error``: the model or a plugin failed (also: an unexpected failure)
    ERROR = 1
    #: the command line is wrong (argparse's own status)
    USAGE = 2
    #: nothing ran: bad configuration, no API key, unknown model or session, a missing plugin
    SETUP = 3
    #: the turn ended ``max-tokens``: the model hit its output limit
    MAX_TOKENS = 4
    #: the turn ended ``stopped``: a plugin ended it (``agent/turn-stop``)
    STOPPED = 5
    #: the turn ended ``rejected``: every prompt was blocked (``agent/prompt-submit``)
    REJECTED = 6
    #: the turn was cancelled with Ctrl-C (SIGINT): 128 + 2, as shells report it
    INTERRUPTED = 130
    #: the reader of stdout went away (``dsh run ... | head -1``): 128 + 13 (SIGPIPE), as shells report it
    BROKEN_PIPE = 141
    #: the turn was cancelled by SIGTERM: 128 + 15
    TERMINATED = 143


_BY_REASON: dict[str, ExitCode] = {
    "completed": ExitCode.OK,
    "error": ExitCode.ERROR,
    "max-tokens": ExitCode.MAX_TOKENS,
    "stopped": ExitCode.STOPPED,
    "rejected": ExitCode.REJECTED,
    "aborted": ExitCode.INTERRUPTED,
}


def exit_code_for(reason: Mapping[str, Any]) -> ExitCode:
    """The exit status for a ``turn/end`` reason (``disposed`` and ``interrupted`` count as errors)."""
    return _BY_REASON.get(str(reason.get("kind")), ExitCode.ERROR)
