"""Fixtures: a store root in ``tmp_path``, a harness factory with the plugin, and file-level probes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from dsh_persistence_jsonl import PersistencePlugin

from dsh_core import Context, Harness
from dsh_core.testing import ScriptedModel

from .persistence_kit import FileProbe, HarnessFactory


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The store root; the folder holding it stays empty of anything else."""
    return tmp_path / "store" / "sessions"


@pytest.fixture
def harness(root: Path) -> HarnessFactory:
    """Start a Harness with the plugin on ``root`` (autoload off); a ScriptedModel if given."""

    @asynccontextmanager
    async def start(
        model: ScriptedModel | None = None,
        *,
        batch_delay: float = 0.1,
        root_dir: Path | None = None,
        plugins: tuple[object, ...] = (),
        extra: dict[str, Any] | None = None,
    ) -> AsyncIterator[Context]:
        table = {"root": str(root_dir or root), "batch_delay": batch_delay}
        config = {"plugins": {"persistence-jsonl": table, **(extra or {})}}
        async with Harness(config=config, plugins=[PersistencePlugin(), *plugins], autoload=False) as ctx:
            if model is not None:
                ctx.llm.register_adapter(model.provider, model)
            yield ctx

    return start


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> FileProbe:
    """A ``FileProbe``; set ``probe.path`` to the log file to watch (undone by ``monkeypatch``)."""
    return FileProbe(monkeypatch)
