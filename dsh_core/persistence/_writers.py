"""The two writers a database backend runs: the batch window, and the threads that commit §9.1's records.

A backend keeps one *journal* per live session (its pending events and how to commit them); these
writers decide when a journal commits:

* ``BatchWriter``: the first pending event opens a window of ``delay`` seconds, then every journal
  marked meanwhile commits (``await journal.write()``), concurrently or one after the other;
* ``UrgentWriter``: an urgent record (``is_urgent``) is committed at once by a thread of the
  backend's own (``journal.commit(durable=True, dequeue=True)``), without the event loop, so an
  accepted send is stored even when the application never gives its loop control again before it is
  killed. A journal already queued is not queued twice: its commit, once it runs, takes every record
  published until then, so a busy session occupies at most two threads.

Both are called from the ``session/event`` listener and never block it.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import anyio

__all__ = ["BatchWriter", "BatchedJournal", "UrgentJournal", "UrgentWriter"]

logger = logging.getLogger("dsh.persistence")


class BatchedJournal(Protocol):
    """What ``BatchWriter`` needs of a journal: a flag it owns, and the window's commit (never raises)."""

    dirty: bool

    async def write(self) -> None: ...


class UrgentJournal(Protocol):
    """What ``UrgentWriter`` needs of a journal: a flag it owns, and a blocking durable commit that
    clears ``queued`` once it holds the journal's mutex (``dequeue``) and never raises."""

    queued: bool

    @property
    def session_id(self) -> str: ...

    def commit(self, *, durable: bool, final: bool = False, dequeue: bool = False) -> None: ...


class BatchWriter:
    """The background writer: a window of ``delay`` seconds from the first pending event, then every
    marked journal commits (``concurrent``: all at once, as a pool of connections allows)."""

    def __init__(self, delay: float, *, concurrent: bool = True) -> None:
        self.delay = delay
        self._concurrent = concurrent
        self._dirty: list[BatchedJournal] = []
        self._wake = anyio.Event()
        self._armed = False

    def mark(self, journal: BatchedJournal) -> None:
        """``journal`` has pending events (called from the ``session/event`` listener: cheap)."""
        if not journal.dirty:
            journal.dirty = True
            self._dirty.append(journal)
        if not self._armed:
            self._armed = True
            self._wake.set()

    async def write_all(self) -> None:
        """Commit every marked journal now."""
        dirty, self._dirty = self._dirty, []
        for journal in dirty:
            journal.dirty = False
        if not self._concurrent or len(dirty) == 1:
            for journal in dirty:
                await journal.write()
            return
        async with anyio.create_task_group() as tg:
            for journal in dirty:
                tg.start_soon(journal.write)

    async def run(self) -> None:
        """Write batches until cancelled (the plugin stops; the store commits what is left itself)."""
        while True:
            await self._wake.wait()
            await anyio.sleep(self.delay)
            # Events published from here on wake the next window.
            self._wake = anyio.Event()
            self._armed = False
            await self.write_all()


class UrgentWriter:
    """At most ``threads`` durable commits at once, each started the moment an urgent record is published.

    The threads belong to the store: ``stop`` (from its close) drops queued work the close already
    covered and joins them, so nothing outlives the plugin.
    """

    def __init__(self, threads: int, *, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"{name}-urgent")
        self._stopped = False

    def submit(self, journal: UrgentJournal) -> None:
        """Commit ``journal`` durably now, off the event loop (from the listener: cheap, never blocks)."""
        if journal.queued or self._stopped:
            return
        journal.queued = True
        self._pool.submit(self._write, journal)

    @staticmethod
    def _write(journal: UrgentJournal) -> None:
        try:
            journal.commit(durable=True, dequeue=True)
        except Exception:  # a bug: keep the thread, say so; the events stay pending for the next flush
            logger.exception("session %r: the urgent commit failed unexpectedly", journal.session_id)

    def stop(self) -> None:
        """Drop what has not started, wait for the commits under way (blocking: call from a worker thread)."""
        self._stopped = True
        self._pool.shutdown(wait=True, cancel_futures=True)
