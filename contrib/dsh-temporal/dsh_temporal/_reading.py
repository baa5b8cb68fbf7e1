"""The ``dsh.read_events`` activity: a session's durable events, for a client with no store access.

``events()`` of a client connected without ``persistence=`` runs this activity on a worker (a
standalone activity, so no event ever enters a workflow's history). The worker holding the
session's agent (running a turn, or warm) answers from memory: it makes the log durable up to the
events it returns (``sessions.flush``), so a client never sees an event that a crash could take
back. Any other worker answers from the shared store, leaving out the repair events a read computes
for an open turn (they are not in the log). Either way the activity waits, up to the request's
``wait``, for a first event after ``after_seq``, and answers at most ``limit`` events and about
``MAX_BATCH_BYTES`` of JSON (Temporal refuses payloads past 2 MB).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from temporalio import activity
from temporalio.exceptions import ApplicationError

from dsh_core import SessionEvent, hookimpl

from ._types import EventBatch, ReadRequest

if TYPE_CHECKING:
    from dsh_core import Context, Session

__all__ = ["MAX_BATCH_BYTES", "READ_EVENTS", "EventReader", "stored_events"]

#: the read activity's name (registered by every worker)
READ_EVENTS = "dsh.read_events"

#: about this much event JSON per answer; a single event is sent whole up to ``MAX_EVENT_BYTES``
MAX_BATCH_BYTES = 256 * 1024

#: the largest event the engine carries (its payload limit is 2 MB)
MAX_EVENT_BYTES = 1536 * 1024

#: at least this often the waiting read heartbeats
HEARTBEAT = 0.5

#: how often a session not live on this worker is looked up in the store while the read waits
STORE_POLL = 0.2


def stored_events(loaded: Any) -> Sequence[SessionEvent]:
    """The events a store ``read`` returned, without the repair events it computed for an open
    turn: those are not in the log (the turn may still be running elsewhere)."""
    events: Sequence[SessionEvent] = loaded.events
    repaired = len(getattr(loaded, "repaired", ()) or ())
    return events[: len(events) - repaired] if repaired else events


class _Changes:
    """A harness-level listener: wakes the reads waiting on a session when its log grows."""

    def __init__(self) -> None:
        self._waiting: dict[str, anyio.Event] = {}

    @hookimpl
    def dsh_session_event(self, session: Session, event: SessionEvent) -> None:
        waiting = self._waiting.pop(session.id, None)
        if waiting is not None:
            waiting.set()

    def event_for(self, session_id: str) -> anyio.Event:
        return self._waiting.setdefault(session_id, anyio.Event())


class EventReader:
    """Serves ``dsh.read_events`` on a worker: from the live session if it is here, else the store."""

    def __init__(self, ctx: Context, live: Callable[[str], Session | None]) -> None:
        self._ctx = ctx
        self._live = live
        #: register it on the harness (``ctx.register_plugin``) while the reader serves
        self.listener = _Changes()

    @activity.defn(name=READ_EVENTS)
    async def read_events(self, request: ReadRequest) -> EventBatch:
        """The durable events after ``request.after_seq`` (waiting up to ``request.wait`` s for one)."""
        deadline = anyio.current_time() + max(0.0, request.wait)
        while True:
            activity.heartbeat()
            batch = await self._read_once(request)
            if batch.events or anyio.current_time() >= deadline:
                return batch
            # Wake at the change, and at least every HEARTBEAT s to heartbeat (a cancel comes that way).
            with anyio.move_on_after(min(HEARTBEAT, deadline - anyio.current_time())):
                await self._changed(request.session_id)

    async def _read_once(self, request: ReadRequest) -> EventBatch:
        session = self._live(request.session_id)
        if session is not None:
            count = len(session.events)
            if count - 1 > request.after_seq:
                try:
                    await self._ctx.sessions.flush(session)  # what is returned is durable
                except ValueError:  # disposed meanwhile: the store has it
                    session = None
                else:
                    return EventBatch(_batch(session.events[request.after_seq + 1 : count], request), live=True)
            else:
                return EventBatch([], live=True)
        store = self._ctx.get_service("session_persistence")
        if store is None:
            msg = "this dsh worker has no session store to read the log from (enable a persistence plugin)"
            raise ApplicationError(msg, type="ConfigError", non_retryable=True)
        if not await store.exists(request.session_id):
            return EventBatch([])
        events = stored_events(await store.read(request.session_id))
        return EventBatch(_batch(events[request.after_seq + 1 :], request))

    async def _changed(self, session_id: str) -> None:
        """Wait until the live session's log grows (or, not live here, one store poll interval)."""
        if self._live(session_id) is None:
            await anyio.sleep(STORE_POLL)
            return
        await self.listener.event_for(session_id).wait()


def _batch(events: Sequence[SessionEvent], request: ReadRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    size = 0
    for event in events[: request.limit]:
        data = event.to_json()
        length = len(json.dumps(data, separators=(",", ":")))
        if length > MAX_EVENT_BYTES:
            if out:
                break  # the ones before it go first; the next read reports it
            msg = (
                f"session {request.session_id!r}: event {event.seq} ({event.type}) is {length} bytes of JSON, "
                "more than the engine carries; read this session with TemporalAgents.connect(persistence=...)"
            )
            raise ApplicationError(msg, type="EventTooLarge", non_retryable=True)
        if out and size + length > MAX_BATCH_BYTES:
            break
        out.append(data)
        size += length
    return out

