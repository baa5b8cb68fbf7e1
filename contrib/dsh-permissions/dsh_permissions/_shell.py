"""A shell command line as the simple commands bash would run, read by tree-sitter-bash.

Splitting a command line is security-critical parsing: a rule ``allow bash(git status*)`` must
not cover ``git status; rm -rf ~``. So the line is read by a real bash grammar (the one Codex CLI
uses for the same job) rather than by hand, and every simple command in it is found wherever it
sits: in a pipeline or list, a subshell or brace group, an ``if``/``for``/``case`` body, a function
body, or inside a command or process substitution. Each is spelled as written (minus leading
``NAME=value`` assignments and the reserved words ``!``, ``{`` and ``time``, plus its redirections)
and as its words (quotes and escapes removed: ``'rm' -rf x`` is ``rm -rf x``).

A command is *opaque* when what it runs cannot be read from its text: it holds a command or process
substitution, an arithmetic expansion or ANSI-C quoting (``$'...'``); the commands inside its
substitutions are listed too. A substitution outside any command (``x=$(id)``, ``for f in $(ls)``)
is an opaque command of its own. Text the grammar cannot read (an unclosed quote, a stray ``)``)
makes the rest of the line, from the command it breaks, one opaque command. So does a reading of
the grammar's that bash would not share (see ``_commands``): the grammar is checked, not trusted,
and ``tests/test_shell_agreement.py`` holds it to bash itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

import attrs
import tree_sitter_bash
from tree_sitter import Language, Node, Parser

__all__ = ["SimpleCommand", "simple_commands"]

_BASH: Final = Language(tree_sitter_bash.language())

#: nodes that run one simple command (``[[ ]]``, ``export``, ``unset`` are commands too)
_COMMANDS: Final = frozenset({"command", "declaration_command", "unset_command", "test_command"})
#: nodes whose text does not say what runs
_OPAQUE: Final = frozenset(
    {"command_substitution", "process_substitution", "arithmetic_expansion", "ansi_c_string"}
)
#: commands made of commands (the grammar sometimes reads one as a word of a misread ``{`` or ``!``)
_COMPOUND: Final = frozenset(
    {"subshell", "compound_statement", "if_statement", "for_statement", "c_style_for_statement",
     "while_statement", "case_statement", "function_definition", "negated_command", "pipeline", "list"}
)  # fmt: skip
#: nodes whose words are unquoted text
_UNQUOTED: Final = frozenset({"word", "command_name", "concatenation"})
#: the leading children of a ``command`` that bash does not run as its words
_ASSIGNMENTS: Final = frozenset({"variable_assignment", "variable_assignments"})
#: characters that end a command in the text between two commands
_SEPARATOR_CHARS: Final = frozenset(";&|\n(){}")
_ESCAPE: Final = re.compile(r"\\(.)", re.DOTALL)
#: inside double quotes a backslash escapes only these (bash's rule)
_ESCAPE_IN_DOUBLE_QUOTES: Final = re.compile(r"\\([$`\"\\\n])")
#: words bash reads as reserved when they stand first, unquoted; the grammar misses some of them
_RESERVED: Final = frozenset(
    {"!", "{", "}", "[[", "]]", "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for",
     "function", "if", "in", "select", "then", "time", "until", "while"}
)  # fmt: skip
_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_LINE_CONTINUATIONS: Final = re.compile(r"\\\n")
#: what may stand between two words of a command: blanks, escaped blanks, line continuations
_BETWEEN_WORDS: Final = re.compile(r"(?:[ \t\r\n]|\\[ \t\n])+")
_ESCAPED_BLANK_AFTER: Final = re.compile(r"(?:[ \t]|\\\n)*\\[ \t]")
_ESCAPE_OR_BLANKS: Final = re.compile(r"\\(.)|[ \t\r\n]+", re.DOTALL)
#: a blank, operator or quote in an unquoted word that no backslash escapes: bash ends the word there
_BARE_SPECIAL: Final = re.compile(r"(?:^|[^\\])(?:\\\\)*[ \t\r\n;&|()<>'\"]")
#: leading reserved words that only change how the command's status is read or timed
_PREFIX_WORDS: Final = frozenset({"!", "{", "time"})


@attrs.frozen
class SimpleCommand:
    """One command of the line: as written, as its words, and where it is (byte offsets)."""

    written: str
    spoken: str
    opaque: bool
    start: int
    end: int


def simple_commands(line: str) -> tuple[SimpleCommand, ...]:
    """The simple commands of ``line``, in the order they are written (outer before inner)."""
    source = line.encode("utf-8", "surrogatepass")
    root = Parser(_BASH).parse(source).root_node
    found = list(_walk(root, _Text(source), inside_command=False))
    if not root.has_error:
        return tuple(found)
    return _cut_at_error(found, _first_error(root), _Text(source))


class _Text:
    """The line's text by byte offsets, which is how tree-sitter counts."""

    def __init__(self, source: bytes) -> None:
        self.source = source

    def between(self, start: int, end: int) -> str:
        return self.source[start:end].decode("utf-8", "surrogatepass")

    def of(self, node: Node) -> str:
        return self.between(node.start_byte, node.end_byte)


