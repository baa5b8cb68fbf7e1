"""The plugin host: discovery, block lists, config, start order, failures, listing."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest

from dsh_core import (
    ConfigError,
    Context,
    DependencyCycleError,
    Harness,
    MissingServiceError,
    PluginError,
    hookimpl,
)

pytestmark = pytest.mark.anyio


def service_plugin(name: str, log: list[str], *, provides: tuple[str, ...] = (), requires: tuple[str, ...] = (),
                   uses: tuple[str, ...] = (), fail: bool = False) -> object:
    class Plugin:
        def start(self, ctx: Context) -> None:
            log.append(f"start {name}")
            for service in provides:
                ctx.provide(service, f"{service} from {name}")
            if fail:
                raise RuntimeError(f"{name} cannot start")

        async def stop(self) -> None:
            log.append(f"stop {name}")

    plugin = Plugin()
    plugin.name = name  # type: ignore[attr-defined]
    plugin.provides = provides  # type: ignore[attr-defined]
    plugin.requires = requires  # type: ignore[attr-defined]
    plugin.uses = uses  # type: ignore[attr-defined]
    return plugin


async def test_plugins_start_in_dependency_order_and_stop_in_reverse() -> None:
    """A plugin starts after the providers of what it requires or uses, and stops before them."""
    log: list[str] = []
    plugins = [
        service_plugin("app", log, requires=("db",), uses=("cache", "absent")),
        service_plugin("cache", log, provides=("cache",), requires=("db",)),
        service_plugin("db", log, provides=("db",)),
    ]
    async with Harness(plugins=plugins, autoload=False) as ctx:
        assert ctx.db == "db from db"
        assert ctx.cache == "cache from cache"
    assert log == ["start db", "start cache", "start app", "stop app", "stop cache", "stop db"]


async def test_missing_service_names_the_plugin() -> None:
    """A required service nobody provides is a start-up error naming plugin and service."""
    with pytest.raises(MissingServiceError, match="'app' requires service 'db'") as info:
        async with Harness(plugins=[service_plugin("app", [], requires=("db",))], autoload=False):
            pass
    assert info.value.plugin == "app"


async def test_missing_service_suggests_a_blocked_provider() -> None:
    """When an installed but disabled plugin provides the service, the error says to enable it."""
    config = {"plugins": {"disable": ["example"]}}
    with pytest.raises(MissingServiceError, match="enable one of: example"):
        async with Harness(config, plugins=[service_plugin("app", [], requires=("greeter",))]):
            pass


async def test_cycle_names_the_plugins() -> None:
    """Plugins that need each other are refused with the cycle spelled out."""
    plugins = [
        service_plugin("a", [], provides=("x",), requires=("y",)),
        service_plugin("b", [], provides=("y",), requires=("x",)),
    ]
    with pytest.raises(DependencyCycleError) as info:
        async with Harness(plugins=plugins, autoload=False):
            pass
    assert set(info.value.plugins) == {"a", "b"}
    assert "a -> b -> a" in str(info.value) or "b -> a -> b" in str(info.value)


async def test_cycle_names_only_the_plugins_in_it() -> None:
    """A three-plugin cycle is spelled in need order; a plugin merely waiting on it is not named."""
    plugins = [
        service_plugin("bystander", [], requires=("x",)),
        service_plugin("a", [], provides=("x",), requires=("y",)),
        service_plugin("b", [], provides=("y",), requires=("z",)),
        service_plugin("c", [], provides=("z",), uses=("x",)),
    ]
    with pytest.raises(DependencyCycleError) as info:
        async with Harness(plugins=plugins, autoload=False):
            pass
    assert sorted(info.value.plugins) == ["a", "b", "c"]
    spelled = str(info.value).rsplit(": ", 1)[1]
    assert spelled in {"a -> b -> c -> a", "b -> c -> a -> b", "c -> a -> b -> c"}


async def test_start_order_is_by_waves_keeping_the_given_order() -> None:
    """Plugins start wave by wave (all whose needs are met), in the order given inside a wave."""
    log: list[str] = []
    plugins = [
        service_plugin("late", log, requires=("mid",)),
        service_plugin("free2", log),
        service_plugin("mid", log, provides=("mid",), requires=("base",)),
        service_plugin("base", log, provides=("base",)),
        service_plugin("free1", log),
        service_plugin("mid2", log, uses=("base",)),
    ]
    async with Harness(plugins=plugins, autoload=False):
        pass
    starts = [line.removeprefix("start ") for line in log if line.startswith("start ")]
    assert starts == ["free2", "base", "free1", "mid", "mid2", "late"]


async def test_failed_start_stops_the_started_and_reraises() -> None:
    """A plugin whose start raises stops those already started (reverse order) and re-raises."""
    log: list[str] = []
    plugins = [
        service_plugin("one", log, provides=("one",)),
        service_plugin("two", log, provides=("two",), requires=("one",)),
        service_plugin("three", log, requires=("two",), fail=True),
    ]
    with pytest.raises(RuntimeError, match="three cannot start") as info:
        async with Harness(plugins=plugins, autoload=False):
            pass
    assert log == ["start one", "start two", "start three", "stop three", "stop two", "stop one"]
    assert any("three" in note for note in info.value.__notes__)


async def test_a_promised_service_must_be_provided() -> None:
    """Declaring provides without registering the service is caught at start."""

    class Liar:
        name = "liar"
        provides = ("thing",)

    with pytest.raises(PluginError, match="did not register it"):
        async with Harness(plugins=[Liar()], autoload=False):
            pass


async def test_unknown_hook_is_refused_with_a_suggestion() -> None:
    """An impl of a hook that no spec declares is a typo until proven otherwise."""

    class Typo:
        name = "typo"

        @hookimpl
        def dsh_agent_stauts(self, agent: Any, status: str) -> None: ...

    with pytest.raises(PluginError, match="did you mean 'dsh_agent_status'"):
        async with Harness(plugins=[Typo()], autoload=False):
            pass


async def test_entry_point_plugin_is_discovered_configured_and_listed() -> None:
    """The example distribution is found through the `dsh` group and gets its config."""
    config = {"plugins": {"example": {"greeting": "hi", "times": 2}}}
    harness = Harness(config)
    async with harness as ctx:
        assert ctx.greeter.greet("dsh") == "hi, dsh hi, dsh"
        assert "example" in harness.plugin_names


async def test_autoload_false_skips_third_party_plugins() -> None:
    """With autoload off only the root distribution's plugins (and given ones) load."""
    harness = Harness(autoload=False)
    async with harness as ctx:
        assert ctx.get_service("greeter") is None
        assert "example" not in harness.plugin_names


