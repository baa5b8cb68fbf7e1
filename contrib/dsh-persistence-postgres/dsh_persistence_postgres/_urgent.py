"""The urgent writer: threads of the store's own that commit §9.1's records without the event loop.

An ``inbox/queued`` or ``inbox/cleared`` record (or context injected while idle) must be stored
even if the application never gives its event loop control again after ``send()`` returned (CPU
work, a blocking call) and the process is then killed. So the ``session/event`` listener, which
runs synchronously inside ``session.append``, hands the journal to one of these threads at once;
the thread makes the journal's durable commit (``Journal.commit``) on its own, under the journal's
mutex, which orders it with every other commit of that session. A flush that follows waits on the
same mutex (from a worker thread) and so returns only once the record is committed.

The threads belong to the store: ``close`` stops them (queued work the store's close already
covered is dropped) and joins them, so nothing outlives the plugin.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from ._writer import Journal

__all__ = ["UrgentWriter"]

logger = logging.getLogger("dsh.persistence_postgres")


class UrgentWriter:
    """At most ``threads`` durable commits at once, each started the moment an urgent record is published."""

    def __init__(self, threads: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dsh-persistence-postgres-urgent")
        self._stopped = False

    def submit(self, journal: Journal) -> None:
        """Commit ``journal`` durably now, off the event loop (from the listener: cheap, never blocks).

        A journal already queued is not queued twice: its commit has not taken the journal's mutex
        yet, so it will take the record just published too (it clears ``queued`` once it holds the
        mutex, before it takes the batch). So a busy session occupies at most two threads.
        """
        if journal.queued or self._stopped:
            return
        journal.queued = True
        self._pool.submit(self._write, journal)

    @staticmethod
    def _write(journal: Journal) -> None:
        try:
            journal.commit(durable=True, dequeue=True)
        except Exception:  # a bug: keep the thread, say so; the events stay pending for the next flush
            logger.exception("session %r: the urgent commit failed unexpectedly", journal.session_id)

    def stop(self) -> None:
        """Drop what has not started, wait for the commits under way (blocking: call from a worker thread)."""
        self._stopped = True
        self._pool.shutdown(wait=True, cancel_futures=True)
