"""``dsh plugins`` and ``dsh config``: what is installed, and the effective configuration with each value's origin."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import attrs
import importlib_metadata
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dsh_core import ENTRY_POINT_GROUP, installed_plugins

from ._config import EffectiveConfig
from ._render import format_window
from ._sanitize import clean_line
from ._stdout import output_console

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = [
    "config_command",
    "models_command",
    "plugin_defaults",
    "plugins_command",
    "toml_key",
    "toml_value",
    "validate_config",
]


def _disabled(config: EffectiveConfig) -> set[str]:
    listed = config.get("plugins.disable", [])
    names = set(listed) if isinstance(listed, list) else set()
    names |= {name.strip() for name in os.environ.get("DSH_DISABLE_PLUGINS", "").split(",") if name.strip()}
    return names


def plugins_command(config: EffectiveConfig) -> int:
    """Print a table of the installed plugins (piped: whole rows, not cut to 80 columns)."""
    console = output_console()
    disabled = _disabled(config)
    table = Table(title="dsh plugins", title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("name", style="bold")
    table.add_column("distribution")
    table.add_column("provides")
    table.add_column("requires")
    table.add_column("hooks", overflow="fold")
    for info in installed_plugins():
        origin = f"{info.distribution} {info.version}" if info.distribution else "?"
        name = Text(info.name, style="dim strike" if info.name in disabled else "bold")
        hooks = ", ".join(hook.removeprefix("dsh_") for hook in info.hooks)
        table.add_row(
            name, origin, ", ".join(info.provides) or "-", ", ".join(info.requires) or "-", hooks or "-"
        )
    console.print(table)
    if disabled:
        console.print(Text(f"disabled: {', '.join(sorted(disabled))}", style="dim"))
    _print_commands(console)
    return 0


def _print_commands(console: Console) -> None:
    """The subcommands installed plugins add (entry points ``dsh.commands``; listed, not imported)."""
    from ._args import BUILTIN_COMMANDS
    from ._commands import command_entry_points

    found = command_entry_points()
    if not found:
        return
    console.print()
    console.print(Text("commands from plugins:", style="bold"))
    for name, ep in sorted(found.items()):
        origin = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "?"
        note = "  (ignored: a dsh command has this name)" if name in BUILTIN_COMMANDS else ""
        console.print(Text(f"  dsh {name}  ({origin}, {ep.value}){note}"))


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(item) for item in value]
    if isinstance(value, PurePath):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def plugin_defaults() -> dict[str, dict[str, Any]]:
    """The default ``Config`` of every installed plugin that has one and can build it with no arguments."""
    defaults: dict[str, dict[str, Any]] = {}
    for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            config_class = getattr(ep.load(), "Config", None)
            if config_class is None or not attrs.has(config_class):
                continue
            defaults[ep.name] = _jsonable(attrs.asdict(config_class(), recurse=True))
        except Exception:  # noqa: BLE001 - a plugin without buildable defaults just shows none
            continue
    return defaults


def toml_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return '""  # none'
    return json.dumps(value, ensure_ascii=False)


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _rows(config: EffectiveConfig) -> list[tuple[str, Any, str]]:
    rows = {path: (path, value, origin) for path, value, origin in config.leaves()}
    for plugin, table in plugin_defaults().items():
        for key, value in table.items():
            path = f"plugins.{plugin}.{key}"
            if path not in rows and config.origin(path) is None:
                rows[path] = (path, value, f"default of plugin {plugin}")
    return [rows[path] for path in sorted(rows)]


def _tables(rows: list[tuple[str, Any, str]]) -> dict[str, list[tuple[str, Any, str]]]:
    """The rows grouped by their table, in the order TOML needs: a table's own keys before its sub-tables.

    A table is printed once, whole: ``[plugins.openai]`` cannot come back after
    ``[plugins.openai.providers.local]`` (that would be a second, invalid ``[plugins.openai]``).
    """
    grouped: dict[str, list[tuple[str, Any, str]]] = {}
    for path, value, origin in rows:
        table, _, key = path.rpartition(".")
        grouped.setdefault(table, []).append((key, value, origin))
    return {table: grouped[table] for table in sorted(grouped, key=lambda name: name.split("."))}


async def validate_config(config: EffectiveConfig) -> None:
    """Start (and stop) the harness with ``config``, as ``dsh run`` would: every plugin checks its table.

    :raises CliError: naming the layer that set a value a plugin refuses.
    """
    from ._launch import open_harness

    async with open_harness(config):
        pass


def config_command(config: EffectiveConfig, *, json_output: bool = False) -> int:
    """Print the effective configuration, each value with the layer it came from, then check it.

    The output is printed even when a plugin refuses a value (to see what is wrong), followed by
    the error; the exit status is then 3.
    """
    rows = _rows(config)
    if json_output:
        print(
            json.dumps(
                {
                    "layers": list(config.layers),
                    "values": [
                        {"path": path, "value": _jsonable(value), "origin": origin}
                        for path, value, origin in rows
                    ],
                },
                indent=2,
            )
        )
    else:
        _print_toml(config, rows)
    import anyio

    anyio.run(validate_config, config, backend="asyncio")
    return 0


def _print_toml(config: EffectiveConfig, rows: list[tuple[str, Any, str]]) -> None:
    console = output_console()
    console.print(Text("# layers, lowest precedence first:", style="dim"), soft_wrap=True)
    for label in config.layers:
        console.print(Text(f"#   {clean_line(label)}", style="dim"), soft_wrap=True)
    for table, keys in _tables(rows).items():
        console.print()
        console.print(Text(f"[{'.'.join(toml_key(part) for part in table.split('.'))}]", style="bold"))
        for key, value, origin in keys:
            plain = _jsonable(value)
            # None has no TOML spelling: show the key commented out, so the output stays valid TOML.
            prefix = "# " if plain is None else ""
            shown = "(unset)" if plain is None else toml_value(plain)
            line = Text(f"{prefix}{toml_key(key)} = {shown}")
            line.append(f"  # {clean_line(origin)}", style="dim" if origin.startswith("default") else "cyan")
            console.print(line, soft_wrap=True)  # never wrapped: every line stays one TOML line


def _price_text(ctx: Context, model: str) -> str:
    """``0.15 / 0.60``: the model's prices per million input and output tokens (``ModelInfo.prices``), or ``-``."""
    try:
        prices = ctx.llm.model_info(model).prices
    except (LookupError, TypeError, ValueError):
        prices = None
    return "-" if prices is None else f"{prices.input:.2f} / {prices.output:.2f}"


