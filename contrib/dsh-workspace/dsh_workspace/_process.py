"""Start a command and watch it from the event loop itself: its exit through a pidfd, its output through the pipe.

anyio's ``open_process`` on asyncio waits for each child in a thread of its own (asyncio's
``ThreadedChildWatcher`` before Python 3.12): a thread is started with every command, and its end
reaches the loop in two hand-offs (the thread wakes, then wakes the loop). On a busy machine each
hand-off is a trip through the scheduler, which costs more than a short command itself. On Linux
(5.3 or later) a pidfd becomes readable when its process exits, so the loop waits on it as on any
descriptor, and reads the output pipe the same way: no thread, one wake-up. Where there is no
pidfd (another OS, an older kernel: probed once), ``start_process`` uses ``anyio.open_process``.

The child is started by ``subprocess.Popen`` (``vfork``, the other descriptors closed), and
reaped here, by its pid, which nothing else waits for: neither asyncio's child watcher nor
trio's know of it.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO, Any, Protocol

import anyio
import anyio.abc
import anyio.to_thread

__all__ = ["AnyioProcess", "ChildProcess", "PidfdProcess", "start_process"]

#: bytes read from the output pipe at a time
_CHUNK = 65536


class ChildProcess(Protocol):
    """A started command, as ``run_command`` uses it (``PidfdProcess``, or anyio's through ``AnyioProcess``).

    ``wait`` and ``read`` may run at once (in two tasks); each alone from one task at a time.
    """

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None:
        """The exit status once reaped (negative: killed by that signal), else ``None``."""
        ...

    async def wait(self) -> int:
        """The exit status, once the process has exited (it is reaped then)."""
        ...

    async def read(self) -> bytes:
        """The next piece of the merged output; ``b""`` once every writer has closed the pipe."""
        ...

    async def aclose(self) -> None:
        """Close the output pipe and wait for the process."""
        ...


class PidfdProcess:
    """A child watched through a pidfd, its output read from a non-blocking pipe."""

    def __init__(self, popen: subprocess.Popen[bytes], pidfd: int, output: IO[bytes]) -> None:
        self._popen = popen
        self._pidfd: int | None = pidfd
        self._output: IO[bytes] | None = output
        os.set_blocking(output.fileno(), False)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def _reap(self) -> bool:
        """Collect the exit status if the child has exited (never blocks)."""
        if self._popen.returncode is not None:
            return True
        pid, status = os.waitpid(self._popen.pid, os.WNOHANG)
        if pid == 0:
            return False
        # Set on the Popen too, so that it neither waits again nor warns that the child still runs.
        self._popen.returncode = os.waitstatus_to_exitcode(status)
        return True

    async def wait(self) -> int:
        """The exit status (negative: killed by that signal), once the child has exited."""
        while not self._reap():
            if self._pidfd is None:  # closed without reaping: only a bug gets here
                msg = "the process's pidfd is closed"
                raise anyio.ClosedResourceError(msg)
            await anyio.wait_readable(self._pidfd)
        code = self._popen.returncode
        assert code is not None  # set by _reap
        return code

    async def read(self) -> bytes:
        while self._output is not None:
            fd = self._output.fileno()
            try:
                return os.read(fd, _CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(fd)
        return b""

    def _close_output(self) -> None:
        output, self._output = self._output, None
        if output is not None:
            anyio.notify_closing(output.fileno())
            output.close()

    async def aclose(self) -> None:
        """Close the output pipe, wait for the child (as ``anyio.abc.Process.aclose`` does), close the pidfd."""
        self._close_output()
        try:
            await self.wait()
        finally:
            pidfd, self._pidfd = self._pidfd, None
            if pidfd is not None:
                os.close(pidfd)


class AnyioProcess:
    """``anyio.open_process``'s process as a ``ChildProcess``: where there is no pidfd."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self._process = process

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> int:
        return await self._process.wait()

    async def read(self) -> bytes:
        stdout = self._process.stdout
        if stdout is None:  # opened with PIPE; a None here is a bug, not a user error
            msg = "the command's output pipe is missing"
            raise RuntimeError(msg)
        try:
            return await stdout.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return b""

    async def aclose(self) -> None:
        await self._process.aclose()


@functools.cache
def _has_pidfd() -> bool:
    """Whether this system gives pidfds (Linux 5.3 or later, and no filter refusing them)."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


async def start_process(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str] | None, pass_fds: Sequence[int] = ()
) -> ChildProcess:
    """Start ``argv`` in a new session, stdin ``/dev/null``, stdout and stderr into one pipe.

    ``pass_fds`` are inherited under the same numbers. A pidfd-watched process where the
    platform has pidfds, else anyio's.

    :raises OSError: when the process cannot be started (no such program, bad cwd, no
        descriptor left for its pidfd).
    """
    if not _has_pidfd():
        return await _anyio_process(argv, cwd=cwd, env=env, pass_fds=pass_fds)
    # vfork + exec: returns once the child has exec'd
    popen = subprocess.Popen(list(argv), bufsize=0, **_spawn_options(cwd, env, pass_fds))  # noqa: ASYNC220
    output = popen.stdout
    assert output is not None  # opened with PIPE
    try:
        pidfd = os.pidfd_open(popen.pid)
    except OSError:  # e.g. out of descriptors: the command does not run after all
        os.killpg(popen.pid, signal.SIGKILL)  # its group (a new session): all it may have started so far
        output.close()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(popen.wait)
        raise
    return PidfdProcess(popen, pidfd, output)


async def _anyio_process(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str] | None, pass_fds: Sequence[int]
) -> AnyioProcess:
    process = await anyio.open_process(list(argv), **_spawn_options(cwd, env, pass_fds))
    return AnyioProcess(process)


def _spawn_options(cwd: str, env: Mapping[str, str] | None, pass_fds: Sequence[int]) -> dict[str, Any]:
    """How both paths start a command: in a new session, stdin ``/dev/null``, stdout and stderr
    into one pipe, ``pass_fds`` inherited."""
    return {
        "cwd": cwd,
        "env": dict(env) if env is not None else None,
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.STDOUT,
        "start_new_session": True,
        "pass_fds": pass_fds,
    }
