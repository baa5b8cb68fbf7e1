"""One background job: its process, its output, how it ended, and stopping it with everything it started."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Literal, TypeAlias

import anyio
from dsh_workspace import ChildProcess, stop_group

from ._output import JobOutput

__all__ = ["Job", "JobStatus"]

#: running; exited by itself; stopped by job_kill or with its agent
JobStatus: TypeAlias = Literal["running", "exited", "killed"]

#: seconds a killed job gets between SIGTERM and SIGKILL (the 2 s promise leaves room for the reap)
KILL_GRACE = 0.5
#: seconds to read what is left in the pipe once the job's leader has exited
_DRAIN_LIMIT = 1.0
#: seconds to wait for the reap after SIGKILL (a backstop)
_REAP_LIMIT = 5.0


class Job:
    """A command running in the background, as its own process group (or sandbox namespace).

    ``watch`` runs in a task of the agent's context: it reads the output and waits for the exit;
    cancelled (the agent is disposed), it stops the job first, shielded, so nothing outlives it.
    """

    def __init__(self, job_id: str, command: str, process: ChildProcess, keep: int) -> None:
        self.id = job_id
        self.command = command
        self.process = process
        self.output = JobOutput(keep)
        self.status: JobStatus = "running"
        self.started = time.monotonic()
        self.seconds: float | None = None
        self.ended = anyio.Event()
        #: the model has been shown that this job ended (by a tool result or the note at a step)
        self.end_seen = False
        self._scope = anyio.CancelScope()

    @property
    def exit_code(self) -> int | None:
        return None if self.status == "running" else self.process.returncode

    async def watch(self) -> None:
        process = self.process
        try:
            with self._scope:  # job_kill cancels it
                drained = anyio.Event()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._pump, drained)
                    await process.wait()
                    # The leader is done: members it left in its group would keep the pipe open.
                    _kill_group(process.pid)
                    with anyio.move_on_after(_DRAIN_LIMIT):
                        await drained.wait()
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                killed = process.returncode is None
                if killed:  # job_kill gives a grace to exit; the agent's disposal does not wait
                    await stop_group(process, KILL_GRACE if self._scope.cancel_called else 0)
                else:
                    _kill_group(process.pid)
                with anyio.move_on_after(_REAP_LIMIT):
                    await process.aclose()
                self.output.feed(b"", final=True)
                self.status = "killed" if killed else "exited"
                self.seconds = time.monotonic() - self.started
                self.ended.set()

    async def _pump(self, done: anyio.Event) -> None:
        try:
            while chunk := await self.process.read():
                self.output.feed(chunk)
        finally:
            done.set()

    async def kill(self) -> None:
        """Stop the job and everything it started, and wait until it is reaped (idempotent)."""
        self._scope.cancel()
        await self.ended.wait()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
