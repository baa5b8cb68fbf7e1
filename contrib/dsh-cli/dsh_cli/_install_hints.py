"""Which distribution to install for a plugin or a command ``dsh`` does not find, said in the error it prints.

``dsh-harness-cli`` brings the default plugins; the others come one by one or all together with
the ``[all]`` extra. Standard library only: ``dsh web`` without ``dsh-harness-serve`` stays fast.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["COMMAND_PLUGINS", "OPTIONAL_PLUGINS", "install_hint", "missing_table_hint"]

#: the contrib plugins that ``dsh-harness-cli[all]`` adds (entry-point names); each comes in
#: distribution ``dsh-harness-<name>``
OPTIONAL_PLUGINS: Final = (
    "budget", "compaction", "jobs", "mcp", "otel", "persistence-postgres", "persistence-sqlite",
    "questions", "serve", "skills", "spill", "subagents", "temporal", "todo", "web",
)  # fmt: skip

#: the commands (``dsh.commands``) those plugins' distributions add, and the plugin of each
COMMAND_PLUGINS: Final[Mapping[str, str]] = {
    "serve": "serve",
    "web": "serve",
    "mcp": "mcp",
    "worker": "temporal",
}


def install_hint(plugin: str) -> str | None:
    """How to install optional ``plugin`` (a pip command line, and pipx's and uv's ways), or ``None``."""
    if plugin not in OPTIONAL_PLUGINS:
        return None
    distribution = f"dsh-harness-{plugin}"
    return (
        f"pip install {distribution} (dsh installed with pipx: pipx inject dsh-harness-cli {distribution}; "
        "every plugin: pipx or uv tool install 'dsh-harness-cli[all]')"
    )


def missing_table_hint(path: str) -> str | None:
    """For a configuration error at ``path`` = ``plugins.NAME``, NAME an optional plugin that is not
    installed: how to install it (else ``None``)."""
    name = path.removeprefix("plugins.")
    if name == path or "." in name:
        return None
    from importlib.metadata import entry_points

    return None if entry_points(group="dsh", name=name) else install_hint(name)
