"""One owner per session, on every backend: a second process or harness is told who holds it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import anyio
import pytest

from .backends import Backend

pytestmark = pytest.mark.anyio

#: a second process: a harness with the backend's plugin that keeps session "shared" live until stdin closes
HOLDER = textwrap.dedent(
    """
    import importlib, json, sys
    import anyio
    from dsh_core import Harness

    async def main(plugin_path: str, name: str, table: str) -> None:
        module, _, cls = plugin_path.partition(":")
        plugin = getattr(importlib.import_module(module), cls)()
        config = {"plugins": {name: json.loads(table)}}
        async with Harness(config=config, plugins=[plugin], autoload=False) as ctx:
            session = await ctx.sessions.create("shared")
            session.append("note/holder", {})
            await ctx.sessions.flush(session)
            print("READY", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.read)
            session.append("note/holder-done", {})

    anyio.run(main, *sys.argv[1:])
    """
)


def holder_command(backend: Backend) -> list[str]:
    return [sys.executable, "-c", HOLDER, backend.plugin_path, backend.name, json.dumps(backend.table())]


@pytest.fixture
def holder(backend: Backend) -> Iterator[subprocess.Popen[str]]:
    """Another process holding session ``shared`` live; it lets go when its stdin is closed."""
    with subprocess.Popen(
        holder_command(backend), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "READY"
            yield process
        finally:
            if process.poll() is None:
                process.kill()


def release(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    assert process.wait(timeout=30) == 0


async def test_second_process_is_told_who_holds_the_session(
    backend: Backend, holder: subprocess.Popen[str]
) -> None:
    """load(), resume() and a same-id session all meet 'in use by process N'; after it exits, load works."""
    errors = backend.errors
    who = f"in use by process {holder.pid}"
    async with backend.harness() as ctx:
        with pytest.raises(errors.SessionInUseError, match=f"session 'shared' is {who}") as caught:
            await ctx.session_persistence.load("shared")
        assert caught.value.pid == holder.pid
        assert caught.value.session_id == "shared"
        if backend.name == "persistence-postgres":  # across hosts, the host is named too
            assert caught.value.host == socket.gethostname()  # type: ignore[attr-defined]
            assert f"on host {socket.gethostname()}" in str(caught.value)
        with pytest.raises(errors.SessionInUseError, match=who):
            await ctx.agents.resume("shared")
        with pytest.raises(errors.SessionInUseError, match=who):
            await ctx.session_persistence.delete("shared")
        with pytest.raises(errors.SessionInUseError, match=who):
            await ctx.session_persistence.repair("shared")
        live = await ctx.sessions.create("shared")  # goes live here, but cannot be persisted
        live.append("note/intruder", {})
        with pytest.raises(errors.SessionInUseError, match=who):
            await ctx.sessions.flush(live)
    assert [event.type for event in backend.stored("shared")] == ["note/holder"]
    await anyio.to_thread.run_sync(release, holder)
    async with backend.harness() as ctx:
        loaded = await ctx.session_persistence.load("shared")
    assert [event.type for event in loaded.events] == ["note/holder", "note/holder-done"]


async def test_resume_refused_while_the_holder_lives_and_allowed_after_sigkill(
    backend: Backend, holder: subprocess.Popen[str]
) -> None:
    """A SIGKILLed holder frees the session without any manual step: the next resume succeeds."""
    async with backend.harness() as ctx:
        with pytest.raises(backend.errors.SessionInUseError, match=f"process {holder.pid}"):
            await ctx.agents.resume("shared")
    holder.kill()
    assert await anyio.to_thread.run_sync(holder.wait) == -9
    with anyio.fail_after(20):  # the contract: a create or resume 20 s after the death succeeds
        await backend.wait_released("shared")
    async with backend.harness() as ctx, await ctx.agents.resume("shared") as handle:
        assert [event.type for event in handle.agent.session.events] == ["note/holder"]