"""How a turn ended: the precedence of the reasons of SPEC §3 when several apply.

The reason itself (``TurnEnd``) is declared with the ``turn/end`` event in ``dsh_core.session_log``.
"""

from __future__ import annotations

from typing import Final

from dsh_core.session_log import EndKind, TurnEnd

__all__ = ["EndKind", "TurnEnd", "strongest"]

#: disposed > aborted > error > max-tokens > stopped > completed (rejected only ever stands alone;
#: interrupted is written by crash repair, never decided by the loop)
_RANK: Final[dict[str, int]] = {
    "completed": 0,
    "rejected": 0,
    "interrupted": 0,
    "stopped": 1,
    "max-tokens": 2,
    "error": 3,
    "aborted": 4,
    "disposed": 5,
}


def strongest(current: TurnEnd | None, candidate: TurnEnd) -> TurnEnd:
    """The reason that wins; on a tie the first one stays (the first error is the one reported)."""
    if current is None or _RANK[candidate.kind] > _RANK[current.kind]:
        return candidate
    return current
