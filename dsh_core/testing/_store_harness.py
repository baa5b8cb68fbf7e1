"""What the cases of ``check_session_store`` work with: one store under test, harnesses on it, and
processes that hold or write it.

A case gets a ``KitStore``: the backend's plugin class and its table (from ``make``), a harness
factory (a new plugin instance on the same table for every harness, so two harnesses of one
process are two owners), and the plugin's import path and table as JSON for child processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import attrs
import sniffio
from anyio.streams.buffered import BufferedByteReceiveStream

from dsh_core.host._context import Context
from dsh_core.host._harness import Harness
from dsh_core.persistence import SessionInUseError, StoredSession
from dsh_core.testing._scripted import ScriptedModel
from dsh_core.vocabulary import AgentOptions

__all__ = ["MODEL", "Child", "KitStore"]

MODEL = AgentOptions(model="scripted/test")

#: how long a case waits for a dead holder's session to come free (SPEC §9.6: 20 s after the death)
RELEASE_WITHIN = 20.0


@attrs.frozen
class KitStore:
    """The store under test (see the module docstring)."""

    plugin_class: type[Any]
    name: str
    table: Mapping[str, Any]
    directory: Path

    @property
    def plugin_path(self) -> str:
        """``module:Class`` of the plugin, for a child process."""
        return f"{self.plugin_class.__module__}:{self.plugin_class.__qualname__}"

    def child_args(self) -> list[str]:
        """The arguments every child script takes first: plugin path, plugin name, table as JSON."""
        return [self.plugin_path, self.name, json.dumps(dict(self.table), default=str)]  # a Path as its text

    @asynccontextmanager
    async def harness(
        self,
        model: ScriptedModel | None = None,
        *,
        extra: Mapping[str, Any] | None = None,
        plugins: tuple[object, ...] = (),
    ) -> AsyncIterator[Context]:
        """A Harness with a fresh instance of the backend's plugin (autoload off); a ScriptedModel if given."""
        config = {"plugins": {self.name: dict(self.table), **(extra or {})}}
        async with Harness(config=config, plugins=[self.plugin_class(), *plugins], autoload=False) as ctx:
            if model is not None:
                ctx.llm.register_adapter(model.provider, model)
            yield ctx

    async def read(self, session_id: str) -> StoredSession:
        """The stored log as a fresh harness reads it (no lock: works while another process holds it)."""
        async with self.harness() as ctx:
            stored: StoredSession = await ctx.session_persistence.read(session_id)
            return stored

    async def load_when_free(self, ctx: Context, session_id: str) -> StoredSession:
        """``load`` once the session's dead holder has let it go (at most 20 s, SPEC §9.6).

        A store learns of a holder's death only by trying (a lock the kernel dropped, a connection
        the server closed): no event says it, so this retries, backing off, until the deadline.
        """
        delay = 0.01
        with anyio.fail_after(RELEASE_WITHIN):
            while True:
                try:
                    loaded: StoredSession = await ctx.session_persistence.load(session_id)
                    return loaded
                except SessionInUseError:
                    await anyio.sleep(delay)
                    delay = min(delay * 2, 0.5)


class Child:
    """A child process of a case: ``python -c script args... <async library>``, read line by line."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdout is not None
        self.process = process
        self._lines = BufferedByteReceiveStream(process.stdout)

    @classmethod
    async def start(cls, script: str, *args: str) -> Child:
        command = [sys.executable, "-c", script, *args, sniffio.current_async_library()]
        process = await anyio.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
        return cls(process)

    async def line(self, *, within: float = 60.0) -> str:
        """The child's next line on stdout."""
        try:
            with anyio.fail_after(within):
                return (await self._lines.receive_until(b"\n", 65536)).decode()
        except anyio.IncompleteRead:
            msg = f"the child process ended (exit {await self.process.wait()}) before its next line"
            raise AssertionError(msg) from None

    async def kill(self) -> None:
        """SIGKILL it and reap it; it must have been running."""
        self.process.kill()
        code = await self.process.wait()
        assert code == -9, f"the child was not killed by SIGKILL but ended with {code}"

    async def close_stdin(self) -> None:
        if self.process.stdin is not None:
            await self.process.stdin.aclose()

    async def aclose(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.aclose()
