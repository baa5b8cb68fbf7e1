"""The persistence contract suite runs once per backend: JSONL files, a real PostgreSQL server, one SQLite file.

``backend`` is a ``Backend``: a harness factory with that backend's plugin, the backend's error
classes, a raw reader of what is stored (without the plugin), and the plugin's table for a
subprocess. The PostgreSQL server is started once per test session (``postgres_server``, from
``dsh_persistence_postgres.pytest_plugin``); each test gets a schema of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .backends import Backend, JsonlBackend, PostgresBackend, SqliteBackend


@pytest.fixture(params=["jsonl", "postgres", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """One persistence backend, fresh for this test."""
    if request.param == "jsonl":
        return JsonlBackend(tmp_path / "store" / "sessions")
    if request.param == "sqlite":
        return SqliteBackend(tmp_path / "store" / "sessions.db")
    server = request.getfixturevalue("postgres_server")
    schema = request.getfixturevalue("postgres_schema")
    return PostgresBackend(server.dsn, schema)