def _walk(node: Node, text: _Text, *, inside_command: bool) -> Iterator[SimpleCommand]:
    if node.type == "redirected_statement":
        body = node.child_by_field_name("body")
        if body is not None and body.type in _COMMANDS:
            redirects = [child for child in node.named_children if child.id != body.id]
            yield from _commands(body, redirects, text)
            inside_command = True
    elif node.type in _COMMANDS:
        if not inside_command:  # a redirected one was spelled with its redirections above
            yield from _commands(node, [], text)
        inside_command = True
    elif node.type in _OPAQUE and not inside_command:
        spelled = text.of(node)
        yield SimpleCommand(spelled, spelled, True, node.start_byte, node.end_byte)
        inside_command = True
    # the commands inside a substitution, or a compound command misread as a word, are their own
    inside_command = inside_command and node.type not in _OPAQUE and node.type not in _COMPOUND
    for child in node.children:
        yield from _walk(child, text, inside_command=inside_command)


def _commands(node: Node, redirects: list[Node], text: _Text) -> Iterator[SimpleCommand]:
    """One command node, spelled; two or more where the grammar glued commands across a newline.

    The grammar (tree-sitter-bash 0.25) misreads a few things that bash reads plainly, so its
    reading is checked here rather than trusted. It reads ``git status``, a newline, ``\\rm -rf /``
    as one command (the newline starts the word ``\\rm``) where bash runs two, so a bare newline
    between words cuts the command. It can read a comment as words, which are dropped. It leaves
    escaped blanks (``\\ ``) out of the words, so the text between words is read too. A command
    whose words it got wrong in another way (text between them that is not blank, a token that is
    no word, a word bash would have cut) is opaque.
    """
    piece: list[Node] = []
    skipped = in_comment = False
    previous_end = node.start_byte
    for part in [*node.children, *redirects]:
        if part.type == "comment":
            continue
        gap = text.between(previous_end, _start(part, text)) if piece or in_comment else ""
        previous_end = part.end_byte
        if "\n" in _LINE_CONTINUATIONS.sub("", gap):
            if piece:
                yield from _command(node, piece, text, skipped=skipped)
            piece, skipped, in_comment = [], False, False
        if in_comment or (gap and part.type == "word" and _bare(part, text).startswith("#")):
            in_comment = True  # a comment the grammar read as words: it runs to the line's end
            continue
        # text between the words, a token that is no word (``==``), a word bash would have cut
        skipped = skipped or bool(_BETWEEN_WORDS.sub("", gap)) or not part.is_named or _misread(part, text)
        piece.append(part)
    if piece:
        yield from _command(node, piece, text, skipped=skipped)


def _start(node: Node, text: _Text) -> int:
    """Where ``node``'s text starts, past blanks the grammar put at its front (the glued newline)."""
    source = text.source[node.start_byte : node.end_byte]
    return node.start_byte + len(source) - len(source.lstrip(b" \t\r\n"))


