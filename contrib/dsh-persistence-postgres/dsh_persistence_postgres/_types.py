"""The values the ``session_persistence`` service hands out: the core's types, with the owner epoch.

``SessionInfo`` is the core's; ``LoadedSession`` and ``RepairReport`` are subclasses of the core's
``StoredSession`` and ``RepairReport`` that add the epoch this store took.
"""

from __future__ import annotations

import attrs

from dsh_core.persistence import RepairReport as CoreRepairReport
from dsh_core.persistence import SessionInfo as SessionInfo
from dsh_core.persistence import StoredSession

__all__ = ["LoadedSession", "RepairReport", "SessionInfo"]


@attrs.frozen(kw_only=True)
class LoadedSession(StoredSession):
    """A ``StoredSession`` with the owner ``epoch`` ``load`` took (0 for ``read``)."""

    epoch: int = 0


@attrs.frozen(kw_only=True)
class RepairReport(CoreRepairReport):
    """What ``repair`` did: ``backup`` names the rows of ``<schema>.dsh_damaged`` that keep the cut
    events (``None`` when none were cut); ``epoch`` is the owner epoch the repair took, which the
    kept rows carry."""

    epoch: int = 0
