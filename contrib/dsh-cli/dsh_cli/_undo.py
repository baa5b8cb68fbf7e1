"""``/undo``: what the file tools changed in each turn, kept with the session, and put back on request.

Before ``write_file`` or ``edit_file`` touches a file, ``UndoJournal`` (an agent-scoped
``tools/execute`` listener) keeps the file's content as it was when the turn first touched it, or
notes that it did not exist, in the session's own storage: ``cli-undo/turn-N/`` in the session's
folder (``dsh-persistence-jsonl``), else ``$XDG_STATE_HOME/dsh/undo/SESSION/``; never in the
workspace. ``undo_last`` restores the files of the latest turn still kept (its mode too; files the
turn created are removed) and forgets that turn, so a second ``/undo`` goes one turn further back.
What ``bash`` changed is not kept (documented in the CLI page).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import attrs

from dsh_core import hookimpl

if TYPE_CHECKING:
    from dsh_core import Context, ToolExecution, ToolResult

__all__ = ["FILE_TOOLS", "UNDO_FOLDER", "Restored", "UndoJournal", "undo_root"]

#: the tools whose changes ``/undo`` reverts
FILE_TOOLS: Final = ("write_file", "edit_file")
_INDEX: Final = "index.json"
#: the folder in a session's own folder (dsh-persistence-jsonl) that holds its undo journal
UNDO_FOLDER: Final = "cli-undo"


@attrs.frozen
class Restored:
    """One file ``undo_last`` put back: ``removed`` when the turn had created it."""

    path: str
    removed: bool


def undo_root(ctx: Context, session_id: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where the journal of ``session_id`` lives: beside its log when the store has folders, else in the state directory."""
    persistence = ctx.get_service("session_persistence")
    path_of = getattr(persistence, "path_of", None)
    if callable(path_of):
        try:
            return Path(path_of(session_id)).parent / UNDO_FOLDER
        except (TypeError, ValueError, OSError):
            pass
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_STATE_HOME", "")
    if not base or not os.path.isabs(base):
        base = os.path.join(environ.get("HOME") or str(Path.home()), ".local", "state")
    return Path(base) / "dsh" / "undo" / session_id


def _fsynced_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, durably (file and directory fsynced)."""
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _target(execution: ToolExecution) -> Path | None:
    arguments: Any = execution.parsed
    if arguments is None:
        try:
            arguments = json.loads(execution.arguments or "{}")
        except ValueError:
            return None
    path = arguments.get("path") if isinstance(arguments, Mapping) else None
    if not isinstance(path, str) or not path:
        return None
    target = Path(path).expanduser()
    if not target.is_absolute():
        if not execution.cwd:
            return None
        target = Path(execution.cwd) / target
    return Path(os.path.abspath(target))


class UndoJournal:
    """Agent-scoped: keeps each file as it was before the turn's file tools changed it; ``undo_last`` restores.

    ``root_for`` names the journal's folder of a session id (``undo_root``).
    """

    def __init__(self, root_for: Callable[[str], Path]) -> None:
        self._root_for = root_for

    @hookimpl
    def dsh_tools_execute(
        self, execution: ToolExecution, call_next: Callable[[], Awaitable[ToolResult]]
    ) -> Awaitable[ToolResult]:
        """Any other tool: its call, untouched (no coroutine of our own)."""
        if execution.name not in FILE_TOOLS:
            return call_next()
        target = _target(execution)
        if target is None:
            return call_next()
        folder = self._root_for(execution.session_id or execution.agent_id or "") / f"turn-{execution.turn:06d}"
        return self._journaled(folder, target, call_next)

    async def _journaled(
        self, folder: Path, target: Path, call_next: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        first = await anyio.to_thread.run_sync(self._keep, folder, target)
        result = await call_next()
        if result.is_error and first:  # nothing changed: nothing to undo for this file yet
            await anyio.to_thread.run_sync(self._forget, folder, target)
        return result

    # ------------------------------------------------------------------ the journal on disk

    def _entries(self, folder: Path) -> list[dict[str, Any]]:
        try:
            entries = json.loads((folder / _INDEX).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [entry for entry in entries if isinstance(entry, dict)] if isinstance(entries, list) else []

    def _keep(self, folder: Path, target: Path) -> bool:
        """Keep ``target`` as it is now, unless this turn kept it already; ``True`` when this was the first time."""
        entries = self._entries(folder)
        if any(entry.get("path") == str(target) for entry in entries):
            return False
        folder.mkdir(parents=True, exist_ok=True)
        entry: dict[str, Any] = {"path": str(target), "existed": target.is_file()}
        if entry["existed"]:
            blob = f"{len(entries):04d}.bin"
            _fsynced_write(folder / blob, target.read_bytes())
            entry["blob"] = blob
            entry["mode"] = stat.S_IMODE(target.stat().st_mode)
        _fsynced_write(folder / _INDEX, json.dumps([*entries, entry], indent=1).encode())
        return True

    def _forget(self, folder: Path, target: Path) -> None:
        entries = self._entries(folder)
        kept = [entry for entry in entries if entry.get("path") != str(target)]
        for entry in entries:
            if entry.get("path") == str(target) and entry.get("blob"):
                (folder / str(entry["blob"])).unlink(missing_ok=True)
        if kept:
            _fsynced_write(folder / _INDEX, json.dumps(kept, indent=1).encode())
        else:
            shutil.rmtree(folder, ignore_errors=True)

    def turns(self, session_id: str) -> list[int]:
        """The turns of ``session_id`` whose changes are kept, oldest first."""
        try:
            names = [entry.name for entry in os.scandir(self._root_for(session_id)) if entry.is_dir()]
        except OSError:
            return []
        return sorted(int(name.removeprefix("turn-")) for name in names if name.removeprefix("turn-").isdigit())

    def undo_last(self, session_id: str) -> tuple[int, list[Restored]] | None:
        """Restore the files of the latest kept turn of ``session_id`` and forget it; ``None`` when nothing is kept."""
        for turn in reversed(self.turns(session_id)):
            folder = self._root_for(session_id) / f"turn-{turn:06d}"
            entries = self._entries(folder)
            restored: list[Restored] = []
            for entry in reversed(entries):
                path = Path(str(entry.get("path")))
                if entry.get("existed") and entry.get("blob"):
                    path.parent.mkdir(parents=True, exist_ok=True)
                    _fsynced_write(path, (folder / str(entry["blob"])).read_bytes())
                    if isinstance(entry.get("mode"), int):
                        os.chmod(path, entry["mode"])
                    restored.append(Restored(str(path), removed=False))
                elif not entry.get("existed"):
                    path.unlink(missing_ok=True)
                    restored.append(Restored(str(path), removed=True))
            shutil.rmtree(folder, ignore_errors=True)
            if restored:
                restored.reverse()
                return turn, restored
        return None
