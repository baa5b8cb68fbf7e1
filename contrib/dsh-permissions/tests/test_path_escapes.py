"""The path corpus for the file tools: every way out of the workspace, asserted to be refused.

The file tools run in the harness (not in the sandbox), in workspace-write mode with the
permissions plugin: ``..``, absolute paths, ``/proc/self/root``, ``~``, symlinks made before the
session and during it (by a sandboxed command), and a symlink race, where a directory on the way
is swapped for a symlink to outside between the moment a path is checked and the moment it is
opened. Each attempt asserts that nothing outside was read, written or listed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dsh_core import ToolResult

from .conftest import Start
from .permissions_kit import call, text

pytestmark = pytest.mark.anyio

#: what the files outside the workspace hold; never in a result
SECRET = "top secret"


@pytest.fixture
def outside(ws: Path) -> Path:
    """The directory next to the workspace, holding ``secret.txt`` (made by the ``ws`` fixture)."""
    path = ws.parent / "outside"
    assert (path / "secret.txt").read_text() == f"{SECRET}\n"
    return path


def names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def content(path: Path | str) -> str:
    return Path(path).read_text()


def refused(result: ToolResult) -> bool:
    return result.is_error and SECRET not in text(result)


ESCAPES = [
    "../outside/secret.txt",
    "sub/../../outside/secret.txt",
    "{outside}/secret.txt",
    "/proc/self/root{outside}/secret.txt",
    "/proc/self/cwd/../outside/secret.txt",
    "/proc/self/root/etc/passwd",
    "/etc/passwd",
    "~/../{outside}/secret.txt",
    "link-dir/secret.txt",
    "link-file",
    "chain",
    "link-dir",
]


def make_links(ws: Path, outside: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "link-dir").symlink_to("../outside")
    (ws / "link-file").symlink_to(outside / "secret.txt")
    (ws / "hop").symlink_to("link-file")
    (ws / "chain").symlink_to("hop")


@pytest.mark.parametrize("raw", ESCAPES)
async def test_reads_that_leave_the_workspace_are_refused(start: Start, ws: Path, outside: Path, raw: str) -> None:
    """read_file, list_dir, grep and glob refuse each escape, made before the session, and show nothing outside."""
    make_links(ws, outside)
    path = raw.format(outside=outside)
    async with start() as ctx:
        results = {
            "read_file": await call(ctx, "read_file", ws, path=path),
            "list_dir": await call(ctx, "list_dir", ws, path=path),
            "grep": await call(ctx, "grep", ws, pattern="secret|root", path=path),
            "glob": await call(ctx, "glob", ws, pattern="**", path=path),
        }
    for name, result in results.items():
        assert refused(result), (name, text(result))
        assert "root:x:0:0" not in text(result), (name, text(result))


@pytest.mark.parametrize("raw", [e for e in ESCAPES if not e.startswith("/proc/self/root/etc")])
async def test_writes_that_leave_the_workspace_are_refused(start: Start, ws: Path, outside: Path, raw: str) -> None:
    """write_file and edit_file refuse each escape; the files outside are unchanged and nothing is created there."""
    make_links(ws, outside)
    path = raw.format(outside=outside)
    before = names(outside)
    async with start() as ctx:
        wrote = await call(ctx, "write_file", ws, path=path, content="planted\n")
        edited = await call(ctx, "edit_file", ws, path=path, old_text=SECRET, new_text="planted")
        nested = await call(ctx, "write_file", ws, path=f"{path}/x.txt", content="planted\n")
    for result in (wrote, edited, nested):
        assert result.is_error, text(result)
    assert content(outside / "secret.txt") == f"{SECRET}\n"
    assert names(outside) == before
    assert content("/etc/passwd").count("planted") == 0


async def test_glob_and_grep_do_not_follow_symlinks_out(start: Start, ws: Path, outside: Path) -> None:
    """Searching the workspace lists a symlink but never what lies behind it outside."""
    make_links(ws, outside)
    async with start() as ctx:
        found = await call(ctx, "glob", ws, pattern="**")
        matches = await call(ctx, "grep", ws, pattern="secret")
    assert "link-dir/" in text(found)
    assert "link-dir/secret.txt" not in text(found)
    assert SECRET not in text(matches)


@pytest.mark.parametrize("bwrap", ["as installed", "not installed"])
async def test_symlinks_made_during_the_session_are_refused(
    start: Start,
    ws: Path,
    outside: Path,
    bwrap: str,
    path_without: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A command makes symlinks out of the workspace (relative and absolute); the file tools then refuse them.

    In workspace-write, with the sandbox if this machine has bwrap, and where it has none (taken
    off PATH here): then ``sandbox = "auto"`` runs the command unconfined, and the file tools
    still refuse every path out of the workspace.
    """
    if bwrap == "not installed":
        path_without("bwrap")
    caplog.set_level(logging.WARNING, logger="dsh.permissions")
    command = f"ln -s ../outside made-dir && ln -s {outside}/secret.txt made-file && ln -s /etc made-etc; echo done=$?"
    async with start(mode="workspace-write", sandbox="auto") as ctx:
        made = await call(ctx, "bash", ws, command=command)
        assert "done=0" in text(made), text(made)
        results = [
            await call(ctx, "read_file", ws, path="made-dir/secret.txt"),
            await call(ctx, "read_file", ws, path="made-file"),
            await call(ctx, "read_file", ws, path="made-etc/passwd"),
            await call(ctx, "write_file", ws, path="made-dir/new.txt", content="planted\n"),
            await call(ctx, "edit_file", ws, path="made-file", old_text=SECRET, new_text="planted"),
            await call(ctx, "list_dir", ws, path="made-dir"),
        ]
    for result in results:
        assert refused(result), text(result)
    assert names(outside) == ["secret.txt"]
    assert content(outside / "secret.txt") == f"{SECRET}\n"
    if bwrap == "not installed":
        warnings = [r.getMessage() for r in caplog.records if r.name == "dsh.permissions"]
        assert warnings == [
            "commands run without a sandbox: bubblewrap ('bwrap') is not installed or not on PATH "
            "(plugins.permissions.sandbox = 'auto')"
        ]