async def models_command(config: EffectiveConfig) -> int:
    """Print the providers with an adapter and the models each is configured with (``*``: the default)."""
    from ._launch import api_key_env, open_harness

    console = output_console()
    table = Table(show_edge=False, pad_edge=False, box=None)
    for column in ("", "model", "context", "max output", "price in / out", "API key"):
        table.add_column(
            column, no_wrap=True, justify="right" if column in ("context", "max output", "price in / out") else "left"
        )
    default = config.model
    async with open_harness(config) as ctx:
        for provider in ctx.llm.providers:
            _, _, adapter = ctx.llm.resolve(f"{provider}/-")
            env = api_key_env(adapter, provider, config)
            key = (
                "not needed"
                if env is None
                else f"{env} ({'set' if os.environ.get(env, '').strip() else 'not set'})"
            )
            models = getattr(adapter, "models", None)
            if not isinstance(models, Mapping) or not models:
                table.add_row("", Text(f"{provider}/…"), "-", "-", "-", Text(key))
                continue
            for name, info in sorted(models.items()):
                ident = f"{provider}/{name}"
                table.add_row(
                    "*" if ident == default else "",
                    Text(clean_line(ident)),
                    format_window(int(info.context_window)),
                    format_window(int(info.max_output_tokens)),
                    _price_text(ctx, ident),
                    Text(key),
                )
    console.print(table)
    console.print(
        Text(f"* the default model ({config.origin('plugins.cli.model') or 'default'})", style="dim")
    )
    return 0
