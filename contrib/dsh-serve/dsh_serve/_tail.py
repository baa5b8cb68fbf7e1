"""The live log: followers of a session read its events from a cursor, woken by one shared event.

A follower never holds a queue of its own. It keeps a cursor (the next ``seq`` it sends) and reads
``session.events`` from there: the stored events a reconnect asks for, then the live ones as they
are appended. Subscribing and reading happen without an ``await`` between the length read and the
wait, so no event is missed and none is sent twice. An append costs the agent one ``Event.set()``
for all followers together (none at all when nobody waits); what followers cost is their writes,
which they batch (``FLUSH_INTERVAL``). A slow follower only falls behind: the SSE response drops
it when a write stalls (``send_timeout``), and the client reconnects with its last ``seq``.

Each event is encoded as an SSE frame once per session (a window of the latest frames is kept,
bounded in count and bytes), not once per follower.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Final

import anyio
import orjson

from dsh_core import hookimpl

if TYPE_CHECKING:
    from dsh_core import Session, SessionEvent

__all__ = ["LogTails", "SessionTail", "encode_frame"]

#: Frames kept per session for followers near the live end (older ones are encoded again on demand).
_WINDOW: Final = 4096
#: ... and at most this many bytes of them.
_WINDOW_BYTES: Final = 4 * 1024 * 1024
#: Frames sent in one write while a follower catches up.
_BATCH: Final = 256
#: Seconds a woken follower lets events gather before it writes, for every 10 followers of the
#: session (at most ``_MAX_FLUSH``): while the model streams, a session's followers together write
#: about 500 times a second, however fast the chunks come and however many follow. A write is a
#: system call that wakes the reader (some 20-300 us on loopback); one per chunk per follower would
#: leave the agent little of the CPU.
FLUSH_INTERVAL: Final = 0.02
_MAX_FLUSH: Final = 0.25


def encode_frame(event: SessionEvent) -> bytes:
    """One SSE event: ``id:`` the seq, ``event:`` the type, ``data:`` the event's JSON on one line.

    orjson writes no whitespace and escapes control characters inside strings, so the JSON holds
    no newline that would end the ``data:`` line; what orjson refuses (an int beyond 64 bits, a
    lone surrogate) the stdlib writes.
    """
    value = {"type": event.type, "seq": event.seq, "time": event.time, "data": event.plain_data()}
    try:
        line = orjson.dumps(value)
    except TypeError:
        line = json.dumps(value, separators=(",", ":"), allow_nan=False).encode("ascii")
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.seq, event.type.encode(), line)


class SessionTail:
    """The followers' side of one live session: the wake-up they share, and its encoded frames."""

    __slots__ = ("_base", "_bytes", "_frames", "_wakeup", "closed", "followers", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        #: the session left the store (disposed) or the server is stopping: followers end
        self.closed = False
        #: how many followers are reading it now
        self.followers = 0
        self._wakeup: anyio.Event | None = None
        self._frames: list[bytes] = []
        self._base = 0
        self._bytes = 0

    def wake(self) -> None:
        """Wake every follower waiting for a new event (called for each append)."""
        wakeup = self._wakeup
        if wakeup is not None:
            self._wakeup = None
            wakeup.set()

    def close(self) -> None:
        """End every follower once it has sent what the log holds."""
        self.closed = True
        self.wake()

    def _frame(self, seq: int) -> bytes:
        frames = self._frames
        index = seq - self._base
        if 0 <= index < len(frames):
            return frames[index]
        frame = encode_frame(self.session.events[seq])
        if index == len(frames):
            frames.append(frame)
            self._bytes += len(frame)
            while (len(frames) > _WINDOW or self._bytes > _WINDOW_BYTES) and len(frames) > 1:
                drop = len(frames) // 2  # the older half; the newest frame always stays
                self._bytes -= sum(map(len, frames[:drop]))
                del frames[:drop]
                self._base += drop
        elif index > len(frames):  # the first follower starts past the window: restart it here
            self._frames = [frame]
            self._base = seq
            self._bytes = len(frame)
        return frame

    async def follow(self, after: int, *, flush_interval: float = FLUSH_INTERVAL) -> AsyncGenerator[bytes, None]:
        """The frames of the events after ``after`` (``-1``: from the start), then the live ones.

        Once woken by a new event, it waits ``flush_interval`` seconds (times the number of
        followers / 10) for more before it writes them all at once. Ends when the tail closes,
        after the events the log holds then.
        """
        async with aclosing(self._ranges(after, flush_interval)) as ranges:  # closed with this one
            async for start, stop in ranges:
                for first in range(start, stop, _BATCH):
                    yield b"".join([self._frame(seq) for seq in range(first, min(stop, first + _BATCH))])

    async def events(self, after: int, *, flush_interval: float = FLUSH_INTERVAL) -> AsyncGenerator[Sequence[SessionEvent], None]:
        """The events after ``after``, then the live ones, in batches (as ``follow``, not encoded)."""
        log = self.session.events
        async with aclosing(self._ranges(after, flush_interval)) as ranges:
            async for start, stop in ranges:
                yield log[start:stop]

    async def _ranges(self, after: int, flush_interval: float) -> AsyncGenerator[tuple[int, int], None]:
        """The seq ranges ``[start, stop)`` to send, as the log grows; ends when the tail closes."""
        self.followers += 1
        try:
            cursor = after + 1
            events = self.session.events
            while True:
                count = len(events)
                if cursor < count:
                    yield cursor, count
                    cursor = count
                    continue
                if self.closed:
                    return
                wakeup = self._wakeup
                if wakeup is None:
                    wakeup = self._wakeup = anyio.Event()
                await wakeup.wait()
                if flush_interval > 0 and not self.closed:
                    await anyio.sleep(min(_MAX_FLUSH, flush_interval * max(1.0, self.followers / 10)))
        finally:
            self.followers -= 1


class LogTails:
    """The ``session/event`` listener that wakes the followers; registered only while serving."""

    def __init__(self) -> None:
        self._tails: dict[str, SessionTail] = {}
        self._closed = False

    def of(self, session: Session) -> SessionTail:
        """The tail of this live session (one per session object)."""
        tail = self._tails.get(session.id)
        if tail is None or tail.session is not session:
            tail = SessionTail(session)
            if self._closed:
                tail.closed = True
            else:
                self._tails[session.id] = tail
        return tail

    def close_all(self) -> None:
        """The server is stopping: every follower ends, and new ones end at once."""
        self._closed = True
        for tail in self._tails.values():
            tail.close()
        self._tails.clear()

    @hookimpl
    def dsh_session_event(self, session: Session) -> None:
        tail = self._tails.get(session.id)
        if tail is not None and tail.session is session:
            tail.wake()

    @hookimpl
    def dsh_session_disposed(self, session: Session) -> None:
        tail = self._tails.get(session.id)
        if tail is not None and tail.session is session:
            del self._tails[session.id]
            tail.close()