@contextlib.contextmanager
def swapping(ws: Path, outside: Path) -> Iterator[threading.Event]:
    """Swap ``ws/d`` between a real directory and a symlink to ``outside``, as fast as it goes, in a thread."""
    real = ws / "d"
    real.mkdir()
    (real / "secret.txt").write_text("inside\n")
    parked = ws / "d.parked"
    stop = threading.Event()
    swaps = threading.Event()

    def swap() -> None:
        # Each step may meet what a write_file made meanwhile (a new directory d): then it is removed.
        while not stop.is_set():
            with contextlib.suppress(OSError):
                os.rename(real, parked)
            with contextlib.suppress(OSError):
                os.symlink(outside, real)
            if real.is_symlink():
                with contextlib.suppress(OSError):
                    real.unlink()
            elif real.is_dir():
                shutil.rmtree(real, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.rename(parked, real)
            swaps.set()

    thread = threading.Thread(target=swap, name="symlink-race")
    thread.start()
    try:
        yield swaps
    finally:
        stop.set()
        thread.join()


async def test_a_symlink_race_never_leads_a_read_or_a_write_outside(start: Start, ws: Path, outside: Path) -> None:
    """With ws/d flipping between a directory and a symlink out, every read gets the inside file or a refusal."""
    seen: set[str] = set()
    async with start() as ctx:
        with swapping(ws, outside) as swaps:
            for _ in range(300):
                read = await call(ctx, "read_file", ws, path="d/secret.txt")
                seen.add("inside" if "inside" in text(read) else "error" if read.is_error else text(read))
                assert SECRET not in text(read), text(read)
                wrote = await call(ctx, "write_file", ws, path="d/secret.txt", content="inside\n")
                assert SECRET not in text(wrote)
                assert content(outside / "secret.txt") == f"{SECRET}\n"
            assert swaps.is_set()
    assert names(outside) == ["secret.txt"]
    assert "inside" in seen  # the race did not simply make every call fail
