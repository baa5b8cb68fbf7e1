"""The plugin's front: exports, entry point, configuration and DSN checks, the versioned schema."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import anyio
import dsh_persistence_postgres
import importlib_metadata
import pytest
from dsh_persistence_postgres import (
    SCHEMA_VERSION,
    DatabaseError,
    PersistencePlugin,
    PostgresSessionStore,
    SessionFormatError,
)

from dsh_core import ConfigError, Harness

from .postgres_kit import Database, HarnessFactory

pytestmark = pytest.mark.anyio


def test_front_is_exact() -> None:
    """The package exports exactly its public names (ruff keeps `__all__` sorted), the lazy store included."""
    public = {name for name in vars(dsh_persistence_postgres) if name.isidentifier() and not name.startswith("_")}
    public -= {"testing", "pytest_plugin", "TYPE_CHECKING", "Any"}  # submodules the test run imports; typing
    public.add("PostgresSessionStore")  # resolved on first access (it imports the driver)
    assert set(dsh_persistence_postgres.__all__) == public
    assert dsh_persistence_postgres.PostgresSessionStore is PostgresSessionStore
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        dsh_persistence_postgres.nothing  # noqa: B018 - the attribute access is the test


#: run in a fresh interpreter: what importing the entry points, and starting an unconfigured harness, imports
IMPORTS = """
import importlib_metadata, json, sys, anyio
from dsh_core import Harness
(entry,) = [ep for ep in importlib_metadata.entry_points(group="dsh") if ep.name == "persistence-postgres"]
entry.load()
(fixtures,) = [ep for ep in importlib_metadata.entry_points(group="pytest11") if ep.name == "dsh-persistence-postgres"]
fixtures.load()
loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("psycopg", "psycopg_pool", "psycopg_binary"))
async def main() -> None:
    config = {"plugins": {"persistence-jsonl": {"root": sys.argv[1]}}}
    harness = Harness(config=config)  # autoload: every installed plugin's entry point
    async with harness:
        assert "persistence-postgres" not in harness.plugin_names
anyio.run(main)
started = sorted(name for name in sys.modules if name.split(".")[0] in ("psycopg", "psycopg_pool", "psycopg_binary"))
print(json.dumps([loaded, started]))
"""


def test_importing_the_entry_points_does_not_import_the_driver(tmp_path: Path) -> None:
    """Loading the plugin's entry points, or starting a harness where it is installed but not configured,
    leaves psycopg unimported (the `dsh` command's start-up does not pay for it)."""
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS, str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded, started = json.loads(done.stdout.splitlines()[-1])
    assert loaded == []
    assert started == []


async def test_starting_the_plugin_imports_the_driver(db: Database) -> None:
    """The import waits for start(), which works from a fresh interpreter (nothing relies on an earlier import)."""
    script = (
        "import sys, anyio\n"
        "from dsh_core import Harness\n"
        "from dsh_persistence_postgres import PersistencePlugin\n"
        "async def main() -> None:\n"
        "    config = {'plugins': {'persistence-postgres': {'dsn': sys.argv[1], 'schema': sys.argv[2]}}}\n"
        "    assert 'psycopg' not in sys.modules\n"
        "    async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:\n"
        "        await ctx.sessions.create('fresh')\n"
        "    print('psycopg' in sys.modules)\n"
        "anyio.run(main)\n"
    )
    done = await anyio.run_process([sys.executable, "-c", script, db.dsn, db.schema], check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["True"]
    assert db.query("SELECT id FROM {s}.dsh_sessions") == [("fresh",)]


def test_entry_point_names_the_plugin() -> None:
    """Entry point `persistence-postgres` in group `dsh` loads PersistencePlugin."""
    (entry,) = [ep for ep in importlib_metadata.entry_points(group="dsh") if ep.name == "persistence-postgres"]
    assert entry.load() is PersistencePlugin


async def start(config: dict[str, object]) -> None:
    async with Harness(config={"plugins": {"persistence-postgres": config}}, plugins=[PersistencePlugin()], autoload=False):
        pass


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ({"batch_delay": -1}, "batch_delay must be a number of seconds >= 0"),
        ({"schema": ""}, "schema must be a PostgreSQL schema name"),
        ({"connections": 0}, "connections must be a whole number"),
        ({"dsn": ""}, "dsn must be a libpq connection string"),
        ({"flush": True}, "flush"),
    ],
)
async def test_bad_config_names_the_key(table: dict[str, object], problem: str) -> None:
    """Bad values and unknown keys are refused at start, naming the plugin's table."""
    with pytest.raises(ConfigError, match=problem) as caught:
        await start({"dsn": "host=/nowhere", **table})
    assert "persistence-postgres" in caught.value.path


