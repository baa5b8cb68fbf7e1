"""pytest fixtures (registered through the ``pytest11`` entry point): a throwaway PostgreSQL server.

``postgres_server`` starts one server for the whole test session, on first use, and stops it at
the end; its ``dsn`` is a Unix socket, its ``tcp_dsn`` a loopback port. Each test that wants its own tables picks a
fresh schema (``postgres_schema``), dropped after the test.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from .testing import PostgresServer, temporary_postgres

__all__ = ["postgres_schema", "postgres_server"]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the test session (see ``dsh_persistence_postgres.testing``)."""
    with temporary_postgres(tcp=True) as server:
        yield server


@pytest.fixture
def postgres_schema(postgres_server: PostgresServer) -> Iterator[str]:
    """A schema name no other test uses; the schema (if created) is dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
