"""The plugin's front: entry point, opt-in start, configuration, one database file, the versioned schema."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import dsh_persistence_sqlite
import platformdirs
import pytest
from dsh_persistence_sqlite import SCHEMA_VERSION, PersistenceConfig, PersistencePlugin, SqliteSessionStore

from dsh_core import ConfigError, Harness, SessionFormatError, StoreUnavailableError, installed_plugins

from .conftest import HarnessFactory

pytestmark = pytest.mark.anyio


def test_entry_point_and_front() -> None:
    """``persistence-sqlite`` is an installed plugin; the package exports what its docs name, no error classes."""
    assert "persistence-sqlite" in {info.name for info in installed_plugins()}
    public = {name for name in vars(dsh_persistence_sqlite) if not name.startswith("_")}
    assert set(dsh_persistence_sqlite.__all__) == public
    assert not any(name.endswith("Error") for name in public)  # its errors are the core's


def test_default_path_is_the_user_data_dir() -> None:
    expected = Path(platformdirs.user_data_dir("dsh", appauthor=False)) / "sessions.db"
    assert PersistenceConfig().database_path() == expected


async def test_it_starts_only_when_configured(tmp_path: Path) -> None:
    """Installed, it stands aside; with its table, it is the session store and persistence-jsonl stands aside."""
    jsonl = {"persistence-jsonl": {"root": str(tmp_path / "jsonl")}}
    async with Harness(config={"plugins": jsonl}) as ctx:
        assert not isinstance(ctx.session_persistence, SqliteSessionStore)
    config = {"plugins": {"persistence-sqlite": {"path": str(tmp_path / "s.db")}}}
    async with Harness(config=config) as ctx:
        assert isinstance(ctx.session_persistence, SqliteSessionStore)
        assert ctx.session_persistence.path == tmp_path / "s.db"


@pytest.mark.parametrize(
    ("table", "problem"),
    [({"batch_delay": -1}, "batch_delay"), ({"path": ""}, "path"), ({"busy_timeout": float("nan")}, "busy_timeout")],
)
async def test_bad_configuration_is_refused(table: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        async with Harness(config={"plugins": {"persistence-sqlite": table}}, plugins=[PersistencePlugin()], autoload=False):
            pass


async def test_a_database_that_cannot_be_opened_is_a_clear_start_up_error(tmp_path: Path) -> None:
    """A path under a regular file cannot hold a database: the start fails naming it."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    path = blocker / "sessions.db"
    config = {"plugins": {"persistence-sqlite": {"path": str(path)}}}
    with pytest.raises(StoreUnavailableError, match="cannot use the session database") as caught:
        async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False):
            pass
    assert str(path) in str(caught.value)


async def test_every_session_lives_in_one_file(harness: HarnessFactory, database: Path) -> None:
    """Sessions add rows, never files: the folder holds the database, SQLite's WAL files, and the owners file."""
    async with harness() as ctx:
        for index in range(3):
            session = await ctx.sessions.create(f"one-file-{index}")
            session.append("note/added", {"index": index})
            await ctx.sessions.flush(session)
        names = {path.name for path in database.parent.iterdir()}
    assert names <= {"sessions.db", "sessions.db-wal", "sessions.db-shm", "sessions.db-owners"}
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        rows = conn.execute("SELECT session_id, seq, type FROM dsh_events ORDER BY session_id").fetchall()
    assert rows == [(f"one-file-{index}", 0, "note/added") for index in range(3)]


async def test_another_schema_version_is_refused(harness: HarnessFactory, database: Path) -> None:
    """A file of another schema version refuses to start, naming both versions; the file is not changed."""
    async with harness():
        pass
    with sqlite3.connect(database) as conn:
        conn.execute("UPDATE dsh_schema SET version = 99")
    with pytest.raises(SessionFormatError, match=f"schema version 99.*uses version {SCHEMA_VERSION}") as caught:
        async with harness():
            pass
    assert (caught.value.version, caught.value.expected) == (99, SCHEMA_VERSION)
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT version FROM dsh_schema").fetchall() == [(99,)]
