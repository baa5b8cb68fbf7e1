"""Fixtures: a database path in ``tmp_path`` and a harness factory with the plugin on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from dsh_persistence_sqlite import PersistencePlugin

from dsh_core import Context, Harness
from dsh_core.testing import ScriptedModel

HarnessFactory = Callable[..., AbstractAsyncContextManager[Context]]


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """The database file (its folder holds nothing else)."""
    return tmp_path / "store" / "sessions.db"


@pytest.fixture
def harness(database: Path) -> HarnessFactory:
    """Start a Harness with the plugin on ``database`` (autoload off); a ScriptedModel if given."""

    @asynccontextmanager
    async def start(model: ScriptedModel | None = None, **table: Any) -> AsyncIterator[Context]:
        config = {"plugins": {"persistence-sqlite": {"path": str(database), **table}}}
        async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:
            if model is not None:
                ctx.llm.register_adapter(model.provider, model)
            yield ctx

    return start
