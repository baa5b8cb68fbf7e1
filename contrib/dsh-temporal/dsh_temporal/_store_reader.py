"""Reading a session log from the shared store, without owning the session (for ``events()``).

It runs a small harness with only the named persistence plugins (found by entry point, configured
as the workers configure theirs) and reads through the service's lock-free ``read``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

from importlib_metadata import entry_points

from dsh_core import ConfigError, Context, Harness, SessionEvent

from ._reading import stored_events

__all__ = ["StoreReader"]


class StoreReader:
    """A read-only view of the store named by ``{"<plugin>": {...config}}``."""

    def __init__(self, persistence: Mapping[str, Mapping[str, Any]]) -> None:
        if len(persistence) != 1:
            msg = f"persistence must name exactly one store plugin, got {sorted(persistence)!r}"
            raise ConfigError(msg, path="persistence")
        self._config = {name: dict(table) for name, table in persistence.items()}
        self._stack = AsyncExitStack()
        self._ctx: Context | None = None

    async def open(self) -> None:
        (name,) = self._config
        found = [point for point in entry_points(group="dsh") if point.name == name]
        if not found:
            msg = f"persistence: no installed dsh plugin is named {name!r} (install its distribution)"
            raise ConfigError(msg, path=f"persistence.{name}")
        plugin = found[0].load()
        harness = Harness(config={"plugins": self._config}, plugins=[plugin], autoload=False)
        self._ctx = await self._stack.enter_async_context(harness)
        if self._ctx.get_service("session_persistence") is None:
            msg = f"persistence: plugin {name!r} provides no session_persistence service"
            raise ConfigError(msg, path=f"persistence.{name}")

    async def close(self) -> None:
        self._ctx = None
        await self._stack.aclose()

    async def read_after(self, session_id: str, after_seq: int) -> list[SessionEvent]:
        """The stored events after ``after_seq`` (none while the session has no stored event)."""
        assert self._ctx is not None, "StoreReader.open() first"
        store = self._ctx.get_service("session_persistence")
        if not await store.exists(session_id):
            return []
        # An open turn's repair events are computed by the read, not stored: the turn may still
        # be running on a worker, whose real events take those seqs.
        return list(stored_events(await store.read(session_id))[after_seq + 1 :])
