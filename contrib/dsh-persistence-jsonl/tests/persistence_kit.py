"""Helpers for the persistence tests: file readers, a syscall probe, the scripted model options."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from dsh_core import AgentOptions, Context, SessionEvent

MODEL = AgentOptions(model="scripted/test")

#: ``async with harness(model=None, batch_delay=0.1, root_dir=None, plugins=(), extra=None) as ctx``
HarnessFactory = Callable[..., AbstractAsyncContextManager[Context]]


def log_lines(path: Path) -> list[bytes]:
    """The complete lines of a log file (without their newlines)."""
    return path.read_bytes().split(b"\n")[:-1]


def stored_events(path: Path) -> list[SessionEvent]:
    """The events of a log file, read with nothing but ``json`` and ``SessionEvent.from_json``."""
    return [SessionEvent.from_json(json.loads(line)) for line in log_lines(path)[1:]]


class FileProbe:
    """Counts (or fails) ``os.write`` / ``os.fsync`` calls that target one file, by inode."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch
        self.path: Path | None = None
        self.writes = 0
        self.fsyncs = 0
        #: an OSError to raise from os.write on the file (instead of writing)
        self.write_error: OSError | None = None
        #: write this many bytes, then raise ``write_error`` on the next call (a short write)
        self.short_write: int | None = None
        self.fsync_error: OSError | None = None
        self.on_write: Callable[[], None] | None = None
        #: called after each fsync of the file (from the worker thread that ran it)
        self.on_fsync: Callable[[], None] | None = None
        real_write, real_fsync = os.write, os.fsync

        def write(fd: int, data: Any) -> int:
            if not self._targets(fd):
                return real_write(fd, data)
            self.writes += 1
            if self.on_write is not None:
                self.on_write()
            if self.short_write is not None:
                count, self.short_write = self.short_write, None
                return real_write(fd, bytes(data)[:count])
            if self.write_error is not None:
                raise self.write_error
            return real_write(fd, data)

        def fsync(fd: int) -> None:
            if self._targets(fd):
                self.fsyncs += 1
                if self.fsync_error is not None:
                    raise self.fsync_error
            real_fsync(fd)
            if self._targets(fd) and self.on_fsync is not None:
                self.on_fsync()

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "fsync", fsync)

    def _targets(self, fd: int) -> bool:
        if self.path is None:
            return False
        try:
            mine, theirs = os.fstat(fd), os.stat(self.path)
        except OSError:
            return False
        return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)