async def test_blocked_by_config() -> None:
    """plugins.disable keeps a discovered plugin from loading."""
    harness = Harness({"plugins": {"disable": ["example"]}})
    async with harness as ctx:
        assert ctx.get_service("greeter") is None
        assert "example" not in harness.plugin_names


async def test_blocked_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """DSH_DISABLE_PLUGINS (comma separated) keeps a discovered plugin from loading."""
    monkeypatch.setenv("DSH_DISABLE_PLUGINS", "nothing-such, example")
    harness = Harness()
    async with harness:
        assert "example" not in harness.plugin_names


async def test_explicit_plugin_replaces_a_discovered_one() -> None:
    """A given plugin with a discovered plugin's name takes its place."""

    class FakeGreeter:
        name = "example"
        provides = ("greeter",)

        def start(self, ctx: Context) -> None:
            ctx.provide("greeter", "fake")

    async with Harness(plugins=[FakeGreeter]) as ctx:
        assert ctx.greeter == "fake"


def test_listing_shows_name_distribution_version_services_and_hooks() -> None:
    """`python -m dsh_core plugins` lists each installed plugin with what it provides and hooks."""
    out = subprocess.run(
        [sys.executable, "-m", "dsh_core", "plugins"], check=True, capture_output=True, text=True
    ).stdout
    block = out[out.index("example") :].split("\n")[:4]
    assert "dsh-harness-example 1.2.3" in block[0]
    assert "greeter" in block[1]
    assert "dsh_session_created" in block[3]


