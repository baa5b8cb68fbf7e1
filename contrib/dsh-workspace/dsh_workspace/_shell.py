"""Run one shell command as a process group: capped output, a timeout, and nothing left running.

The command runs in a new session (so it leads its own process group) with stdin closed and
stdout and stderr merged into one pipe, in the order they were written. Whatever way the call
ends, the group is stopped and the leader reaped:

* the command exits: background processes it left in the group are killed, then the pipe is
  drained;
* the timeout passes, or the caller is cancelled (a turn cancel reaches the tool as
  cancellation): the group gets SIGTERM, then SIGKILL after a short grace, and the leader is
  reaped, shielded from the cancellation and time-limited so that a cancel never hangs.

A sandboxed command (bubblewrap) runs in a pid namespace of its own, whose init is a child of the
leader; a process group cannot hold it (the command starts a session of its own, and may
``setsid`` again). Stopping it therefore kills that init, which makes the kernel kill every
process of the namespace (fork bombs included: the namespace takes no new process once its init
is gone), and then waits for the leader: bwrap exits only after it has reaped the init, and the
init is reaped only when its namespace is empty. So when the leader has exited, nothing the
command started is left, whether it ended by itself, timed out or was cancelled.

Output beyond the cap keeps its head and its tail, with a marker saying how much was cut.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping, Sequence

import anyio
import attrs

from ._process import ChildProcess, start_process

__all__ = ["CommandOutcome", "OutputCapture", "namespace_inits", "run_command", "stop_group"]

logger = logging.getLogger("dsh.workspace")

#: seconds a stopped group gets between SIGTERM and SIGKILL
KILL_GRACE = 1.0
#: seconds to wait for the leader to be reaped after SIGKILL (it cannot refuse; this is a backstop)
_REAP_LIMIT = 5.0
#: seconds to read what is left in the pipe after the command ended
_DRAIN_LIMIT = 1.0


class OutputCapture:
    """Keeps the first and last ``limit / 2`` bytes of a stream and counts what falls between."""

    __slots__ = ("_dropped", "_dropped_lines", "_head", "_head_limit", "_tail", "_tail_limit")

    def __init__(self, limit: int) -> None:
        self._head_limit = limit - limit // 2
        self._tail_limit = limit // 2
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0
        self._dropped_lines = 0

    def feed(self, data: bytes) -> None:
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        self._tail += data
        excess = len(self._tail) - self._tail_limit
        if excess > 0:
            self._dropped += excess
            self._dropped_lines += self._tail.count(b"\n", 0, excess)
            del self._tail[:excess]

    @property
    def dropped(self) -> int:
        """Bytes cut from the middle."""
        return self._dropped

    def text(self) -> str:
        head = self._head.decode("utf-8", "replace")
        tail = self._tail.decode("utf-8", "replace")
        if not self._dropped:
            return head + tail
        lines = "1 line" if self._dropped_lines == 1 else f"{self._dropped_lines} lines"
        marker = f"\n[... {self._dropped} bytes ({lines}) of output cut here; the start and the end are kept ...]\n"
        return head + marker + tail


@attrs.frozen
class CommandOutcome:
    """How a command ended."""

    output: str
    #: the exit status; negative: killed by that signal
    exit_code: int | None
    timed_out: bool
    seconds: float
    #: bytes of output cut from the middle
    cut: int


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # The group may be gone already (ESRCH); a recycled id owned by someone else gives EPERM.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def namespace_inits(pid: int) -> list[int]:
    """The children of ``pid`` that are the init (pid 1) of a pid namespace of their own."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as file:
            children = [int(child) for child in file.read().split()]
    except (OSError, ValueError):
        return []
    inits = []
    for child in children:
        try:
            with open(f"/proc/{child}/status") as file:
                status = file.read()
        except OSError:
            continue
        nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
        if len(nspid) > 1 and nspid[-1] == "1":
            inits.append(child)
    return inits


async def stop_group(process: ChildProcess, grace: float) -> None:
    """Stop everything the command started, then reap the leader.

    A pid namespace init among the leader's children is killed first, and the leader awaited
    (its exit means the namespace is empty). Otherwise: SIGTERM the group, wait ``grace`` for the
    leader, SIGKILL the group. The final SIGKILL goes to the whole group even when the leader
    exited in time: members that ignored SIGTERM or were still exiting must not outlive the call.
    """
    inits = namespace_inits(process.pid)
    for init in inits:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(init, signal.SIGKILL)
    if inits:
        with anyio.move_on_after(_REAP_LIMIT):
            await process.wait()
        if process.returncode is not None:
            _signal_group(process.pid, signal.SIGKILL)
            return
    _signal_group(process.pid, signal.SIGTERM)
    with anyio.move_on_after(grace):
        await process.wait()
    _signal_group(process.pid, signal.SIGKILL)
    with anyio.move_on_after(_REAP_LIMIT) as backstop:
        await process.wait()
    if backstop.cancelled_caught:
        logger.warning("process %d did not exit after SIGKILL within %.0f s", process.pid, _REAP_LIMIT)


async def _pump(process: ChildProcess, capture: OutputCapture, done: anyio.Event) -> None:
    try:
        while chunk := await process.read():
            capture.feed(chunk)
    finally:
        done.set()


async def run_command(
    argv: Sequence[str],
    *,
    cwd: str,
    time_limit: float,
    max_output: int,
    env: Mapping[str, str] | None = None,
    grace: float = KILL_GRACE,
    pass_fds: Sequence[int] = (),
) -> CommandOutcome:
    """Run ``argv`` in ``cwd`` as its own process group and return its output and exit status.

    After ``time_limit`` seconds the group is stopped and the outcome says ``timed_out``.
    Cancellation propagates after the group is stopped and reaped. ``pass_fds`` are handed to
    the process under the same numbers and closed here once it has started, or failed to.

    :raises OSError: when the process cannot be started (no such program, bad cwd).
    """
    capture = OutputCapture(max_output)
    started = time.monotonic()
    # Shielded: on asyncio the child already runs while the spawn is still being awaited, and a
    # cancel landing there would lose the process handle, killing the leader but orphaning its
    # children. Spawning is quick; the cancel takes effect at the first await below.
    with anyio.CancelScope(shield=True):
        try:
            process = await start_process(argv, cwd=cwd, env=env, pass_fds=pass_fds)
        finally:
            for fd in pass_fds:  # the process has its copies; ours would only keep them open
                with contextlib.suppress(OSError):
                    os.close(fd)
    timed_out = False
    try:
        drained = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump, process, capture, drained)
            with anyio.move_on_after(time_limit) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                timed_out = True
                await stop_group(process, grace)
            else:
                # The leader is done; background members of its group would keep the pipe open
                # (and outlive the call), so they go too. A process that left the group with
                # setsid() can still hold the pipe: the drain is therefore time-limited.
                _signal_group(process.pid, signal.SIGKILL)
            with anyio.move_on_after(_DRAIN_LIMIT):
                await drained.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                await stop_group(process, grace)
            else:
                _signal_group(process.pid, signal.SIGKILL)
            with anyio.move_on_after(_REAP_LIMIT):
                await process.aclose()
    return CommandOutcome(
        output=capture.text(),
        exit_code=process.returncode,
        timed_out=timed_out,
        seconds=time.monotonic() - started,
        cut=capture.dropped,
    )
