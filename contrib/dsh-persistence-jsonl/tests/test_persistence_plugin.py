"""The plugin's front: exact exports, the entry point, configuration checks, following sessions live before start."""

from __future__ import annotations

from pathlib import Path

import dsh_persistence_jsonl
import importlib_metadata
import pytest
from dsh_persistence_jsonl import JsonlSessionStore, PersistenceConfig, PersistencePlugin

from dsh_core import ConfigError, Harness

from .persistence_kit import stored_events

pytestmark = pytest.mark.anyio


def test_front_is_exact() -> None:
    """The package exports exactly its public names, sorted."""
    public = {name for name in vars(dsh_persistence_jsonl) if not name.startswith("_")}
    assert set(dsh_persistence_jsonl.__all__) == public
    assert list(dsh_persistence_jsonl.__all__) == sorted(dsh_persistence_jsonl.__all__)


def test_entry_point_names_the_plugin() -> None:
    """Entry point `persistence-jsonl` in group `dsh` loads PersistencePlugin."""
    (entry,) = [ep for ep in importlib_metadata.entry_points(group="dsh") if ep.name == "persistence-jsonl"]
    assert entry.load() is PersistencePlugin


def test_default_root_is_the_user_data_dir() -> None:
    """Without `root`, logs go to the platform's user data directory under dsh/sessions."""
    path = PersistenceConfig().root_path()
    assert path.parts[-2:] == ("dsh", "sessions")
    assert path.is_absolute()
    assert PersistenceConfig(root="~/x").root_path() == Path("~/x").expanduser()


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ({"batch_delay": -1}, "batch_delay must be a number of seconds >= 0"),
        ({"root": ""}, "root must be a folder path"),
        ({"flush": True}, "flush"),
    ],
)
async def test_bad_config_names_the_key(table: dict[str, object], problem: str) -> None:
    """Bad values and unknown keys are refused at start, naming the plugin's table."""
    config = {"plugins": {"persistence-jsonl": table}}
    with pytest.raises(ConfigError, match=problem) as caught:
        async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False):
            pass
    assert "persistence-jsonl" in caught.value.path


async def test_autoload_provides_the_service(root: Path) -> None:
    """With autoload on, the installed entry point provides ctx.session_persistence."""
    others = [  # other contrib plugins installed beside us are not under test here
        ep.name
        for ep in importlib_metadata.entry_points(group="dsh")
        if ep.name != "persistence-jsonl" and (ep.dist is None or ep.dist.name != "dsh-harness")
    ]
    config = {"plugins": {"persistence-jsonl": {"root": str(root)}, "disable": others}}
    async with Harness(config=config) as ctx:
        assert isinstance(ctx.session_persistence, JsonlSessionStore)
        assert ctx.session_persistence.root == root


async def test_sessions_live_before_start_are_followed(root: Path) -> None:
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

    config = {"plugins": {"persistence-jsonl": {"root": str(root)}}}
    async with Harness(config=config, plugins=[Marker(), Late()], autoload=False) as ctx:
        session = ctx.sessions.get("early")
        session.append("note/after", {})
        await ctx.sessions.flush(session)
    assert [e.type for e in stored_events(root / "early" / "session.jsonl")] == ["note/before", "note/after"]
