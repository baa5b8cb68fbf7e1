"""The live log: followers of a session read its events from a cursor, woken by one shared event.

A follower never holds a queue of its own. It keeps a cursor (the next ``seq`` it sends) and reads
``session.events`` from there: the stored events a reconnect asks for, then the live ones as they
are appended. Subscribing and reading happen without an ``await`` between the length read and the
wait, so no event is missed and none is sent twice. An append costs the agent one ``Event.set()``
for all followers together (none at all when nobody waits).

Live events reach the followers in rounds: the first append after a round wakes the followers,
they wait ``FLUSH_INTERVAL`` together, and the round then publishes the log's length; every
follower at the live end sends the same range ``[previous, published)``, as one shared block of
bytes encoded and joined once per session. What a follower costs per round is then one write,
however many events the round holds. A slow follower only falls behind: the SSE response drops it
when a write stalls (``send_timeout``), and the client reconnects with its last ``seq``.

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
#: Frames sent in one write while a follower catches up (a reconnect's first byte comes soon).
_BATCH: Final = 256
#: Frames in one shared block of a live round (a round longer than that is sent in several).
_LIVE_BATCH: Final = 4096
#: Bytes of shared blocks kept for followers still writing an older one.
_BLOCKS_BYTES: Final = 16 * 1024 * 1024
#: Seconds a round lets events gather before its followers write, for every 10 followers of the
#: session (at most ``_MAX_FLUSH``): while the model streams, a session's followers together write
#: about 500 times a second, however fast the chunks come and however many follow. A write is a
#: system call that wakes the reader (some 20-300 us on loopback); one per chunk per follower would
#: leave the server little of the CPU.
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


class _Round:
    """One flush of the live log: the followers woken together wait for the same deadline."""

    __slots__ = ("deadline",)

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline


class SessionTail:
    """The followers' side of one live session: the wake-up they share, and its encoded frames."""

    __slots__ = (
        "_base",
        "_blocks",
        "_blocks_bytes",
        "_bytes",
        "_frames",
        "_published",
        "_round",
        "_wakeup",
        "closed",
        "followers",
        "session",
    )

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
        #: the log's length at the last round: followers at the live end send up to here
        self._published = len(session.events)
        self._round: _Round | None = None
        #: joined frames by seq range, shared by the followers of a round (oldest first)
        self._blocks: dict[tuple[int, int], bytes] = {}
        self._blocks_bytes = 0

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

    def _block(self, start: int, stop: int) -> bytes:
        """The frames of ``[start, stop)`` joined, once for every follower sending that range."""
        key = (start, stop)
        block = self._blocks.get(key)
        if block is None:
            block = b"".join([self._frame(seq) for seq in range(start, stop)])
            blocks = self._blocks
            blocks[key] = block
            self._blocks_bytes += len(block)
            while self._blocks_bytes > _BLOCKS_BYTES and len(blocks) > 1:
                self._blocks_bytes -= len(blocks.pop(next(iter(blocks))))
        return block

    async def follow(self, after: int, *, flush_interval: float = FLUSH_INTERVAL) -> AsyncGenerator[bytes, None]:
        """The frames of the events after ``after`` (``-1``: from the start), then the live ones.

        Live events come in rounds (see the module): woken by a new event, the followers wait
        ``flush_interval`` seconds (times the number of followers / 10) for more, then write them
        all at once. Ends when the tail closes, after the events the log holds then.
        """
        async with aclosing(self._ranges(after, flush_interval)) as ranges:  # closed with this one
            async for start, stop, live in ranges:
                size = _LIVE_BATCH if live else _BATCH
                for first in range(start, stop, size):
                    last = min(stop, first + size)
                    if live:
                        yield self._block(first, last)
                    else:
                        yield b"".join([self._frame(seq) for seq in range(first, last)])

    async def events(self, after: int, *, flush_interval: float = FLUSH_INTERVAL) -> AsyncGenerator[Sequence[SessionEvent], None]:
        """The events after ``after``, then the live ones, in batches (as ``follow``, not encoded)."""
        log = self.session.events
        async with aclosing(self._ranges(after, flush_interval)) as ranges:
            async for start, stop, _live in ranges:
                yield log[start:stop]

    async def _ranges(self, after: int, flush_interval: float) -> AsyncGenerator[tuple[int, int, bool], None]:
        """The seq ranges ``[start, stop)`` to send as the log grows, and whether each is a live
        round's (the same for every follower at the live end); ends when the tail closes."""
        self.followers += 1
        try:
            cursor = after + 1
            events = self.session.events
            while cursor < len(events):  # what the log holds: caught up as fast as it is read
                count = len(events)
                yield cursor, count, False
                cursor = count
            while True:
                published = self._published
                if cursor < published:
                    yield cursor, published, True
                    cursor = published
                    continue
                if self.closed:
                    if cursor < len(events):
                        yield cursor, len(events), False
                        continue
                    return
                await self._next_round(flush_interval)
        finally:
            self.followers -= 1

    async def _next_round(self, flush_interval: float) -> None:
        """Wait for the next round to publish (or for the tail to close)."""
        events = self.session.events
        if len(events) <= self._published:
            wakeup = self._wakeup
            if wakeup is None:
                wakeup = self._wakeup = anyio.Event()
            await wakeup.wait()
            if self.closed:
                return
        if flush_interval > 0:
            round_ = self._round
            if round_ is None:
                pause = min(_MAX_FLUSH, flush_interval * max(1.0, self.followers / 10))
                round_ = self._round = _Round(anyio.current_time() + pause)
            await anyio.sleep_until(round_.deadline)
            if self._round is not round_:
                return  # another follower of this round published it
            self._round = None
        self._published = len(events)


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
