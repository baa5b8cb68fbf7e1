"""Glob patterns and the directory walk shared by the glob tool and the Python grep.

Pattern syntax, matched against paths relative to the directory searched, with ``/`` separators:
``*`` any characters but ``/``; ``?`` one character but ``/``; ``[abc]`` / ``[!abc]`` a class;
``**`` as a whole segment any number of directories (``src/**/*.py``; a trailing ``/**`` is
everything below); ``{a,b}`` alternatives (``*.{py,md}``). Dotfiles match like other names.
A pattern without ``/`` matches only at the top level, as in a shell: use ``**/*.py`` to recurse.

The walk does not follow symlinked directories (a link cannot lead it out of the workspace)
and skips ``.git`` directories.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator

__all__ = ["SKIPPED_DIRS", "compile_glob", "expand_braces", "walk"]

#: directory names never descended into
SKIPPED_DIRS = frozenset({".git"})


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ``["abd", "acd"]``; nested braces expand too; unbalanced braces stay literal."""
    depth = 0
    start = -1
    for index, char in enumerate(pattern):
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                options = _split_top_level(pattern[start + 1 : index])
                if len(options) < 2:
                    continue
                head, tail = pattern[:start], pattern[index + 1 :]
                out: list[str] = []
                for option in options:
                    out.extend(expand_braces(head + option + tail))
                return out
    return [pattern]


def _split_top_level(body: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for char in body:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        current += char
    parts.append(current)
    return parts


def _segment_regex(segment: str) -> str:
    out = ""
    index = 0
    while index < len(segment):
        char = segment[index]
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "[":
            end = segment.find("]", index + 2 if segment[index + 1 : index + 2] in ("!", "^") else index + 1)
            if end == -1:
                out += re.escape(char)
            else:
                body = segment[index + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out += "[" + body.replace("\\", "\\\\") + "]"
                index = end
        else:
            out += re.escape(char)
        index += 1
    return out


def _glob_regex(pattern: str) -> str:
    segments = [segment for segment in pattern.split("/") if segment not in ("", ".")]
    out = ""
    for position, segment in enumerate(segments):
        last = position == len(segments) - 1
        if segment == "**":
            out += ".*" if last else "(?:[^/]+/)*"
        else:
            out += _segment_regex(segment) + ("" if last else "/")
    if segments and segments[-1] == "**" and len(segments) > 1:
        # `docs/**` also matches `docs` itself
        out = out[: -len("/.*")] + "(?:/.*)?"
    return out


def compile_glob(pattern: str) -> tuple[Callable[[str], bool], int | None]:
    """A matcher for relative posix paths, and the deepest level a match can lie at (``None``: any).

    :raises ValueError: for an empty or absolute pattern, or one with a ``..`` segment.
    """
    if not pattern.strip():
        msg = "the glob pattern is empty; for example '**/*.py'"
        raise ValueError(msg)
    if pattern.startswith(("/", "~")):
        msg = f"the glob pattern {pattern!r} is absolute; patterns are relative to the directory searched (path)"
        raise ValueError(msg)
    alternatives = expand_braces(pattern)
    if any(".." in alternative.split("/") for alternative in alternatives):
        msg = f"the glob pattern {pattern!r} contains '..'; search from a different path instead"
        raise ValueError(msg)
    regex = re.compile("|".join(f"(?:{_glob_regex(alternative)})" for alternative in alternatives))
    if any("**" in alternative for alternative in alternatives):
        depth: int | None = None
    else:
        depth = max(
            len([s for s in alternative.split("/") if s not in ("", ".")]) for alternative in alternatives
        )

    def matches(relative: str) -> bool:
        return regex.fullmatch(relative) is not None

    return matches, depth


def walk(
    base: str, *, max_depth: int | None = None, check: Callable[[], None] = lambda: None
) -> Iterator[tuple[str, str, bool]]:
    """``(relative posix path, absolute path, is_dir)`` for everything below ``base``, sorted per directory.

    Symlinked directories are listed but not entered; ``.git`` is skipped. ``check`` runs once
    per directory (a cancellation check: it raises to stop the walk).
    """
    for directory, dirnames, filenames in os.walk(base, followlinks=False):
        check()
        relative_dir = os.path.relpath(directory, base)
        prefix = "" if relative_dir == "." else relative_dir.replace(os.sep, "/") + "/"
        depth = 0 if not prefix else prefix.count("/")
        dirnames[:] = sorted(name for name in dirnames if name not in SKIPPED_DIRS)
        if max_depth is not None and depth + 1 >= max_depth:
            descend: list[str] = []
        else:
            descend = [name for name in dirnames if not os.path.islink(os.path.join(directory, name))]
        for name in dirnames:
            yield prefix + name, os.path.join(directory, name), True
        for name in sorted(filenames):
            yield prefix + name, os.path.join(directory, name), False
        dirnames[:] = descend
