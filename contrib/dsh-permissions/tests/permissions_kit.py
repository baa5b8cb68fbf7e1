"""Helpers for the permissions tests: run a tool call, fake approval channels, watch processes."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from dsh_core import CancelSignal, Context, Text, ToolExecution, ToolResult

_ids = itertools.count(1)


async def call(
    ctx: Context,
    name: str,
    cwd: Path | str | None,
    *,
    agent_id: str | None = "a1",
    signal: CancelSignal | None = None,
    **arguments: Any,
) -> ToolResult:
    """Run one call of tool ``name`` by agent ``agent_id`` through the whole tool pipeline."""
    execution = ToolExecution(
        call_id=f"call-{next(_ids)}",
        name=name,
        arguments=json.dumps(arguments),
        cwd=None if cwd is None else str(cwd),
        agent_id=agent_id,
        signal=signal,
    )
    result: ToolResult = await ctx.tools.execute(execution)
    return result


async def listing(directory: Path) -> list[str]:
    """The names in ``directory``, sorted."""
    return sorted([entry.name async for entry in anyio.Path(directory).iterdir()])


def text(result: ToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, Text))


class Approval:
    """An ``approval`` service that answers ``answer`` and records each question."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str]] = []

    async def approve(self, execution: ToolExecution, reason: str) -> bool:
        self.asked.append((execution.name, reason))
        return self.answer


class ApprovalPlugin:
    """A tiny plugin providing ``approval``."""

    name = "test-approval"
    provides = ("approval",)

    def __init__(self, approval: Approval) -> None:
        self.approval = approval

    def start(self, ctx: Context) -> None:
        ctx.provide("approval", self.approval)


async def read_fifo(path: Path) -> str:
    """What a command writes into the FIFO ``path``; waits (at most 10 s) for it to write."""

    def read() -> str:
        with open(path) as fifo:
            return fifo.read()

    try:
        with anyio.fail_after(10):
            return await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
    except TimeoutError:
        await anyio.to_thread.run_sync(_open_for_writing, path)  # unblocks the abandoned reader thread
        raise


def _open_for_writing(path: Path) -> None:
    with open(path, "w"):
        pass


def is_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (dead, not yet reaped) counts as dead."""
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
