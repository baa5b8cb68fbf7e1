"""Permission rules: what a call's main argument is, how patterns match it, and the verdict.

A call is split into *units*, each spelled one or more ways:

* a ``bash`` command: one unit per simple command, as tree-sitter-bash reads the line (see
  ``_shell``), spelled as written and as its words (``'rm' -rf x`` is ``rm -rf x`` too). A unit
  with command or process substitution (``$(...)``, backticks, ``<(...)``), arithmetic or ANSI-C
  quoting (``$'...'``) is *opaque*: no allow pattern covers it (the commands inside it are units
  too); so is the rest of a line the grammar cannot read.
* a path: one unit per location the path names (as written, and with symlinks followed), each
  spelled relative to the workspace (when inside it) and absolute.
* any other tool's main argument (its first required string parameter): one unit, as is.

The verdict: a deny rule matching any unit denies the call. Otherwise each unit takes the first
allow or ask rule (in config order) that matches it. When every unit is covered, the call is
allowed, or asked about if any unit matched an ask rule. When some unit is not covered, the
mode decides; an ask for a covered unit still applies if the mode allows the call.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

import attrs
from wcmatch import glob as wcglob

from ._config import Action, Rule
from ._shell import simple_commands

__all__ = [
    "MAIN_ARGUMENTS",
    "PATH_GLOB_FLAGS",
    "CompiledRule",
    "Kind",
    "MainArgument",
    "PathRaceError",
    "Subject",
    "Unit",
    "Verdict",
    "command_units",
    "compile_rules",
    "evaluate",
    "path_matcher",
    "path_units",
    "text_regex",
]

#: How a main argument is matched: a shell command, a file path, or plain text.
Kind: TypeAlias = Literal["command", "path", "text"]


@attrs.frozen
class MainArgument:
    """The argument a rule's pattern is matched against, for one tool."""

    name: str
    kind: Kind
    #: the value when the call leaves the argument out (the tool's own default)
    default: str | None = None


#: The main argument of the workspace tools. Other tools: their first required string parameter.
MAIN_ARGUMENTS: Final[Mapping[str, MainArgument]] = {
    "bash": MainArgument("command", "command"),
    "read_file": MainArgument("path", "path"),
    "write_file": MainArgument("path", "path"),
    "edit_file": MainArgument("path", "path"),
    "list_dir": MainArgument("path", "path", "."),
    "glob": MainArgument("path", "path", "."),
    "grep": MainArgument("path", "path", "."),
}


@attrs.frozen
class Unit:
    """One thing a call touches, in every spelling a pattern may use for it."""

    spellings: tuple[str, ...]
    #: a command with substitutions: what it runs cannot be read from its text
    opaque: bool = False


@attrs.frozen
class Subject:
    """The main argument of one call, as units; ``text`` is what messages show."""

    kind: Kind | None
    units: tuple[Unit, ...]
    text: str | None = None


# ---------------------------------------------------------------------- patterns


#: The path glob dialect, from wcmatch, with the workspace's glob tool's flags (``**`` across
#: directories, ``{a,b}``, ``*`` matching dotfiles), so that rules and the glob tool agree on
#: every path. A leading ``**`` also matches absolute paths.
PATH_GLOB_FLAGS: Final = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB | wcglob.FORCEUNIX


def path_matcher(pattern: str) -> Callable[[str], bool]:
    """A path glob: ``*`` within a directory, ``**`` across; ``dir/**`` includes ``dir``.

    A relative pattern matches paths spelled relative to the workspace; one starting with ``**``
    also matches absolute paths, and an absolute pattern matches absolute spellings.
    """
    while pattern.startswith("./"):
        pattern = pattern[2:]
    patterns = [pattern, pattern[:-3]] if pattern.endswith("/**") and len(pattern) > 3 else [pattern]
    return wcglob.compile(patterns, flags=PATH_GLOB_FLAGS).match


def text_regex(pattern: str) -> str:
    """A command or text glob as a regex (``fnmatch``): ``*`` and ``?`` match any character, ``/`` included."""
    return fnmatch.translate(pattern)


@attrs.frozen
class CompiledRule:
    """A config rule, checked and ready to match."""

    index: int
    tool: str
    action: Action
    pattern: str | None
    #: the pattern for path arguments and for everything else (``None`` without a pattern)
    _path: Callable[[str], bool] | None = attrs.field(default=None, eq=False, repr=False)
    _text: re.Pattern[str] | None = attrs.field(default=None, eq=False, repr=False)

    @classmethod
    def build(cls, index: int, tool: str, action: Action, pattern: str | None) -> CompiledRule:
        if pattern is None:
            return cls(index, tool, action, None)
        path_pattern = os.path.expanduser(pattern)
        return cls(
            index,
            tool,
            action,
            pattern,
            path_matcher(path_pattern),
            re.compile(text_regex(pattern), re.DOTALL),
        )

    @property
    def label(self) -> str:
        """The rule as a user writes it, e.g. ``ask bash(git push*)``."""
        shown = self.tool if self.pattern is None else f"{self.tool}({self.pattern})"
        return f"{self.action} {shown}"

    def matches_tool(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.tool)

    def matches(self, unit: Unit, kind: Kind | None) -> bool:
        """Whether this rule covers ``unit`` (of a call whose tool it already matched)."""
        if self._text is None:
            return True
        if kind is None or not unit.spellings or (unit.opaque and self.action == "allow"):
            return False
        if kind == "path" and self._path is not None:
            return any(self._path(spelling) for spelling in unit.spellings)
        regex = self._text
        return any(regex.fullmatch(spelling) is not None for spelling in unit.spellings)


