"""Permission rules: what a call's main argument is, how patterns match it, and the verdict.

A call is split into *units*, each spelled one or more ways:

* a ``bash`` command: one unit per simple command (``shlex`` reads the words; split at ``;``,
  ``&&``, ``||``, ``|``, ``&`` and newlines outside quotes and substitutions), spelled as written
  minus a subshell's brackets, leading ``{``, ``!``, ``if``/``then``/``do``-style keywords and
  ``NAME=value`` assignments, and also as its words (``'rm' -rf x`` is ``rm -rf x`` too). A unit
  with command or process substitution (``$(...)``, backticks, ``<(...)``) or ANSI-C quoting
  (``$'...'``) is *opaque*: no allow pattern covers it; so is the rest of a line after a quote
  that never closes.
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
import io
import itertools
import os
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

import attrs
from wcmatch import glob as wcglob

from ._config import Action, Rule

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

_KEYWORDS: Final = frozenset({"if", "then", "else", "elif", "do", "while", "until", "time", "!", "{"})
_ASSIGNMENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
#: The characters of bash's operators: shlex cuts words at them and groups runs of them.
_OPERATOR_CHARS: Final = ";&|()<>\n"
#: bash's operators, longest first: how a run of operator characters splits (``);`` is ``)``, ``;``).
_OPERATORS: Final = (
    *("&>>", ";;&", "<<<", "<<-"),
    *("&&", "||", ";;", ";&", "|&", "&>", ">&", "<&", ">>", "<<", ">|", "<>", "<(", ">("),
    *("&", ";", "|", "(", ")", "<", ">", "\n"),
)
#: operators that end a simple command (the others are redirections, kept in its spelling)
_SEPARATORS: Final = frozenset({";", "&", "&&", "||", "|", "|&", ";;", ";&", ";;&", "\n"})
#: what makes a command's text unreadable as what it runs: command and process substitution, and
#: ANSI-C quoting, whose escapes (``$'\''``) shlex does not read; inside double quotes, only the
#: command substitutions
_OPAQUE: Final = re.compile(r"\$\(|`|<\(|>\(|\$'")
_OPAQUE_QUOTED: Final = re.compile(r"\$\(|`")


class _Reader(io.StringIO):
    """The command line as a stream for shlex, counting what it has read so far.

    shlex reads one character past each token (and at most one) unless the text has ended,
    which is how ``_tokens`` knows where each token ends in the text as written.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.position = 0
        self.at_end = False

    def read(self, size: int | None = -1) -> str:
        chunk = super().read(size)
        self.position += len(chunk)
        self.at_end = self.at_end or not chunk
        return chunk


@attrs.frozen
class _Token:
    value: str
    start: int
    end: int
    operator: bool


def _tokens(command: str) -> Iterator[_Token]:
    """shlex's tokens of ``command`` (posix rules; words and operator runs) with their spans.

    :raises ValueError: from shlex, for an unclosed quote or a trailing backslash.
    """
    reader = _Reader(command)
    lexer = shlex.shlex(reader, posix=True, punctuation_chars=_OPERATOR_CHARS)
    lexer.whitespace = " \t\r"  # a newline separates commands, as ';' does
    lexer.whitespace_split = True  # a word is everything up to whitespace or an operator
    lexer.commenters = ""  # '#' stays in the text: a comment hides nothing from the rules
    lexer.quotes = "'\"`"  # a backtick substitution is one word: its ';' splits nothing
    read = 0
    while (value := lexer.get_token()) is not None:
        start = max(read - 1, 0)  # the one character read past the previous token, or later
        while command[start] in lexer.whitespace:
            start += 1
        end = reader.position if reader.at_end else reader.position - 1
        operator = command[start] in _OPERATOR_CHARS
        if operator:
            yield from _operators(value, start)
        else:
            yield _Token(value, start, end, operator=False)
        read = reader.position


def _operators(run: str, start: int) -> Iterator[_Token]:
    """A run of operator characters (``2>&1``'s ``>&``, ``);``) as bash's operators."""
    at = 0
    while at < len(run):
        operator = next(op for op in _OPERATORS if run.startswith(op, at))
        yield _Token(operator, start + at, start + at + len(operator), operator=True)
        at += len(operator)


def _is_opaque(text: str) -> bool:
    """Whether ``text`` (one command as written) substitutes anything outside single quotes."""
    quote: str | None = None
    at = 0
    while at < len(text):
        char = text[at]
        if quote == "'":
            quote = None if char == "'" else quote
        elif char == "\\":
            at += 1  # the escaped character is literal
        elif (_OPAQUE_QUOTED if quote == '"' else _OPAQUE).match(text, at):
            return True
        elif char == '"':
            quote = None if quote == '"' else '"'
        elif char == "'" and quote is None:
            quote = "'"
        at += 1
    return False


def command_units(command: str) -> tuple[Unit, ...]:
    """The simple commands of a shell command line, each flagged when it holds a substitution.

    shlex reads the words, quotes and escapes (and groups operator characters); this function
    cuts at the separators outside substitutions and spells each command two ways: as written,
    and as its words (quotes and escapes removed: ``'rm' -rf x`` is ``rm -rf x``). Text shlex
    cannot read (an unclosed quote) makes the rest of the line one opaque unit.
    """
    units: list[Unit] = []
    words: list[_Token] = []
    #: open brackets: "group" for a subshell, "sub" for a substitution, "paren" for any other
    brackets: list[str] = []
    previous: _Token | None = None

    def text(token: _Token) -> str:
        return command[token.start : token.end]

    def close() -> None:
        if not words:
            return
        opaque = _is_opaque(command[words[0].start : words[-1].end])  # stripped words run too
        # bash reads reserved words and assignments only as written, unquoted
        kept = list(words)
        while kept and not kept[0].operator and (
            text(kept[0]) in _KEYWORDS
            or (_ASSIGNMENT.match(text(kept[0])) and (len(kept) == 1 or kept[1].start > kept[0].end))
        ):
            kept.pop(0)
        while kept and not kept[-1].operator and text(kept[-1]) == "}":
            kept.pop()
        if not kept and opaque:
            kept = list(words)  # `x=$(...)` alone still runs its substitution
        if kept:
            written = command[kept[0].start : kept[-1].end]
            spoken = kept[0].value + "".join(
                (" " if token.start > before.end else "") + token.value
                for before, token in itertools.pairwise(kept)
            )
            units.append(Unit((written,) if spoken == written else (written, spoken), opaque))
        words.clear()

    try:
        for token in _tokens(command):
            value = token.value
            in_substitution = "sub" in brackets
            if not token.operator:
                words.append(token)
            elif value in ("(", "<(", ">("):
                touching_dollar = (
                    previous is not None and previous.end == token.start and command[token.start - 1] == "$"
                )
                if value != "(" or touching_dollar or in_substitution:
                    brackets.append("sub")
                    words.append(token)
                elif words:
                    brackets.append("paren")
                    words.append(token)
                else:
                    brackets.append("group")  # a subshell: its commands are units of their own
            elif value == ")":
                kind = brackets.pop() if brackets else "group"
                if kind == "group":
                    close()
                else:
                    words.append(token)
            elif value in _SEPARATORS and not in_substitution:
                close()
            else:
                words.append(token)  # a redirection, or anything inside a substitution
            previous = token
    except ValueError:
        # No closing quote (or a trailing backslash): what follows cannot be read as commands.
        begin = words[0].start if words else (previous.end if previous is not None else 0)
        rest = command[begin:].strip()
        words.clear()
        if rest:
            units.append(Unit((rest,), opaque=True))
        return tuple(units)
    close()
    return tuple(units)


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