async def test_no_dsn_is_a_start_up_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without `dsn` and without $DSH_POSTGRES_DSN the plugin does not start, and says what to set."""
    monkeypatch.delenv("DSH_POSTGRES_DSN", raising=False)
    with pytest.raises(ConfigError, match=r"set plugins\.persistence-postgres\.dsn .* or the DSH_POSTGRES_DSN"):
        await start({})


async def test_dsn_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, db: Database) -> None:
    """$DSH_POSTGRES_DSN is used when the table has no `dsn`."""
    monkeypatch.setenv("DSH_POSTGRES_DSN", db.dsn)
    config = {"plugins": {"persistence-postgres": {"schema": db.schema}}}
    async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:
        store = ctx.session_persistence
        assert isinstance(store, PostgresSessionStore)
        await ctx.sessions.create("from-env")
        assert await store.exists("from-env")


@pytest.mark.parametrize(
    "dsn",
    [
        "host=/nonexistent/dsh-socket port=5432 user=dsh password=s3cret-Pa55 dbname=x connect_timeout=2",
        "postgresql://dsh:s3cret-Pa55@localhost:1/x?connect_timeout=2",
        "postgresql://dsh:s3cret-Pa55@[not a host",  # not even a valid URL
    ],
)
async def test_the_password_never_appears_in_errors_or_logs(
    dsn: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that cannot be reached, or a DSN that cannot be parsed: the error names the server, not the password."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("DSH_POSTGRES_DSN", dsn)
    with pytest.raises((DatabaseError, ConfigError)) as caught:
        await start({})
    seen = [str(caught.value), repr(caught.value), *(str(a) for a in caught.value.args)]
    cause = caught.value.__cause__ or caught.value.__context__
    seen += [str(cause)] if cause is not None else []
    seen += [record.getMessage() for record in caplog.records]
    assert all("s3cret-Pa55" not in text for text in seen), seen
    if isinstance(caught.value, DatabaseError):
        assert "dsh@" in str(caught.value)


async def test_schema_is_created_on_first_use_by_concurrent_starts(db: Database, harness: HarnessFactory) -> None:
    """Five harnesses starting at once on an empty schema create it once, with one version row."""

    async def one() -> None:
        async with harness():
            pass

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one)
    assert db.query("SELECT version FROM {s}.dsh_schema") == [(SCHEMA_VERSION,)]
    columns = db.query(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = 'dsh_events'"
        " ORDER BY ordinal_position",
        db.schema,
    )
    assert [name for (name,) in columns] == ["session_id", "seq", "type", "time", "data"]


async def test_another_schema_version_refuses_to_start(db: Database, harness: HarnessFactory) -> None:
    """Tables of another version: the start fails naming both versions, and nothing is changed."""
    async with harness():
        pass
    db.query("UPDATE {s}.dsh_schema SET version = 7")
    with pytest.raises(SessionFormatError, match=rf"version 7, and this dsh-persistence-postgres uses version {SCHEMA_VERSION}") as caught:
        async with harness():
            pass
    assert (caught.value.version, caught.value.expected) == (7, SCHEMA_VERSION)
    assert db.query("SELECT version FROM {s}.dsh_schema") == [(7,)]


async def test_sessions_live_before_start_are_followed(db: Database) -> None:
    """A session entered before the plugin started is persisted from its first event."""

    class Marker:
        name = "early-marker"
        provides = ("early_marker",)
        requires = ("sessions",)

        async def start(self, ctx: object) -> None:
            ctx.provide("early_marker", object())  # type: ignore[attr-defined]
            session = await ctx.sessions.create("early")  # type: ignore[attr-defined]
            session.append("note/before", {})

    class Late(PersistencePlugin):
        uses = ("sessions", "early_marker")  # start after Marker

    config = {"plugins": {"persistence-postgres": {"dsn": db.dsn, "schema": db.schema}}}
    async with Harness(config=config, plugins=[Marker(), Late()], autoload=False) as ctx:
        session = ctx.sessions.get("early")
        assert session is not None
        session.append("note/after", {})
        await ctx.sessions.flush(session)
    rows = db.query("SELECT type FROM {s}.dsh_events WHERE session_id = 'early' ORDER BY seq")
    assert rows == [("note/before",), ("note/after",)]


async def test_installed_but_unconfigured_it_stays_out_of_the_way(tmp_path: object) -> None:
    """With autoload on and no [plugins.persistence-postgres] table, the default JSONL store serves."""
    from dsh_persistence_jsonl import JsonlSessionStore

    config = {"plugins": {"persistence-jsonl": {"root": str(tmp_path)}}}
    async with Harness(config=config) as ctx:
        assert isinstance(ctx.session_persistence, JsonlSessionStore)


async def test_configured_it_replaces_the_default_store(db: Database) -> None:
    """With its table present (autoload on), it provides session_persistence and persistence-jsonl stands aside."""
    config = {"plugins": {"persistence-postgres": {"dsn": db.dsn, "schema": db.schema}}}
    harness = Harness(config=config)
    async with harness as ctx:
        assert isinstance(ctx.session_persistence, PostgresSessionStore)
        assert "persistence-postgres" in harness.plugin_names
        assert "persistence-jsonl" not in harness.plugin_names


async def test_the_lock_connection_has_keepalives_on_both_ends(postgres_server: object, db: Database) -> None:
    """Over TCP the lock connection asks the server to drop it within ~15 s of silence, and watches the server too."""
    from dsh_persistence_postgres.testing import PostgresServer

    assert isinstance(postgres_server, PostgresServer)
    assert postgres_server.tcp_dsn is not None
    config = {"plugins": {"persistence-postgres": {"dsn": postgres_server.tcp_dsn, "schema": db.schema}}}
    async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:
        await ctx.sessions.create("kept-alive")
        conn = ctx.session_persistence._db._lock_conn
        assert conn is not None
        server_side = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout")
        }
        assert server_side == {
            "tcp_keepalives_idle": "5",
            "tcp_keepalives_interval": "2",
            "tcp_keepalives_count": "4",
            "tcp_user_timeout": "15000",
        }
        client_side = conn.info.get_parameters() | dict(
            item.split("=", 1) for item in conn.info.dsn.split() if "=" in item
        )
        assert (client_side["keepalives_idle"], client_side["keepalives_count"]) == ("5", "4")
        assert db.lock_holders("kept-alive")  # the lock is held on that connection
