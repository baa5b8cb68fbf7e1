"""Configuration layering for the ``dsh`` command, and where each effective value came from.

From lowest to highest precedence:

1. built-in defaults (``plugins.cli.model = "deepseek/deepseek-v4-flash"``);
2. the user file, ``$XDG_CONFIG_HOME/dsh/config.toml`` (``~/.config/dsh/config.toml``);
3. the project file: ``dsh.toml``, or ``[tool.dsh]`` in ``pyproject.toml``, in the working directory
   or the nearest parent that has one (``--config PATH`` names it instead);
4. the environment (``DSH_MODEL``, ``DSH_MODE``, ``DSH_SESSIONS_DIR``);
5. command-line flags (``--model``, ``--mode``, ``--set KEY=VALUE``).

Tables merge key by key; any other value (a list included) replaces the one below it. API keys are
never read from a file: providers name the environment variable that holds theirs.
"""

from __future__ import annotations

import argparse
import copy
import os
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from dsh_core import ConfigError

__all__ = [
    "DEFAULT_MODEL",
    "ENVIRONMENT",
    "EffectiveConfig",
    "Layer",
    "Overrides",
    "config_from_args",
    "find_project_config",
    "load_config",
    "max_attempts",
    "merge_layers",
    "parse_assignment",
    "plugin_tables",
    "user_config_path",
]

#: The model used when no layer names one.
DEFAULT_MODEL: Final = "deepseek/deepseek-v4-flash"

#: Environment variables that set a configuration value, and the dotted path each one sets.
ENVIRONMENT: Final[Mapping[str, str]] = {
    "DSH_MODEL": "plugins.cli.model",
    "DSH_MODE": "plugins.permissions.mode",
    "DSH_SESSIONS_DIR": "plugins.persistence-jsonl.root",
}

_DEFAULTS: Final[Mapping[str, Any]] = {"plugins": {"cli": {"model": DEFAULT_MODEL}}}


@attrs.frozen
class Layer:
    """One source of configuration: its label (a path, ``env DSH_MODEL``, ``--model``) and its table."""

    label: str
    data: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class Overrides:
    """What the command line sets: ``--model``, ``--mode`` and each ``--set KEY=VALUE``, in order."""

    model: str | None = None
    mode: str | None = None
    assignments: tuple[tuple[str, Any], ...] = ()


@attrs.frozen
class EffectiveConfig:
    """The merged configuration (``data``, as ``Harness(config=...)`` takes it) and its provenance.

    ``origins`` maps the dotted path of every leaf value to the label of the layer that set it;
    ``layers`` are the labels of every layer that was read, lowest first.
    """

    data: Mapping[str, Any]
    origins: Mapping[str, str]
    layers: tuple[str, ...]

    def get(self, path: str, default: Any = None) -> Any:
        """The value at a dotted path (``plugins.cli.model``), or ``default``."""
        node: Any = self.data
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    def origin(self, path: str) -> str | None:
        """The label of the layer that set ``path``; for a table, the highest layer under it."""
        if path in self.origins:
            return self.origins[path]
        found = [self.origins[key] for key in self.origins if key.startswith(f"{path}.")]
        if not found:
            return None
        return max(found, key=self._rank)

    def _rank(self, label: str) -> int:
        return self.layers.index(label) if label in self.layers else -1

    @property
    def model(self) -> str:
        """``plugins.cli.model``: the model new agents use."""
        value = self.get("plugins.cli.model", DEFAULT_MODEL)
        if not isinstance(value, str):
            where = self.origin("plugins.cli.model") or "configuration"
            msg = f"{where}: plugins.cli.model: expected a model string like {DEFAULT_MODEL!r}, got {value!r}"
            raise ConfigError(msg, source=where, path="plugins.cli.model")
        return value

    def leaves(self) -> Iterator[tuple[str, Any, str]]:
        """Every leaf as ``(dotted path, value, origin)``, in key order."""
        yield from ((path, value, self.origins.get(path, "?")) for path, value in _leaves(self.data, ""))

    def explain(self, error: ConfigError) -> str:
        """``error``'s message, naming the layer that set the value instead of the harness's generic source."""
        origin = self.origin(error.path) if error.path else None
        if origin is None:
            return str(error)
        lines = []
        for line in str(error).splitlines():
            if error.source and line.startswith(f"{error.source}: "):
                line = line.removeprefix(f"{error.source}: ")
            lines.append(f"{origin}: {line}")
        return "\n".join(lines)


