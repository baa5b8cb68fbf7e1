"""Configuration of the ``permissions`` plugin: the ``[plugins.permissions]`` table (SPEC §8)."""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

import attrs

__all__ = ["MODES", "Action", "Mode", "PermissionsConfig", "Rule", "SandboxSetting"]

#: What an agent may do: read only, change the workspace (the default), or anything.
Mode: TypeAlias = Literal["read-only", "workspace-write", "full-access"]
#: What a rule does with the calls it matches.
Action: TypeAlias = Literal["allow", "ask", "deny"]
#: Whether ``bash`` runs in the bubblewrap sandbox: when it can (``auto``), always or not at all
#: (``required``: no sandbox, no command), or never (``off``).
SandboxSetting: TypeAlias = Literal["auto", "required", "off"]

MODES: Final[tuple[Mode, ...]] = ("read-only", "workspace-write", "full-access")


def _at_least_one(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{attribute.name} must be a whole number of at least 1, got {value!r}"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class Rule:
    """One entry of ``rules``: ``{tool = "bash", pattern = "git status*", action = "allow"}``.

    ``tool`` is a tool name or a glob over names (``"*"``); it may also carry the pattern in
    the short form ``"bash(git status*)"``. ``pattern`` is a glob over the call's main argument
    (the command for ``bash``, the path for the file tools); without one the rule matches every
    call of the tool.
    """

    tool: str
    action: Action
    pattern: str | None = None


@attrs.frozen(kw_only=True)
class PermissionsConfig:
    """The ``[plugins.permissions]`` table; every key is optional."""

    #: the mode of every agent, unless ``ctx.permissions.set_mode`` switches one (plan mode)
    mode: Mode = "workspace-write"
    #: allow / ask / deny rules; deny always wins, then the first matching allow or ask
    rules: tuple[Rule, ...] = ()
    #: the bubblewrap sandbox for ``bash`` in the read-only and workspace-write modes
    sandbox: SandboxSetting = "auto"
    #: the bubblewrap executable: a name looked up on PATH, or a path
    bwrap: str = "bwrap"
    #: processes one confined command may run at once (SPEC §9.3)
    max_processes: int = attrs.field(default=512, validator=_at_least_one)
    #: more paths hidden from confined commands (exact paths, ``~`` expanded), beyond the built-in
    #: list (``~/.ssh``, ``~/.aws``, ``~/.gnupg``, ``~/.config/gh``, ``~/.netrc``, ``~/.docker``, ``/etc/shadow``...)
    hidden_paths: tuple[str, ...] = ()
    #: more directories confined commands may read (read-only), e.g. a toolchain in the home directory
    read_only_paths: tuple[str, ...] = ()
