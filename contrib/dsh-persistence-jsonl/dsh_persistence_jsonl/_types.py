"""The values the ``session_persistence`` service hands out: the core's types, with the file they live in.

Each is a subclass of its ``dsh_core.persistence`` type, adding what only a file backend knows.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from dsh_core.persistence import RepairReport as CoreRepairReport
from dsh_core.persistence import SessionInfo as CoreSessionInfo
from dsh_core.persistence import StoredSession

__all__ = ["LoadedSession", "RepairReport", "SessionInfo"]


@attrs.frozen(kw_only=True)
class LoadedSession(StoredSession):
    """A ``StoredSession`` with its ``path``; ``truncated`` counts the bytes of torn tail dropped."""

    path: Path
    truncated: int = 0


@attrs.frozen(kw_only=True)
class SessionInfo(CoreSessionInfo):
    """A ``SessionInfo`` with the ``path`` of its log (``events`` counts the complete event lines)."""

    path: Path


@attrs.frozen(kw_only=True)
class RepairReport(CoreRepairReport):
    """What ``repair`` did to one stored log, in lines of its file.

    ``line`` is the first line it cut (1-based; ``None`` when the log was sound and nothing was
    cut); ``dropped_events`` and ``dropped_bytes`` count what went, from that line to the end (a
    torn last line counts as one); ``backup`` is the untouched copy of the original file (a ``Path``).
    """

    path: Path
    line: int | None = None
    dropped_bytes: int = 0
    unit: str = "line"

    @property
    def dropped_lines(self) -> int:
        """The event lines cut (``dropped_events``)."""
        return self.dropped_events

    def describe(self) -> list[str]:
        """What happened, as lines for a person (``dsh sessions repair`` prints them)."""
        if self.backup is None:
            return [f"session {self.id}: nothing to repair ({self.events} events, every line sound)"]
        return [
            f"session {self.id}: cut at line {self.line}: dropped {self.dropped_lines} lines "
            f"({self.dropped_bytes} bytes), kept {self.events} events",
            f"the original file is kept as {self.backup}",
        ]
