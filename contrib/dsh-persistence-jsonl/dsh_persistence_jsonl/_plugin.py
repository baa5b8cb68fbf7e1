"""The ``persistence-jsonl`` plugin: its config, its hooks, and how it starts and stops.

Starting hands the store to the core's wiring (``dsh_core.persistence.serve_session_store``): it
becomes the ``session_persistence`` service, the core's session hooks follow every live session,
and the background writer runs. Stopping cancels the writer, then writes, fsyncs and closes every log.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from dsh_core.persistence import serve_session_store

from ._layout import default_root
from ._store import JsonlSessionStore

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["PersistenceConfig", "PersistencePlugin"]


def _optional_path(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        msg = f"root must be a folder path (a non-empty string), got {value!r}"
        raise ValueError(msg)


def _delay(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        msg = f"batch_delay must be a number of seconds >= 0, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class PersistenceConfig:
    """The ``[plugins.persistence-jsonl]`` table."""

    #: the folder holding one folder per session (``~`` is expanded; relative to the working
    #: directory at start); default: the platform's user data directory + ``dsh/sessions``
    root: str | None = attrs.field(default=None, validator=_optional_path)
    #: seconds the first unwritten event waits for others to join its write
    batch_delay: float = attrs.field(default=0.1, validator=_delay)

    def root_path(self) -> Path:
        """``root`` as an absolute path (the default when unset)."""
        if self.root is None:
            return default_root()
        return Path(self.root).expanduser().absolute()


class PersistencePlugin:
    """Entry point ``persistence-jsonl``: every session as an append-only JSONL file.

    Provides ``ctx.session_persistence`` (a ``JsonlSessionStore``): ``load``, ``exists``,
    ``list``, ``delete``; ``ctx.agents.resume(id)`` loads through it.
    """

    name = "persistence-jsonl"
    provides: tuple[str, ...] = ("session_persistence",)
    uses: tuple[str, ...] = ("sessions",)
    Config = PersistenceConfig

    def __init__(self) -> None:
        self.store: JsonlSessionStore | None = None

    async def start(self, ctx: Context) -> None:
        config = ctx.config if isinstance(ctx.config, PersistenceConfig) else PersistenceConfig()
        store = self.store = JsonlSessionStore(config.root_path(), config.batch_delay)
        await serve_session_store(ctx, store, name=self.name, tasks=[("writer", store.run_writer)])
