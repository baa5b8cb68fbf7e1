"""The plugin host: find plugins, fill their config, start them in dependency order, stop them.

A plugin is any object (or class, instantiated with no arguments, or module) that may carry:

* ``provides`` / ``requires`` / ``uses`` — tuples of service names it registers, needs, or uses
  when present (start order follows these);
* ``Config`` — a frozen attrs class filled from ``[plugins.<name>]``, available as ``ctx.config``;
* ``hookspecs`` — a module or class declaring extra events with ``@hookspec``;
* ``start(ctx)`` and ``stop()`` — sync or async; everything registered through ``ctx`` is undone
  when the plugin stops, so most plugins need no ``stop``;
* ``autoload = False`` — an opt-in plugin: installed, it starts only when its ``[plugins.<name>]``
  table is in the configuration (or it is given explicitly), and then a discovered plugin without
  a table that provides one of the same services stands aside (an alternative backend replacing
  the default one, e.g. ``persistence-postgres`` for ``persistence-jsonl``);
* ``@hookimpl`` methods — registered for the plugin's whole life.
"""

from __future__ import annotations

import difflib
import enum
import graphlib
import inspect
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

import anyio
import anyio.abc
import attrs
import importlib_metadata

from dsh_core import hookspecs as _catalog
from dsh_core.host._config import load_config_file, structure_config
from dsh_core.host._context import Context, Services
from dsh_core.host._dispatch import Dispatcher, new_plugin_manager
from dsh_core.host._markers import PROJECT
from dsh_core.vocabulary._errors import ConfigError, DependencyCycleError, MissingServiceError, PluginError

__all__ = ["ENTRY_POINT_GROUP", "ROOT_DISTRIBUTION", "Harness", "PluginInfo", "installed_plugins"]

logger = logging.getLogger("dsh.host")

ENTRY_POINT_GROUP = "dsh"
ROOT_DISTRIBUTION = "dsh-harness"
DISABLE_ENV = "DSH_DISABLE_PLUGINS"


@attrs.frozen
class PluginInfo:
    """What ``python -m dsh_core plugins`` shows about one plugin."""

    name: str
    distribution: str | None
    version: str | None
    provides: tuple[str, ...]
    requires: tuple[str, ...]
    uses: tuple[str, ...]
    hooks: tuple[str, ...]


@attrs.define
class _Candidate:
    name: str
    plugin: object
    distribution: str | None = None
    version: str | None = None
    ctx: Context | None = None

    def services(self, attribute: str) -> tuple[str, ...]:
        value = getattr(self.plugin, attribute, ())
        if isinstance(value, str) or not all(isinstance(item, str) for item in value):
            msg = f"plugin {self.name!r}: {attribute} must be a tuple of service names, got {value!r}"
            raise PluginError(msg, plugin=self.name)
        return tuple(value)


def _hooks_of(plugin: object) -> tuple[str, ...]:
    marker = f"{PROJECT}_impl"
    return tuple(
        sorted(name for name in dir(plugin) if name.startswith(f"{PROJECT}_") and hasattr(getattr(plugin, name, None), marker))
    )


def _instantiate(loaded: object) -> object:
    return loaded() if isinstance(loaded, type) else loaded


