"""Helpers for the Temporal tests: worker subprocesses that share one store, and reading that store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from dsh_temporal import TemporalAgents

from dsh_core import AgentOptions, SessionEvent

MODEL = AgentOptions(model="scripted/follow")

#: the heartbeat timeout of the tests' sessions and workers: short, so a lost worker moves on fast
HEARTBEAT = 2.0


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + "}"
    return repr(value)


class WorkerProcess:
    """A running ``dsh worker`` subprocess whose stdout lines are collected as they come."""

    def __init__(self, process: Process, name: str) -> None:
        self.process = process
        self.name = name
        self.lines: list[str] = []
        self.stderr = ""
        self._eof = False
        self._changed = anyio.Event()

    async def _read(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for line in complete:
                self.lines.append(line.decode(errors="replace"))
            self._changed.set()
            self._changed = anyio.Event()
        self._eof = True
        self._changed.set()

    async def _read_err(self) -> None:
        assert self.process.stderr is not None
        async for chunk in self.process.stderr:
            self.stderr += chunk.decode(errors="replace")

    async def wait_for(self, text: str, within: float = 30.0) -> str:
        """The first stdout line containing ``text``; waits for it (at most ``within`` s)."""
        with anyio.fail_after(within):
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                if self._eof:
                    msg = f"{self.name} closed its stdout before printing {text!r}:\n{self.stderr}"
                    raise AssertionError(msg)
                await self._changed.wait()

    async def closed(self) -> None:
        """Wait until the process closed its output (everything it printed is collected)."""
        while not self._eof:
            await self._changed.wait()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)


class Cluster:
    """What the worker processes share: the dev server, a task queue and a JSONL store root."""

    def __init__(
        self, address: str, tmp: Path, *, task_queue: str, store: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        self.address = address
        self.task_queue = task_queue
        self.root = tmp / "sessions"
        #: the shared store's plugin table (default: persistence-jsonl on ``root``)
        self.store = {name: dict(table) for name, table in (store or {}).items()} or {
            "persistence-jsonl": {"root": str(self.root), "batch_delay": 0.02}
        }
        self.tmp = tmp
        self._count = 0

    def config_file(self, extra: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
        """A dsh.toml for the workers: the shared store, this task queue, a short heartbeat timeout."""
        tables: dict[str, dict[str, Any]] = {
            **{name: dict(table) for name, table in self.store.items()},
            "temporal-testkit": {"enabled": True},
            "temporal": {"address": self.address, "task_queue": self.task_queue, "heartbeat_timeout": HEARTBEAT},
        }
        for name, table in (extra or {}).items():
            tables.setdefault(name, {}).update(table)
        lines = []
        for name, table in tables.items():
            lines.append(f"[plugins.{name}]")
            lines += [f"{key} = {_toml(value)}" for key, value in table.items()]
            lines.append("")
        self._count += 1
        path = self.tmp / f"worker-{self._count}.toml"
        path.write_text("\n".join(lines), encoding="utf-8")
        return path

    @asynccontextmanager
    async def worker(
        self, extra: Mapping[str, Mapping[str, Any]] | None = None, *, ready: bool = True
    ) -> AsyncIterator[WorkerProcess]:
        """Start a worker process; on exit it is killed if still running (and always reaped)."""
        config = self.config_file(extra)
        env = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")}
        env["HOME"] = str(self.tmp)
        command = [str(Path(sys.executable).with_name("dsh")), "worker", "--config", str(config)]
        process = await anyio.open_process(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.tmp, env=env
        )
        worker = WorkerProcess(process, f"worker {self._count}")
        async with process, anyio.create_task_group() as tg:
            tg.start_soon(worker._read)
            tg.start_soon(worker._read_err)
            try:
                if ready:
                    await worker.wait_for("dsh worker: serving")
                yield worker
            finally:
                if process.returncode is None:
                    process.kill()
                with anyio.move_on_after(10, shield=True):
                    await process.wait()

    def agents(self, *, store: bool = True) -> TemporalAgents:
        """A client; ``store=False``: without store access (``events()`` then reads through a worker)."""
        return TemporalAgents.connect(
            address=self.address,
            task_queue=self.task_queue,
            heartbeat_timeout=HEARTBEAT,
            persistence=self.store if store else None,
        )


async def log_until(agents: TemporalAgents, session_id: str, done: Any, within: float = 30.0) -> list[SessionEvent]:
    """The session's log, tailed from the store until ``done(event)`` is true for an event."""
    session = await agents.get(session_id)
    events: list[SessionEvent] = []
    with anyio.fail_after(within):
        async with aclosing(session.events()) as stream:
            async for event in stream:
                events.append(event)
                if done(event):
                    return events
    return events


def stored_log(cluster: Cluster, session_id: str) -> list[dict[str, Any]]:
    """The session's log as the store has it, each event as JSON (read without a lock)."""
    return [json.loads(line) for line in (cluster.root / session_id / "session.jsonl").read_text().splitlines()[1:]]


def of(events: list[SessionEvent], kind: str) -> list[SessionEvent]:
    return [event for event in events if event.type == kind]
