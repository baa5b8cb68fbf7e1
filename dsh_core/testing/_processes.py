"""Test helpers for tools that start processes: see them start, prove they are gone (Linux /proc).

No sleeping: a test waits on a FIFO the command writes to, or on a pidfd becoming readable.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import anyio
import anyio.to_thread

__all__ = ["is_alive", "kill_when_ready", "pids_running", "read_fifo", "wait_gone"]


async def read_fifo(path: Path, within: float = 10.0) -> str:
    """What a command writes into the FIFO ``path``; waits (at most ``within`` s) for it to write."""

    def read() -> str:
        with open(path) as fifo:
            return fifo.read()

    try:
        with anyio.fail_after(within):
            return await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
    except TimeoutError:
        await anyio.to_thread.run_sync(_open_for_writing, path)  # unblocks the abandoned reader thread
        raise


def _open_for_writing(path: Path) -> None:
    with open(path, "w"):
        pass


def is_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (dead, not yet reaped by its parent) counts as dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def pids_running(argv: list[str]) -> list[int]:
    """The live processes whose command line is exactly ``argv`` (host pids, found through /proc)."""
    wanted = "\0".join(argv) + "\0"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_text()
        except OSError:
            continue
        if cmdline == wanted and is_alive(int(entry)):
            found.append(int(entry))
    return found


async def wait_gone(pids: Iterable[int], within: float = 5.0) -> None:
    """Wait until every process in ``pids`` has exited (its pidfd becomes readable), at most ``within`` s."""
    with anyio.fail_after(within):
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            try:
                await anyio.wait_readable(fd)
            finally:
                os.close(fd)


async def kill_when_ready(script: str, *args: str, within: float = 30.0) -> None:
    """Run the Python ``script`` (with ``args``) in a fresh interpreter until it prints a line
    ``READY``, then SIGKILL it: the crash of a SIGKILL-and-resume test.

    The script prints ``READY`` (flushed) once what must survive is on disk.

    :raises AssertionError: the script ended, or ``within`` seconds passed, before ``READY``.
    """
    async with await anyio.open_process(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        assert process.stdout is not None
        seen = b""
        with anyio.move_on_after(within):
            async for chunk in process.stdout:
                seen += chunk
                if b"READY\n" in seen:
                    break
        if b"READY\n" not in seen:
            process.kill()
            errors = await process.stderr.receive() if process.stderr is not None else b""
            msg = f"the script never printed READY; its output: {seen!r}, errors: {errors[-2000:]!r}"
            raise AssertionError(msg)
        process.kill()
        code = await process.wait()
        assert code == -9, f"the script ended with {code}, not by SIGKILL"