def _command(node: Node, parts: list[Node], text: _Text, *, skipped: bool) -> Iterator[SimpleCommand]:
    end = parts[-1].end_byte
    # an escaped blank the grammar left out at the end: ``y \\ ;`` passes y the word " "
    dropped = _ESCAPED_BLANK_AFTER.match(text.between(end, len(text.source))) is not None
    opaque = skipped or dropped or any(_holds_opaque(part) for part in parts)
    if node.type != "command":
        start = _start(parts[0], text)
        written = text.between(start, end)
        yield SimpleCommand(written, written, opaque, start, end)
        return
    words = parts
    # assignments, and reserved words the grammar read as words (``! { a; }``, ``time -p a``)
    while len(words) > 1 and (_assigns(words[0], text) or _bare(words[0], text) in _PREFIX_WORDS):
        timed = _bare(words[0], text) == "time" and _bare(words[1], text) == "-p"
        words = words[2:] if timed and len(words) > 2 else words[1:]
    if words[0].type in _COMPOUND:
        return  # ``! { ( a ); }``: the grammar read ``{`` as a command of a subshell, listed apart
    first = _bare(words[0], text)
    if first == "}" and len(words) == 1:
        return  # the end of a brace group the grammar read as a command
    opaque = opaque or first in _RESERVED  # a compound command the grammar did not read
    start = _start(words[0], text)
    spoken = "".join(
        (_gap_spoken(text.between(words[index - 1].end_byte, _start(part, text))) if index else "")
        + _spoken(part, text)
        for index, part in enumerate(words)
    )
    if _assigns(words[0], text):  # assignments only: nothing but their substitutions runs
        spoken = text.between(start, end)
    yield SimpleCommand(text.between(start, end), spoken, opaque, start, end)


def _gap_spoken(gap: str) -> str:
    """The text between two words as it joins them: escaped blanks kept, other blanks one space."""
    return _ESCAPE_OR_BLANKS.sub(_escape_or_blank, _LINE_CONTINUATIONS.sub("", gap))


def _escape_or_blank(match: re.Match[str]) -> str:
    return " " if match.group(1) is None else match.group(1)


def _misread(node: Node, text: _Text) -> bool:
    """Whether an unquoted word holds what bash would have ended it at (``{ {`` as one word)."""
    if node.type == "word":
        return bool(_BARE_SPECIAL.search(_LINE_CONTINUATIONS.sub("", _bare(node, text))))
    return any(_misread(child, text) for child in node.children if child.type in _UNQUOTED)


def _assigns(node: Node, text: _Text) -> bool:
    """Whether a leading word is ``NAME=value`` (bash reads it so after a misread ``!`` too)."""
    return node.type in _ASSIGNMENTS or _ASSIGNMENT.match(_bare(node, text)) is not None


def _bare(node: Node, text: _Text) -> str:
    """A word's text as written, for recognising reserved words (quoted ones are not reserved)."""
    return text.between(_start(node, text), node.end_byte)


def _holds_opaque(node: Node) -> bool:
    return node.type in _OPAQUE or any(_holds_opaque(child) for child in node.children)


def _spoken(node: Node, text: _Text) -> str:
    """A word as bash passes it to the program: quotes and escapes gone, expansions as written."""
    written = text.between(_start(node, text), node.end_byte)
    kind = node.type
    if kind == "command_name" or kind == "concatenation":
        if not node.named_children:
            return _unescape(written)
        return "".join(_spoken(child, text) for child in node.children)
    if kind == "word":
        return _unescape(written)
    if kind == "raw_string":
        return written[1:-1]
    if kind == "string":
        return _ESCAPE_IN_DOUBLE_QUOTES.sub(_escaped, written[1:-1])
    return written


def _unescape(word: str) -> str:
    return _ESCAPE.sub(_escaped, word)


def _escaped(match: re.Match[str]) -> str:
    """A backslash escape as bash reads it: the character, or nothing for a line continuation."""
    return "" if match.group(1) == "\n" else match.group(1)


def _first_error(root: Node) -> int:
    """Where the grammar first could not read the line (an ``ERROR`` or a missing token)."""
    starts = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            starts.append(node.start_byte)
        elif node.has_error:
            stack.extend(node.children)
    return min(starts, default=len(root.text or b""))


def _cut_at_error(found: list[SimpleCommand], broken_at: int, text: _Text) -> tuple[SimpleCommand, ...]:
    """The commands before the error, the rest of the line as one opaque command, then what follows.

    The rest starts at the command the error breaks: one that spans it, or the one just before it
    when no separator stands between them (``echo 'unclosed`` breaks ``echo``).
    """
    rest_start = broken_at
    for command in found:
        if command.start < broken_at < command.end:
            rest_start = min(rest_start, command.start)
        elif command.end <= broken_at and not _SEPARATOR_CHARS & set(text.between(command.end, broken_at)):
            rest_start = min(rest_start, command.start)
    before = [command for command in found if command.end <= rest_start]
    # what the grammar read after the error: listed for deny and ask rules, never allowed
    after = [attrs.evolve(command, opaque=True) for command in found if command.start >= broken_at]
    rest = text.between(rest_start, len(text.source)).strip()
    if rest:
        before.append(SimpleCommand(rest, rest, True, rest_start, len(text.source)))
    return (*before, *after)
