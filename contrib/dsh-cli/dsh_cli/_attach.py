"""``@path`` in a chat prompt: the workspace file's text goes with the prompt; Tab completes slash commands and paths.

A word ``@some/file.py`` that names a text file inside the workspace attaches it: the prompt keeps
its words, and each file follows as ``<file path="...">`` context. A word that names no such file
(an e-mail address, a decorator) is left as it is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final

import attrs
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from ._diff import read_text

__all__ = ["MAX_ATTACHED_CHARS", "Attachment", "ChatCompleter", "attach_files"]

#: the most characters of one attached file
MAX_ATTACHED_CHARS: Final = 100_000
_MENTION: Final = re.compile(r"(?<!\S)@([^\s@]+)")


@attrs.frozen
class Attachment:
    """A file attached with ``@``: its path as typed, and its text (cut to ``MAX_ATTACHED_CHARS``)."""

    path: str
    text: str
    lines: int
    cut: bool = False


def _inside(root: Path, path: Path) -> bool:
    return path == root or root in path.parents


def attach_files(prompt: str, workspace: Path) -> tuple[str, list[Attachment]]:
    """The prompt with the ``@path`` files it names appended as context, and those files."""
    root = workspace.resolve()
    attached: list[Attachment] = []
    seen: set[Path] = set()
    for match in _MENTION.finditer(prompt):
        raw = match.group(1).rstrip(".,;:!?)")
        candidate = (root / raw).resolve()
        if candidate in seen or not _inside(root, candidate) or not candidate.is_file():
            continue
        text = read_text(candidate)
        if text is None:
            continue
        seen.add(candidate)
        cut = len(text) > MAX_ATTACHED_CHARS
        shown = text[:MAX_ATTACHED_CHARS] if cut else text
        attached.append(Attachment(raw, shown, text.count("\n") + (0 if text.endswith("\n") else 1), cut))
    if not attached:
        return prompt, []
    parts = [prompt]
    for file in attached:
        note = f" cut=\"first {MAX_ATTACHED_CHARS} characters\"" if file.cut else ""
        parts.append(f'<file path="{file.path}"{note}>\n{file.text.rstrip()}\n</file>')
    return "\n\n".join(parts), attached


class ChatCompleter(Completer):
    """Tab completion: slash commands at the start of the line, workspace paths after ``@``."""

    def __init__(self, commands: Sequence[str], workspace: Callable[[], Path]) -> None:
        self._commands = tuple(commands)
        #: the current session's workspace (a resumed session keeps its own)
        self._workspace = workspace

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and " " not in before:
            for command in self._commands:
                if command.startswith(before):
                    yield Completion(command, start_position=-len(before))
            return
        word = before.rsplit(None, 1)[-1] if before.strip() else ""
        if word.startswith("@") and not before.endswith((" ", "\n")):
            yield from self._paths(word[1:])

    def _paths(self, typed: str) -> Iterator[Completion]:
        folder, _, prefix = typed.rpartition("/")
        root = self._workspace()
        base = (root / folder) if folder else root
        try:
            entries = sorted(os.scandir(base), key=lambda entry: entry.name)
        except OSError:
            return
        for entry in entries:
            if not entry.name.startswith(prefix) or (entry.name.startswith(".") and not prefix.startswith(".")):
                continue
            suffix = "/" if entry.is_dir() else ""
            shown = f"{folder}/{entry.name}" if folder else entry.name
            yield Completion(f"{shown}{suffix}", start_position=-len(typed), display=f"{entry.name}{suffix}")
