"""Two processes never write one session: the second is told which process holds it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from dsh_persistence_jsonl import SessionInUseError

from .persistence_kit import HarnessFactory, stored_events

pytestmark = pytest.mark.anyio

#: a second process: a harness with the plugin that keeps session "shared" live until stdin closes
HOLDER = textwrap.dedent(
    """
    import sys
    import anyio
    from dsh_core import Harness
    from dsh_persistence_jsonl import PersistencePlugin

    async def main(root: str) -> None:
        config = {"plugins": {"persistence-jsonl": {"root": root}}}
        async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:
            session = await ctx.sessions.create("shared")
            session.append("note/holder", {})
            await ctx.sessions.flush(session)
            print("READY", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.read)
            session.append("note/holder-done", {})

    anyio.run(main, sys.argv[1])
    """
)


@pytest.fixture
def holder(root: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding session ``shared`` live; it lets go when its stdin is closed."""
    command = [sys.executable, "-c", HOLDER, str(root)]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as process:
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
    harness: HarnessFactory, root: Path, holder: subprocess.Popen[str]
) -> None:
    """load(), resume() and a same-id session all meet 'in use by process N'; after it exits, load works."""
    path = root / "shared" / "session.jsonl"
    async with harness() as ctx:
        with pytest.raises(
            SessionInUseError, match=f"session 'shared' is in use by process {holder.pid}"
        ) as caught:
            await ctx.session_persistence.load("shared")
        assert caught.value.pid == holder.pid
        assert caught.value.session_id == "shared"
        with pytest.raises(SessionInUseError, match=f"in use by process {holder.pid}"):
            await ctx.agents.resume("shared")
        with pytest.raises(SessionInUseError, match=f"in use by process {holder.pid}"):
            await ctx.session_persistence.delete("shared")
        live = await ctx.sessions.create("shared")  # goes live here, but cannot be persisted
        live.append("note/intruder", {})
        with pytest.raises(SessionInUseError, match=f"in use by process {holder.pid}"):
            await ctx.sessions.flush(live)
    assert [event.type for event in stored_events(path)] == ["note/holder"]
    await anyio.to_thread.run_sync(release, holder)
    async with harness() as ctx:
        loaded = await ctx.session_persistence.load("shared")
    assert [event.type for event in loaded.events] == ["note/holder", "note/holder-done"]


async def test_second_harness_in_this_process_is_refused(harness: HarnessFactory) -> None:
    """Two harnesses of one process on one root exclude each other too."""
    async with harness() as first, harness() as second:
        session = await first.sessions.create("mine")
        await first.sessions.flush(session)
        with pytest.raises(SessionInUseError, match="this process"):
            await second.session_persistence.load("mine")


async def test_load_keeps_the_lock_for_the_resume(harness: HarnessFactory) -> None:
    """Between load() and the resume nobody else can take the session; stopping lets it go."""
    async with harness() as ctx:
        session = await ctx.sessions.create("reserved")
        session.append("note/added", {})
    async with harness() as first:
        await first.session_persistence.load("reserved")
        async with harness() as second:
            with pytest.raises(SessionInUseError):
                await second.session_persistence.load("reserved")
        await first.session_persistence.load("reserved")  # the holder itself may load again
    async with harness() as third:
        await third.session_persistence.load("reserved")  # released when `first` stopped
