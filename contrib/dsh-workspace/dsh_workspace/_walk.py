"""Glob patterns (wcmatch) and the directory walk shared by the glob tool and the Python grep.

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
from collections.abc import Callable, Iterator
from typing import Final

import bracex
from wcmatch import glob as wcglob

__all__ = ["GLOB_FLAGS", "SKIPPED_DIRS", "compile_glob", "glob_patterns", "walk"]

#: directory names never descended into
SKIPPED_DIRS = frozenset({".git"})
#: brace alternatives a pattern may expand to
_MAX_ALTERNATIVES: Final = 1000


#: The glob dialect, from wcmatch: ``**`` across directories, ``{a,b}``, ``*`` matching dotfiles too.
#: The permissions plugin matches path rules with the same flags, so that both agree on every path.
GLOB_FLAGS: Final = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB | wcglob.FORCEUNIX


def glob_patterns(pattern: str) -> list[str]:
    """``pattern`` as wcmatch patterns: a leading ``./`` dropped, and ``dir/**`` matching ``dir`` itself too."""
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if pattern.endswith("/**") and len(pattern) > 3:
        return [pattern, pattern[:-3]]
    return [pattern]


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
    try:
        alternatives = bracex.expand(pattern, limit=_MAX_ALTERNATIVES)
    except bracex.ExpansionLimitException:
        msg = f"the glob pattern {pattern!r} expands to more than {_MAX_ALTERNATIVES} alternatives; simplify its braces"
        raise ValueError(msg) from None
    if any(".." in alternative.split("/") for alternative in alternatives):
        msg = f"the glob pattern {pattern!r} contains '..'; search from a different path instead"
        raise ValueError(msg)
    matcher = wcglob.compile(glob_patterns(pattern), flags=GLOB_FLAGS)
    if any("**" in alternative for alternative in alternatives):
        depth: int | None = None
    else:
        depth = max(
            len([s for s in alternative.split("/") if s not in ("", ".")]) for alternative in alternatives
        )
    return matcher.match, depth


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