def test_a_users_dsh_plugins_does_not_list_the_test_plugins(tmp_path: Path) -> None:
    """The suite's own plugins are installed apart from site-packages: found in the tests (and the
    processes they start, through PYTHONPATH), never by a user's `dsh plugins`."""
    found = {ep.name for ep in importlib.metadata.entry_points(group="dsh")}
    assert {"example", "temporal-testkit"} <= found, "the tests discover the test plugins"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["HOME"] = str(tmp_path)
    listed = subprocess.run(
        [str(Path(sys.executable).with_name("dsh")), "plugins"],
        cwd=tmp_path, env=env, check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    assert "workspace" in listed, listed
    assert "dsh-example" not in listed, listed
    assert "temporal-testkit" not in listed, listed


async def test_a_harness_runs_once() -> None:
    """Entering a Harness twice is refused with a message that says what to do."""
    harness = Harness(autoload=False)
    async with harness:
        pass
    with pytest.raises(RuntimeError, match="create a new one"):
        async with harness:
            pass


# ---------------------------------------------------------------------- config


@attrs.frozen
class Limits:
    retries: int = 3


@attrs.frozen
class SampleConfig:
    name: str
    ratio: float = 0.5
    limits: Limits = Limits()
    tags: list[str] = attrs.Factory(list)


class Configured:
    name = "sample"
    Config = SampleConfig

    def __init__(self) -> None:
        self.config: SampleConfig | None = None

    def start(self, ctx: Context) -> None:
        self.config = ctx.config


async def test_config_fills_the_plugin_config_class() -> None:
    """A plugin's table becomes its frozen Config instance, ints accepted for floats."""
    plugin = Configured()
    config = {"plugins": {"sample": {"name": "x", "ratio": 1, "limits": {"retries": 5}}}}
    async with Harness(config, plugins=[plugin], autoload=False):
        assert plugin.config == SampleConfig(name="x", ratio=1.0, limits=Limits(retries=5))


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"name": "x", "colour": "red"}, "dsh.toml: plugins.sample: unknown key(s) colour"),
        ({"name": "x", "limits": {"retries": "5"}}, "dsh.toml: plugins.sample.limits.retries: expected int"),
        ({}, "dsh.toml: plugins.sample.name: required value missing"),
        ({"name": 3}, "dsh.toml: plugins.sample.name: expected str"),
        ({"name": "x", "tags": ["a", 1]}, "dsh.toml: plugins.sample.tags[1]: expected str"),
    ],
)
async def test_config_errors_name_file_path_and_problem(table: dict[str, Any], expected: str) -> None:
    """Unknown keys, wrong types and missing values each read as file: dotted.path: problem."""
    with pytest.raises(ConfigError) as info:
        async with Harness({"plugins": {"sample": table}}, plugins=[Configured()], autoload=False, source="dsh.toml"):
            pass
    assert expected in str(info.value)


async def test_config_for_an_unknown_plugin_is_an_error() -> None:
    """A table for a plugin that is not installed is reported, with what is loaded."""
    with pytest.raises(ConfigError, match=r"plugins\.nope: no plugin named 'nope'"):
        async with Harness({"plugins": {"nope": {}}}, autoload=False):
            pass


async def test_config_from_pyproject(tmp_path: Path) -> None:
    """Harness.from_file reads [tool.dsh] from pyproject.toml."""
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "x"\n\n[tool.dsh.plugins.sample]\nname = "from-file"\n')
    plugin = Configured()
    async with Harness.from_file(path, plugins=[plugin], autoload=False):
        assert plugin.config is not None
        assert plugin.config.name == "from-file"


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    """A TOML syntax error is a ConfigError that names the file."""
    path = tmp_path / "dsh.toml"
    path.write_text("[plugins\n")
    with pytest.raises(ConfigError, match=r"dsh\.toml: not valid TOML"):
        Harness.from_file(path)


@attrs.frozen
class Bounded:
    retries: int = attrs.field(default=1)

    @retries.validator
    def _positive(self, attribute: Any, value: int) -> None:
        if value < 1:
            raise ValueError(f"must be at least 1, got {value}")


class BoundedPlugin:
    name = "bounded"
    Config = Bounded


async def test_a_validator_message_reaches_the_user() -> None:
    """A Config validator's ValueError text is reported, not a generic 'invalid value'."""
    with pytest.raises(ConfigError, match=r"dsh.toml: plugins.bounded(.retries)?: must be at least 1, got 0"):
        async with Harness({"plugins": {"bounded": {"retries": 0}}}, plugins=[BoundedPlugin()], autoload=False, source="dsh.toml"):
            pass


@attrs.frozen
class Moded:
    mode: Literal["read-only", "workspace-write"] = "read-only"


class ModedPlugin:
    name = "moded"
    Config = Moded


async def test_a_literal_error_lists_the_choices() -> None:
    """A value outside a Literal names the allowed choices and what was given."""
    with pytest.raises(ConfigError, match=re.escape("plugins.moded.mode: expected one of 'read-only', 'workspace-write', got 'rw'")):
        async with Harness({"plugins": {"moded": {"mode": "rw"}}}, plugins=[ModedPlugin()], autoload=False):
            pass


async def test_a_config_error_raised_in_start_names_the_file(tmp_path: Path) -> None:
    """A plugin that checks its table in start() still gets the file named in the error."""

    class LateCheck:
        name = "late"

        def start(self, ctx: Context) -> None:
            raise ConfigError("plugins.late.url: must start with http", path="plugins.late.url")

    path = tmp_path / "dsh.toml"
    path.write_text("[plugins]\n")
    with pytest.raises(ConfigError, match=r"dsh\.toml: plugins\.late\.url: must start with http") as info:
        async with Harness.from_file(path, plugins=[LateCheck()], autoload=False):
            pass
    assert info.value.source == str(path)
    assert info.value.path == "plugins.late.url"