def _plugin_name(plugin: object) -> str:
    name = getattr(plugin, "name", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(plugin, ModuleType):
        return plugin.__name__
    return type(plugin).__name__


def _autoloads(plugin: object) -> bool:
    return getattr(plugin, "autoload", True) is not False


def _stand_aside(candidates: dict[str, _Candidate], tables: Mapping[str, Any]) -> None:
    """Drop each discovered, unconfigured plugin that provides a service an opt-in plugin in use provides."""
    for chosen in [c for c in candidates.values() if not _autoloads(c.plugin)]:
        wanted = set(chosen.services("provides"))
        for other in list(candidates.values()):
            if other is chosen or other.distribution is None or other.name in tables:
                continue
            shared = wanted & set(other.services("provides"))
            if shared:
                logger.info(
                    "plugin %r stands aside: %r is configured and provides %s",
                    other.name,
                    chosen.name,
                    ", ".join(sorted(shared)),
                )
                del candidates[other.name]


def installed_plugins() -> list[PluginInfo]:
    """Every plugin installed under the ``dsh`` entry-point group (imports each to read it)."""
    infos = []
    for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        try:
            candidate = _Candidate(ep.name, ep.load())
            provides, requires, uses = (candidate.services(a) for a in ("provides", "requires", "uses"))
            hooks = _hooks_of(candidate.plugin)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is listed as broken, not fatal to the listing
            provides, requires, uses, hooks = (), (), (), (f"<failed to load: {exc!r}>",)
        infos.append(
            PluginInfo(
                name=ep.name,
                distribution=dist.name if dist else None,
                version=dist.version if dist else None,
                provides=provides,
                requires=requires,
                uses=uses,
                hooks=hooks,
            )
        )
    return sorted(infos, key=lambda info: info.name)


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


class Harness:
    """Loads and runs plugins: ``async with Harness(config) as ctx: ...``.

    ``autoload=False`` loads only the root distribution's plugins plus ``plugins``. Plugins given
    explicitly (classes or ready objects) replace discovered ones of the same name. The block list
    (``plugins.disable`` in config and the ``DSH_DISABLE_PLUGINS`` environment variable, names
    separated by commas) applies to discovered plugins.
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        plugins: Sequence[object] = (),
        autoload: bool = True,
        *,
        source: str = "<config>",
    ) -> None:
        self._config = dict(config or {})
        self._explicit = list(plugins)
        self._autoload = autoload
        self._source = source
        self._state = _State.NEW
        self._started: list[_Candidate] = []
        self._root: Context | None = None
        self._tasks: anyio.abc.TaskGroup | None = None

    @classmethod
    def from_file(cls, path: str | Path, plugins: Sequence[object] = (), autoload: bool = True) -> Harness:
        """A Harness configured from ``dsh.toml`` or ``pyproject.toml`` (``[tool.dsh]``)."""
        return cls(load_config_file(path), plugins, autoload, source=str(path))

    @property
    def plugin_names(self) -> tuple[str, ...]:
        """The running plugins, in start order."""
        return tuple(candidate.name for candidate in self._started)

    async def __aenter__(self) -> Context:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------ start

    async def start(self) -> Context:
        """Start every plugin; on failure, stop those already started and re-raise."""
        if self._state is not _State.NEW:
            msg = f"this Harness is already {self._state.value}; a Harness runs once, so create a new one"
            raise RuntimeError(msg)
        self._state = _State.RUNNING
        plugin_tables, blocked = self._plugin_tables()
        candidates, installed = self._candidates(blocked, plugin_tables)
        for key in plugin_tables:
            if key not in candidates and key not in installed:
                known = ", ".join(sorted(candidates)) or "none"
                msg = f"{self._source}: plugins.{key}: no plugin named {key!r} is installed (loaded: {known})"
                raise ConfigError(msg, source=self._source, path=f"plugins.{key}")
        ordered = self._start_order(list(candidates.values()), installed)

        pm = new_plugin_manager()
        events = Dispatcher(pm)
        events.add_specs(_catalog)
        for candidate in ordered:
            extra = getattr(candidate.plugin, "hookspecs", None)
            if extra is not None:
                events.add_specs(extra)
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        root = Context(services=Services(), events=events, label="harness", task_group=self._tasks)
        self._root = root
        try:
            for candidate in ordered:
                config = self._config_for(candidate, plugin_tables.get(candidate.name, {}))
                await self._start_one(root, candidate, config)
        except BaseException:
            await self.stop()
            raise
        return root

    def _plugin_tables(self) -> tuple[dict[str, Any], set[str]]:
        unknown = sorted(set(self._config) - {"plugins"})
        if unknown:
            msg = f"{self._source}: {unknown[0]}: unknown top-level key; plugin settings go under [plugins.<name>]"
            raise ConfigError(msg, source=self._source, path=unknown[0])
        tables = self._config.get("plugins", {})
        if not isinstance(tables, Mapping):
            msg = f"{self._source}: plugins: expected a table of plugin settings, got {tables!r}"
            raise ConfigError(msg, source=self._source, path="plugins")
        tables = dict(tables)
        disable = tables.pop("disable", [])
        if not isinstance(disable, list) or not all(isinstance(item, str) for item in disable):
            msg = f"{self._source}: plugins.disable: expected a list of plugin names, got {disable!r}"
            raise ConfigError(msg, source=self._source, path="plugins.disable")
        from_env = os.environ.get(DISABLE_ENV, "")
        blocked = set(disable) | {name.strip() for name in from_env.split(",") if name.strip()}
        return tables, blocked

    def _candidates(
        self, blocked: set[str], tables: Mapping[str, Any]
    ) -> tuple[dict[str, _Candidate], dict[str, Any]]:
        candidates: dict[str, _Candidate] = {}
        installed: dict[str, Any] = {}
        for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist
            installed[ep.name] = ep
            if ep.name in blocked or (not self._autoload and (dist is None or dist.name != ROOT_DISTRIBUTION)):
                continue
            try:
                plugin = _instantiate(ep.load())
            except Exception as exc:
                where = f"{dist.name} {dist.version}" if dist else "an unknown distribution"
                msg = f"plugin {ep.name!r} ({ep.value}, from {where}) failed to load: {exc!r}"
                raise PluginError(msg, plugin=ep.name) from exc
            if not _autoloads(plugin) and ep.name not in tables:
                continue  # opt-in: only when configured
            candidates[ep.name] = _Candidate(
                ep.name, plugin, dist.name if dist else None, dist.version if dist else None
            )
        for given in self._explicit:
            plugin = _instantiate(given)
            name = _plugin_name(plugin)
            if name in candidates and candidates[name].distribution is None:
                suffix = 2
                while f"{name}#{suffix}" in candidates:
                    suffix += 1
                name = f"{name}#{suffix}"
            candidates[name] = _Candidate(name, plugin)
        _stand_aside(candidates, tables)
        return candidates, installed

    def _start_order(self, candidates: list[_Candidate], installed: Mapping[str, Any]) -> list[_Candidate]:
        providers: dict[str, str] = {}
        for candidate in candidates:
            for service in candidate.services("provides"):
                if service in providers:
                    msg = (
                        f"plugins {providers[service]!r} and {candidate.name!r} both provide service "
                        f"{service!r}; disable one of them (plugins.disable)"
                    )
                    raise PluginError(msg, plugin=candidate.name)
                providers[service] = candidate.name
        needs: dict[str, set[str]] = {}
        for candidate in candidates:
            needed = set()
            for service in candidate.services("requires"):
                if service not in providers:
                    could = _installed_providers(service, installed)
                    hint = f"enable one of: {', '.join(could)}" if could else "no installed plugin provides it"
                    msg = (
                        f"plugin {candidate.name!r} requires service {service!r}, which no loaded "
                        f"plugin provides; {hint}"
                    )
                    raise MissingServiceError(msg, plugin=candidate.name, service=service, providers=could)
                needed.add(providers[service])
            needed.update(providers[s] for s in candidate.services("uses") if s in providers)
            needed.discard(candidate.name)
            needs[candidate.name] = needed
        return _in_waves(candidates, needs)

    def _config_for(self, candidate: _Candidate, table: object) -> object:
        config_cls = getattr(candidate.plugin, "Config", None)
        path = f"plugins.{candidate.name}"
        if config_cls is None:
            if table:
                msg = f"{self._source}: {path}: plugin {candidate.name!r} takes no configuration"
                raise ConfigError(msg, source=self._source, path=path)
            return None
        return structure_config(config_cls, table, source=self._source, path=path)

    async def _start_one(self, root: Context, candidate: _Candidate, config: object) -> None:
        ctx = root.child(f"plugin:{candidate.name}", config=config)
        candidate.ctx = ctx
        self._started.append(candidate)
        if _hooks_of(candidate.plugin):
            ctx.register_plugin(candidate.plugin, name=candidate.name)
            _check_known_hooks(candidate, ctx.events)
        start = getattr(candidate.plugin, "start", None)
        if start is not None:
            try:
                result = start(ctx)
                if inspect.isawaitable(result):
                    await result
            except ConfigError as exc:
                if exc.source != "<config>" or str(exc).startswith(f"{self._source}:"):
                    raise
                # A plugin checked its configuration in start(): name the file like any config error.
                msg = f"{self._source}: {exc}"
                raise ConfigError(msg, source=self._source, path=exc.path) from exc
            except Exception as exc:
                exc.add_note(f"while starting plugin {candidate.name!r}")
                raise
        for service in candidate.services("provides"):
            if ctx.get_service(service) is None:
                msg = (
                    f"plugin {candidate.name!r} declares that it provides {service!r} but did not "
                    f"register it in start() (call ctx.provide({service!r}, ...))"
                )
                raise PluginError(msg, plugin=candidate.name)

    # ------------------------------------------------------------------ stop

    async def stop(self) -> None:
        """Stop the started plugins in reverse order. Idempotent; a failing stop is logged."""
        if self._state is _State.STOPPED:
            return
        self._state = _State.STOPPED
        while self._started:
            candidate = self._started.pop()
            stop = getattr(candidate.plugin, "stop", None)
            if stop is not None:
                try:
                    result = stop()
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    logger.exception("plugin %r failed to stop", candidate.name)
            if candidate.ctx is not None:
                await candidate.ctx.dispose()
        if self._root is not None:
            await self._root.dispose()
        if self._tasks is not None:
            # Every task was started through a context and has been cancelled and awaited above.
            self._tasks.cancel_scope.cancel()
            await self._tasks.__aexit__(None, None, None)
            self._tasks = None


def _installed_providers(service: str, installed: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of installed (perhaps blocked) plugins that would provide ``service``."""
    found = []
    for name, ep in installed.items():
        try:
            provides = getattr(ep.load(), "provides", ())
        except Exception:  # noqa: BLE001 - a plugin that cannot even load is no candidate
            continue
        if service in provides:
            found.append(name)
    return tuple(sorted(found))


def _in_waves(candidates: list[_Candidate], needs: Mapping[str, set[str]]) -> list[_Candidate]:
    """Order ``candidates`` so each comes after what it ``needs``, wave by wave.

    A wave is every candidate whose needs are all in earlier waves; inside a wave, candidates keep
    the order they were given in (discovery, then explicit), so the start order is deterministic.
    """
    position = {candidate.name: index for index, candidate in enumerate(candidates)}
    sorter = graphlib.TopologicalSorter(needs)
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        # graphlib lists each node before the one that needs it; say it the other way round.
        cycle = list(reversed(exc.args[1]))
        msg = f"plugins need each other's services in a cycle: {' -> '.join(cycle)}"
        raise DependencyCycleError(msg, plugins=tuple(dict.fromkeys(cycle))) from None
    by_name = {candidate.name: candidate for candidate in candidates}
    ordered: list[_Candidate] = []
    while sorter.is_active():
        wave = sorted(sorter.get_ready(), key=position.__getitem__)
        ordered.extend(by_name[name] for name in wave)
        sorter.done(*wave)
    return ordered


def _check_known_hooks(candidate: _Candidate, events: Dispatcher) -> None:
    known = {spec.hook for spec in events.specs.values()}
    for hook in _hooks_of(candidate.plugin):
        opts = getattr(getattr(candidate.plugin, hook), f"{PROJECT}_impl", {})
        if hook not in known and not opts.get("optionalhook"):
            close = difflib.get_close_matches(hook, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            msg = f"plugin {candidate.name!r} implements {hook!r}, which is no known event{hint}"
            raise PluginError(msg, plugin=candidate.name)

