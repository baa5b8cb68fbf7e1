"""How a turn ended: the reasons of SPEC §3 and their precedence when several apply."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import attrs

from dsh_core._llm_types import Failure

__all__ = ["EndKind", "TurnEnd", "strongest"]

EndKind: TypeAlias = Literal["completed", "rejected", "stopped", "max-tokens", "error", "aborted", "disposed"]

#: disposed > aborted > error > max-tokens > stopped > completed (rejected only ever stands alone)
_RANK: dict[str, int] = {
    "completed": 0,
    "rejected": 0,
    "stopped": 1,
    "max-tokens": 2,
    "error": 3,
    "aborted": 4,
    "disposed": 5,
}


@attrs.frozen
class TurnEnd:
    kind: EndKind
    failure: Failure | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        if self.failure is not None:
            data["failure"] = self.failure.to_json()
        if self.reason is not None:
            data["reason"] = self.reason
        return data


def strongest(current: TurnEnd | None, candidate: TurnEnd) -> TurnEnd:
    """The reason that wins; on a tie the first one stays (the first error is the one reported)."""
    if current is None or _RANK[candidate.kind] > _RANK[current.kind]:
        return candidate
    return current