def _leaves(node: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    for key in sorted(node):
        value = node[key]
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, f"{path}.")
        else:
            yield path, value


# ---------------------------------------------------------------------- the layers


def user_config_path(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/dsh/config.toml``, ``~/.config/dsh/config.toml`` when it is unset or relative."""
    base = environ.get("XDG_CONFIG_HOME", "")
    if not base or not os.path.isabs(base):
        home = environ.get("HOME") or str(Path.home())
        base = os.path.join(home, ".config")
    return Path(base) / "dsh" / "config.toml"


def find_project_config(start: Path) -> Path | None:
    """The nearest ``dsh.toml``, or ``pyproject.toml`` with a ``[tool.dsh]`` table, at or above ``start``.

    In one directory ``dsh.toml`` wins; a ``pyproject.toml`` without ``[tool.dsh]`` is passed over
    and the search goes on upward.
    """
    for directory in (start, *start.parents):
        candidate = directory / "dsh.toml"
        if candidate.is_file():
            return candidate
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file() and _has_dsh_table(pyproject):
            return pyproject
    return None


def _has_dsh_table(pyproject: Path) -> bool:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # someone else's broken file is not our configuration
    tool = data.get("tool")
    return isinstance(tool, dict) and isinstance(tool.get("dsh"), dict)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        msg = f"{path}: cannot read configuration: {exc.strerror or exc}"
        raise ConfigError(msg, source=str(path)) from exc
    except UnicodeDecodeError as exc:
        msg = f"{path}: not UTF-8 text: {exc}"
        raise ConfigError(msg, source=str(path)) from exc
    except tomllib.TOMLDecodeError as exc:
        msg = f"{path}: not valid TOML: {exc}"
        raise ConfigError(msg, source=str(path)) from exc
    if path.name != "pyproject.toml":
        return data
    tool = data.get("tool", {})
    table = tool.get("dsh", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        msg = f"{path}: tool.dsh: expected a table, got {table!r}"
        raise ConfigError(msg, source=str(path), path="tool.dsh")
    return table


def parse_assignment(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` from ``--set``: the value is read as TOML (``3``, ``true``, ``["a"]``), else kept as text.

    ``KEY`` is a dotted path; ``plugins.`` is added when it does not start with it
    (``retry.max_attempts=1`` sets ``plugins.retry.max_attempts``).

    :raises ValueError: when there is no ``=`` or the key is empty.
    """
    key, eq, raw = _split_assignment(text)
    if not eq or not key or any(not part for part in key.split(".")):
        msg = f"expected KEY=VALUE with a dotted KEY (like retry.max_attempts=3), got {text!r}"
        raise ValueError(msg)
    if not key.startswith("plugins."):
        key = f"plugins.{key}"
    try:
        value: Any = tomllib.loads(f"value = {raw.strip()}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def _split_assignment(text: str) -> tuple[str, str, str]:
    """``KEY``, ``=``, ``VALUE``: a quoted part of the key (``cli.prices."local/m"``) may hold ``=`` and ``/``.

    :raises ValueError: for a quoted part holding a dot (dotted paths name tables; use a file for it).
    """
    parts: list[str] = []
    current = ""
    quoted = False
    for index, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif char == "." and not quoted:
            parts.append(current.strip())
            current = ""
        elif char == "=" and not quoted:
            parts.append(current.strip())
            return ".".join(parts), "=", text[index + 1 :]
        elif char == "." and quoted:
            msg = (
                f"a quoted key part cannot hold a dot in --set (got {text!r}); set it in a configuration file"
            )
            raise ValueError(msg)
        else:
            current += char
    return text.strip(), "", ""


def _nest(path: str, value: Any) -> dict[str, Any]:
    node: dict[str, Any] = {}
    parts = path.split(".")
    cursor = node
    for part in parts[:-1]:
        cursor = cursor.setdefault(part, {})
    cursor[parts[-1]] = value
    return node


def _layers(
    *, cwd: Path, environ: Mapping[str, str], overrides: Overrides, config_file: Path | None
) -> list[Layer]:
    layers = [Layer("default", _DEFAULTS)]
    user = user_config_path(environ)
    if user.is_file():
        layers.append(Layer(str(user), _read_file(user)))
    if config_file is not None:
        if not config_file.is_file():
            msg = f"{config_file}: no such configuration file (given with --config)"
            raise ConfigError(msg, source=str(config_file))
        layers.append(Layer(str(config_file), _read_file(config_file)))
    else:
        project = find_project_config(cwd)
        if project is not None:
            layers.append(Layer(str(project), _read_file(project)))
    for name, path in ENVIRONMENT.items():
        value = environ.get(name, "")
        if value.strip():
            layers.append(Layer(f"env {name}", _nest(path, value.strip())))
    if overrides.model is not None:
        layers.append(Layer("--model", _nest("plugins.cli.model", overrides.model)))
    if overrides.mode is not None:
        layers.append(Layer("--mode", _nest("plugins.permissions.mode", overrides.mode)))
    for key, value in overrides.assignments:
        layers.append(Layer(f"--set {key}", _nest(key, value)))
    return layers


def _merge(
    into: dict[str, Any], layer: Mapping[str, Any], label: str, origins: dict[str, str], prefix: str = ""
) -> None:
    for key, value in layer.items():
        path = f"{prefix}{key}"
        current = into.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            _merge(current, value, label, origins, f"{path}.")
            continue
        for stale in [known for known in origins if known == path or known.startswith(f"{path}.")]:
            del origins[stale]
        if isinstance(value, Mapping):
            into[key] = {}
            _merge(into[key], value, label, origins, f"{path}.")
            if not value:
                origins[path] = label
        else:
            into[key] = copy.deepcopy(value)
            origins[path] = label


def merge_layers(layers: Sequence[Layer]) -> EffectiveConfig:
    """Merge ``layers`` (lowest first) into one configuration, recording each leaf's origin."""
    data: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for layer in layers:
        _merge(data, layer.data, layer.label, origins)
    return EffectiveConfig(data, origins, tuple(layer.label for layer in layers))


def load_config(
    *,
    cwd: Path,
    environ: Mapping[str, str] | None = None,
    overrides: Overrides | None = None,
    config_file: Path | None = None,
) -> EffectiveConfig:
    """Read and merge every layer for a command run in ``cwd``.

    :raises ConfigError: naming the file (or variable, or flag) and what is wrong with it.
    """
    layers = _layers(
        cwd=cwd,
        environ=os.environ if environ is None else environ,
        overrides=overrides or Overrides(),
        config_file=config_file,
    )
    return merge_layers(layers)


def plugin_tables(config: EffectiveConfig) -> Iterable[str]:
    """The names of the plugins the configuration has a table for."""
    tables = config.get("plugins", {})
    return [name for name in tables if name != "disable"] if isinstance(tables, Mapping) else []


def config_from_args(args: argparse.Namespace, *, cwd: Path | None = None) -> EffectiveConfig:
    """The configuration a ``dsh`` command runs with: every layer, then the command line's options.

    Reads ``args.config`` (``--config``) and ``args.assignments`` (``--set``), which ``dsh`` adds to
    every command's parser, plugin commands included, and ``args.model``/``args.mode`` when the
    command has them. The project file is searched from ``cwd`` (default: the current directory).

    :raises ConfigError: for a file, variable or ``--set`` that is not valid, naming it.
    """
    raw_sets: list[str] = list(getattr(args, "assignments", None) or [])
    assignments = []
    for text in raw_sets:
        try:
            assignments.append(parse_assignment(text))
        except ValueError as exc:
            msg = f"--set: {exc}"
            raise ConfigError(msg, source="--set") from exc
    overrides = Overrides(
        model=getattr(args, "model", None), mode=getattr(args, "mode", None), assignments=tuple(assignments)
    )
    config_file = getattr(args, "config", None)
    return load_config(
        cwd=Path.cwd() if cwd is None else cwd,
        overrides=overrides,
        config_file=Path(config_file) if config_file else None,
    )


def max_attempts(config: EffectiveConfig) -> int | None:
    """``plugins.retry.max_attempts``, or the retry plugin's default; ``None`` without the plugin."""
    value = config.get("plugins.retry.max_attempts")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        from dsh_retry import RetryConfig
    except ImportError:
        return None
    return RetryConfig().max_attempts
