"""The distribution: its front, its entry point, its configuration."""

from __future__ import annotations

import dsh_compaction
import importlib_metadata
import pytest
from dsh_compaction import CompactionConfig, CompactionPlugin, Compactor

from dsh_core import ConfigError, Harness

pytestmark = pytest.mark.anyio


def test_front_is_exact() -> None:
    """The package exports exactly its public names, sorted."""
    public = {name for name in vars(dsh_compaction) if not name.startswith("_")}
    assert set(dsh_compaction.__all__) == public
    assert dsh_compaction.__all__ == sorted(dsh_compaction.__all__)


def test_entry_point() -> None:
    """The plugin is found as ``compaction`` in the ``dsh`` entry-point group."""
    [entry] = [ep for ep in importlib_metadata.entry_points(group="dsh") if ep.name == "compaction"]
    assert entry.value == "dsh_compaction:CompactionPlugin"
    assert entry.load() is CompactionPlugin


async def test_service_and_config_from_the_table() -> None:
    """``[plugins.compaction]`` fills the config; the service is ``ctx.compaction``."""
    table = {
        "plugins": {"compaction": {"threshold": 0.5, "keep_recent_tokens": 1000, "model": "other/small"}}
    }
    async with Harness(config=table, plugins=[CompactionPlugin], autoload=False) as ctx:
        service = ctx.compaction
        assert isinstance(service, Compactor)
        assert service.config == CompactionConfig(threshold=0.5, keep_recent_tokens=1000, model="other/small")


async def test_autoload_finds_it() -> None:
    """With autoload on, the installed plugin is loaded by its entry point (other contrib plugins off)."""
    ours = {"dsh-harness", "dsh-harness-compaction"}
    others = [
        ep.name
        for ep in importlib_metadata.entry_points(group="dsh")
        if ep.dist is None or ep.dist.name not in ours
    ]
    async with Harness(config={"plugins": {"disable": others}}) as ctx:
        assert isinstance(ctx.get_service("compaction"), Compactor)


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": 0}, "threshold"),
        ({"threshold": "high"}, "threshold"),
        ({"keep_recent_tokens": -1}, "keep_recent_tokens"),
        ({"summary_max_tokens": 0}, "summary_max_tokens"),
        ({"model": "no-slash"}, "model"),
        ({"ratio": 0.8}, "ratio"),
    ],
)
async def test_bad_config_is_refused_naming_the_key(table: dict[str, object], key: str) -> None:
    """A wrong value or an unknown key fails at start, naming the table and the key."""
    with pytest.raises(ConfigError) as caught:
        async with Harness(
            config={"plugins": {"compaction": table}}, plugins=[CompactionPlugin], autoload=False
        ):
            pass
    assert "plugins.compaction" in str(caught.value)
    assert key in str(caught.value)