_SHORT_FORM = re.compile(r"^\s*([^()\s]+)\s*\((.*)\)\s*$", re.DOTALL)


def compile_rules(rules: Sequence[Rule]) -> tuple[CompiledRule, ...]:
    """Check and compile the config's rules.

    :raises ValueError: naming ``rules[i]`` for an empty tool or pattern, or a pattern given twice.
    """
    compiled = []
    for index, rule in enumerate(rules):
        where = f"plugins.permissions.rules[{index}]"
        tool, pattern = rule.tool.strip(), rule.pattern
        short = _SHORT_FORM.match(tool)
        if short is not None:
            if pattern is not None:
                msg = f"{where}: the pattern is given twice, in tool = {rule.tool!r} and in pattern; keep one"
                raise ValueError(msg)
            tool, pattern = short.group(1), short.group(2)
        if not tool:
            msg = f"{where}: tool is empty; name a tool (e.g. 'bash') or use '*' for every tool"
            raise ValueError(msg)
        if pattern is not None and not pattern.strip():
            msg = f"{where}: the pattern is empty; leave it out to match every call of {tool!r}"
            raise ValueError(msg)
        compiled.append(CompiledRule.build(index, tool, rule.action, pattern))
    return tuple(compiled)


# ---------------------------------------------------------------------- subjects

def command_units(command: str) -> tuple[Unit, ...]:
    """The simple commands of a shell command line, each spelled as written and as its words."""
    return tuple(
        Unit((found.written,) if found.spoken == found.written else (found.written, found.spoken), found.opaque)
        for found in simple_commands(command)
    )


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _spellings(location: str, root: str | None) -> tuple[str, ...]:
    if root is not None and _within(location, root):
        relative = "." if location == root else os.path.relpath(location, root)
        return (relative, location)
    return (location,)


class PathRaceError(ValueError):
    """A path kept changing while its symlinks were followed (a symlink swapped in and out)."""


#: tries at following a path's symlinks while they change under it
_RESOLVE_TRIES: Final = 3


def _realpath(path: str) -> str:
    # os.path.realpath raises when a symlink it found vanishes before it reads it (a race).
    for _ in range(_RESOLVE_TRIES - 1):
        try:
            return os.path.realpath(path)
        except OSError:
            continue
    try:
        return os.path.realpath(path)
    except OSError as exc:
        msg = f"the path {path!r} kept changing while its symlinks were followed ({exc.strerror or exc})"
        raise PathRaceError(msg) from None


def path_units(raw: str, cwd: str | None) -> tuple[Unit, ...]:
    """The locations a path argument names, as written and with symlinks followed (blocking).

    :raises PathRaceError: when the path keeps changing while it is resolved.
    """
    expanded = os.path.expanduser(raw)
    if cwd is None:
        return (Unit((os.path.normpath(expanded),)),)
    lexical_root = os.path.normpath(os.path.abspath(cwd))
    real_root = _realpath(cwd)
    lexical = os.path.normpath(os.path.join(lexical_root, expanded))
    real = _realpath(os.path.join(real_root, expanded))
    units = [Unit(_spellings(lexical, lexical_root))]
    real_unit = Unit(_spellings(real, real_root))
    if real_unit not in units:
        units.append(real_unit)
    return tuple(units)


def argument_text(parsed: Mapping[str, Any] | None, main: MainArgument) -> str | None:
    """The main argument's value in the call, its default when left out, or ``None``."""
    value = (parsed or {}).get(main.name, main.default)
    return value if isinstance(value, str) else None


# ---------------------------------------------------------------------- verdict


@attrs.frozen
class Verdict:
    """What the policy says about a call: ``allow``, ``ask`` or ``deny``, why, and which rule decided."""

    action: Action
    reason: str | None = None
    rule: CompiledRule | None = None


def _shown(name: str, subject: Subject) -> str:
    if subject.text is None:
        return f"{name!r}"
    text = subject.text if len(subject.text) <= 200 else subject.text[:200] + "..."
    return f"{name} {text!r}"


def evaluate(rules: Iterable[CompiledRule], name: str, subject: Subject, baseline: Verdict) -> Verdict:
    """The verdict on a call of tool ``name`` with ``subject``, given the mode's ``baseline``."""
    applicable = [rule for rule in rules if rule.matches_tool(name)]
    units = subject.units or (Unit(()),)
    deny_units = units
    if subject.kind == "command" and subject.text is not None:
        deny_units = (*units, Unit((subject.text.strip(),), opaque=True))
    for rule in applicable:
        if rule.action == "deny" and any(rule.matches(unit, subject.kind) for unit in deny_units):
            reason = (
                f"the permissions rule '{rule.label}' (plugins.permissions.rules[{rule.index}]) forbids it"
            )
            return Verdict("deny", reason, rule)
    widening = [rule for rule in applicable if rule.action != "deny"]
    decided = [next((rule for rule in widening if rule.matches(unit, subject.kind)), None) for unit in units]
    ask = next((rule for rule in decided if rule is not None and rule.action == "ask"), None)
    covered = all(rule is not None for rule in decided)
    if not covered and baseline.action == "deny":
        return baseline
    if ask is not None:
        reason = f"{_shown(name, subject)} matches the permissions rule '{ask.label}', which asks first"
        return Verdict("ask", reason, ask)
    if covered:
        return Verdict("allow", None, decided[0])
    return baseline
