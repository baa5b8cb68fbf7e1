"""The explicit repair of a damaged log: cut it before its first damaged line, keeping a backup.

``load`` never guesses: a complete line that is wrong is reported, not dropped. When the user
decides that what follows the damage can go (``dsh sessions repair ID``), this cuts the log at
the first line that ``load`` refuses, after copying the original file, byte for byte and fsynced,
to ``session.jsonl.damaged-<UTC time>`` in the same folder. The cut log then loads like any log
that a crash left: a turn it leaves open is closed by the usual crash repair at the next load.
A damaged header cannot be cut away; it stays an error.

Plain blocking code; the store runs it in a worker thread, holding the session's lock.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from ._errors import SessionCorruptError
from ._layout import BACKUP_PREFIX
from ._loader import parse_log
from ._types import RepairReport
from ._writer import fsync_dir, sync_file

__all__ = ["cut_damaged"]


def _sound_prefix(path: Path, data: bytes) -> tuple[int, int | None, str | None, int]:
    """(bytes to keep, first line cut or None, why it was refused, events kept).

    Cuts again while the kept part is still refused: a line that parses can break a rule that
    only a check of the whole log sees (the lines are checked one by one first).
    """
    keep = len(data)
    first: int | None = None
    problem: str | None = None
    while True:
        try:
            stored = parse_log(path, data[:keep])
        except SessionCorruptError as exc:
            line = exc.line or 1  # this backend names the line of every damage it reports
            if line <= 1:
                raise  # the header: there is nothing sound to keep
            keep = _start_of_line(data, line)
            first, problem = line, str(exc)
            continue
        return stored.valid_size if first is None else keep, first, problem, len(stored.events)


def _start_of_line(data: bytes, line: int) -> int:
    """The offset of 1-based line ``line`` in ``data``."""
    offset = 0
    for _ in range(line - 1):
        offset = data.index(b"\n", offset) + 1
    return offset


def cut_damaged(session_id: str, path: Path) -> RepairReport:
    """Cut the log at ``path`` before its first damaged line, keeping a backup (see the module docstring).

    The caller holds the session's lock. A sound log (a torn tail aside, which ``load`` drops) is
    left as it is.

    :raises SessionCorruptError: the header itself is damaged.
    :raises SessionFormatError: the log is in another format version.
    :raises OSError: reading, copying or cutting the file failed (the original is untouched
        unless the backup was complete and durable).
    """
    data = path.read_bytes()
    keep, first, problem, events = _sound_prefix(path, data)
    if first is None:
        return RepairReport(id=session_id, path=path, seq=None, dropped_events=0, events=events)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    backup = path.with_name(f"{BACKUP_PREFIX}{stamp}")
    counter = 1
    while backup.exists():
        counter += 1
        backup = path.with_name(f"{BACKUP_PREFIX}{stamp}-{counter}")
    shutil.copyfile(path, backup)
    fd = os.open(backup, os.O_RDONLY | os.O_CLOEXEC)
    try:
        sync_file(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.ftruncate(fd, keep)
        sync_file(fd)
    finally:
        os.close(fd)
    dropped = data[keep:]
    return RepairReport(
        id=session_id,
        path=path,
        backup=backup,
        line=first,
        seq=first - 2,
        dropped_events=dropped.count(b"\n") + (0 if dropped.endswith(b"\n") or not dropped else 1),
        dropped_bytes=len(dropped),
        events=events,
        problem=problem,
    )
