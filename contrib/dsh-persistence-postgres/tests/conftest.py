"""Fixtures: a store in a schema of its own on the session's throwaway server, and SQL access to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from dsh_persistence_postgres import PersistencePlugin
from dsh_persistence_postgres.testing import PostgresServer

from dsh_core import Context, Harness
from dsh_core.testing import ScriptedModel

from .postgres_kit import Database, HarnessFactory


@pytest.fixture
def db(postgres_server: PostgresServer, postgres_schema: str) -> Database:
    """SQL on the test's schema (``{s}`` in a statement names it)."""
    return Database(postgres_server.dsn, postgres_schema)


@pytest.fixture
def harness(db: Database) -> HarnessFactory:
    """Start a Harness with the plugin on the test's schema (autoload off); a ScriptedModel if given."""

    @asynccontextmanager
    async def start(
        model: ScriptedModel | None = None,
        *,
        batch_delay: float = 0.05,
        plugins: tuple[object, ...] = (),
        table: dict[str, Any] | None = None,
    ) -> AsyncIterator[Context]:
        settings = {"dsn": db.dsn, "schema": db.schema, "batch_delay": batch_delay, **(table or {})}
        config = {"plugins": {"persistence-postgres": settings}}
        async with Harness(config=config, plugins=[PersistencePlugin(), *plugins], autoload=False) as ctx:
            if model is not None:
                ctx.llm.register_adapter(model.provider, model)
            yield ctx

    return start
