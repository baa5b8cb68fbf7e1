"""bash: output and exit code, timeout, output cap, and no process outliving the call."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import anyio
import attrs
import pytest
from dsh_workspace import Confined, Sandbox, WorkspacePlugin, _process
from dsh_workspace._shell import OutputCapture

from dsh_core import CancelSignal, Context, Harness, ToolExecution

from .workspace_kit import call, is_alive, pids_running, read_fifo, text, wait_gone

pytestmark = pytest.mark.anyio


async def test_bash_reports_output_and_exit_code(ctx: Context, ws: Path) -> None:
    """stdout and stderr arrive merged in order, the command runs in the workspace, the exit code is shown."""
    result = await call(ctx, "bash", ws, command="echo out; echo err >&2; pwd; exit 3")
    assert not result.is_error
    lines = text(result).splitlines()
    assert lines[:3] == ["out", "err", str(ws)]
    assert lines[3].startswith("[exit code 3; ")
    assert result.metadata["exit_code"] == 3


async def test_bash_without_output_and_without_input(ctx: Context, ws: Path) -> None:
    """A silent command says so, and a command reading stdin gets end-of-file at once."""
    result = await call(ctx, "bash", ws, command="cat")
    assert text(result).startswith("(no output)\n[exit code 0; ")


async def test_bash_reports_death_by_signal(ctx: Context, ws: Path) -> None:
    """A command killed by a signal is reported with the signal's name."""
    result = await call(ctx, "bash", ws, command="kill -KILL $$")
    assert "[killed by SIGKILL; " in text(result)


async def test_bash_timeout_stops_the_command_and_keeps_its_output(ctx: Context, ws: Path) -> None:
    """Past its timeout the command is stopped; the result is a TIMEOUT error with the output so far."""
    result = await call(ctx, "bash", ws, command="echo $$; exec sleep 1000", timeout=1)
    assert result.is_error
    assert result.error_code == "TIMEOUT"
    shown = text(result)
    pid = int(shown.splitlines()[0])
    assert "[timed out after 1 s: the command and every process it started were stopped." in shown
    await wait_gone([pid])


@pytest.mark.parametrize("workspace_config", [{"bash_timeout": 0.25, "bash_max_timeout": 5}])
async def test_bash_default_and_maximum_timeout_come_from_config(ctx: Context, ws: Path) -> None:
    """Without a timeout the configured default applies; asking for more than the maximum is refused."""
    result = await call(ctx, "bash", ws, command="exec sleep 1000")
    assert "timed out after 0.25 s" in text(result)
    too_long = await call(ctx, "bash", ws, command="true", timeout=6)
    assert too_long.error_code == "INVALID_ARGS"
    assert "at arguments.timeout: 6 is greater than the maximum of 5" in text(too_long)
    zero = await call(ctx, "bash", ws, command="true", timeout=0)
    assert zero.error_code == "INVALID_ARGS"
    assert "at arguments.timeout: 0 is less than or equal to the minimum of 0" in text(zero)


@pytest.mark.parametrize("workspace_config", [{"max_output_bytes": 1000}])
async def test_bash_output_cap_keeps_head_and_tail(ctx: Context, ws: Path) -> None:
    """Long output keeps its first and last bytes, with a marker saying how much was cut."""
    result = await call(ctx, "bash", ws, command="seq 1 100000")
    shown = text(result)
    assert shown.startswith("1\n2\n3\n")
    assert "99999\n100000\n[exit code 0" in shown
    total = len("".join(f"{n}\n" for n in range(1, 100001)))
    assert f"[... {total - 1000} bytes (" in shown
    assert "of output cut here; the start and the end are kept ...]" in shown
    assert result.metadata["output_cut"] == total - 1000


def test_output_capture_counts_what_it_cuts() -> None:
    """OutputCapture keeps limit/2 bytes from each end and counts the bytes and lines between."""
    capture = OutputCapture(10)
    for piece in (b"abc\n", b"def\n", b"ghi\n", b"jkl\n"):
        capture.feed(piece)
    assert capture.dropped == 6
    assert capture.text() == (
        "abc\nd\n[... 6 bytes (1 line) of output cut here; the start and the end are kept ...]\n\njkl\n"
    )
    small = OutputCapture(100)
    small.feed(b"short")
    assert small.text() == "short"
    assert small.dropped == 0


async def test_background_processes_are_stopped_when_the_command_ends(ctx: Context, ws: Path) -> None:
    """A process the command leaves running in the background does not outlive the call."""
    result = await call(ctx, "bash", ws, command="sleep 987654.1 & echo $!")
    pid = int(text(result).splitlines()[0])
    await wait_gone([pid])
    assert pids_running(["sleep", "987654.1"]) == []


async def _start_group(
    ctx: Context, ws: Path, tg: anyio.abc.TaskGroup, signal: CancelSignal | None
) -> list[int]:
    """Start `bash -c 'sleep 1000 & sleep 1000'` through the tool; return the pids it reports."""
    fifo = ws / "pids.fifo"
    os.mkfifo(fifo)
    results: list[object] = []

    async def run() -> None:
        results.append(
            await call(
                ctx, "bash", ws, signal=signal, command="sleep 1000 & echo $$ $! > pids.fifo; sleep 1000"
            )
        )

    tg.start_soon(run)
    pids = [int(pid) for pid in (await read_fifo(fifo)).split()]
    assert len(pids) == 2
    assert all(is_alive(pid) for pid in pids)
    return pids


async def test_cancel_through_the_signal_kills_the_whole_process_group(ctx: Context, ws: Path) -> None:
    """Cancelling the call's signal stops the shell and its background child; the result is ABORTED."""
    signal = CancelSignal()
    async with anyio.create_task_group() as tg:
        pids = await _start_group(ctx, ws, tg, signal)
        pidfds = [os.pidfd_open(pid) for pid in pids]  # held so the pids cannot be reused meanwhile
        signal.cancel("user pressed stop")
    try:
        await wait_gone(pids)
    finally:
        for fd in pidfds:
            os.close(fd)
    assert not any(is_alive(pid) for pid in pids)


async def test_task_cancellation_kills_the_whole_process_group(ctx: Context, ws: Path) -> None:
    """Cancelling the task running the call stops every process of the group before it returns."""
    async with anyio.create_task_group() as tg:
        pids = await _start_group(ctx, ws, tg, None)
        tg.cancel_scope.cancel()
    await wait_gone(pids)
    assert not any(is_alive(pid) for pid in pids)


async def test_cancelled_call_result_is_aborted(ctx: Context, ws: Path) -> None:
    """The call cancelled through its signal ends with an ABORTED result."""
    signal = CancelSignal()
    fifo = ws / "ready.fifo"
    os.mkfifo(fifo)
    results = []

    async def run() -> None:
        results.append(
            await call(ctx, "bash", ws, signal=signal, command="echo go > ready.fifo; exec sleep 1000")
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await read_fifo(fifo)
        signal.cancel()
    assert results[0].error_code == "ABORTED"


async def test_a_command_is_watched_from_the_loop_without_a_thread(ctx: Context, ws: Path) -> None:
    """Where pidfds exist, no thread waits for the command (asyncio's child watcher would start one per command)."""
    assert _process._has_pidfd()  # Linux 5.3 or later: what CI runs on
    fifo = ws / "ready.fifo"
    os.mkfifo(fifo)
    results = []

    async def run() -> None:
        results.append(await call(ctx, "bash", ws, command="echo go > ready.fifo; sleep 0.2; echo done"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await read_fifo(fifo)
        waiting = [thread.name for thread in threading.enumerate() if "waitpid" in thread.name]
    assert waiting == []
    assert text(results[0]).startswith("done\n[exit code 0; ")


async def test_without_pidfds_commands_run_through_anyio(
    ctx: Context, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the system has no pidfd, anyio's process runs the command, with the same output, status and clean-up."""
    monkeypatch.setattr(_process, "_has_pidfd", lambda: False)
    result = await call(ctx, "bash", ws, command="echo out; echo err >&2; sleep 876543.2 & exit 4")
    assert text(result).startswith("out\nerr\n[exit code 4; ")
    timed_out = await call(ctx, "bash", ws, command="exec sleep 1000", timeout=0.5)
    assert timed_out.error_code == "TIMEOUT"
    await wait_gone(pids_running(["sleep", "876543.2"]))


async def test_a_command_whose_pidfd_cannot_be_opened_is_stopped_and_reported(
    ctx: Context, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of descriptors right after the start: the command is killed and reaped, and the call says it could not start."""
    assert _process._has_pidfd()  # probed (and remembered) before pidfd_open starts failing

    def no_descriptor_left(pid: int, flags: int = 0) -> int:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(_process.os, "pidfd_open", no_descriptor_left)
    result = await call(ctx, "bash", ws, command="exec sleep 876543.3")
    monkeypatch.undo()
    assert text(result) == "Error: the command could not be started: Too many open files"
    assert pids_running(["sleep", "876543.3"]) == []


class PrefixSandbox:
    """A sandbox that runs every command under `env SANDBOXED=yes` and records what it was given."""

    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.seen: list[tuple[list[str], str, str]] = []

    async def wrap(self, argv: Sequence[str], *, cwd: str, execution: ToolExecution) -> Sequence[str]:
        self.seen.append((list(argv), cwd, execution.name))
        if self.refuse is not None:
            raise RuntimeError(self.refuse)
        return ["env", "SANDBOXED=yes", *argv]


class SandboxPlugin:
    name = "test-sandbox"
    provides = ("sandbox",)

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def start(self, ctx: Context) -> None:
        ctx.provide("sandbox", self.sandbox)


async def test_bash_runs_through_the_sandbox_service(ws: Path) -> None:
    """The sandbox service gets the argv and the workspace, and what it returns is what runs."""
    sandbox = PrefixSandbox()
    assert isinstance(sandbox, Sandbox)
    async with Harness(plugins=[WorkspacePlugin, SandboxPlugin(sandbox)], autoload=False) as ctx:
        result = await call(ctx, "bash", ws, command="echo $SANDBOXED")
    assert text(result).startswith("yes\n")
    [(argv, cwd, name)] = sandbox.seen
    assert argv[1:] == ["-c", "echo $SANDBOXED"]
    assert argv[0].endswith("bash")
    assert (cwd, name) == (str(ws), "bash")


async def test_a_refusing_sandbox_means_the_command_does_not_run(ws: Path) -> None:
    """When the sandbox raises, the command is not run at all and its message is the error."""
    sandbox = PrefixSandbox(refuse="no sandbox here")
    async with Harness(plugins=[WorkspacePlugin, SandboxPlugin(sandbox)], autoload=False) as ctx:
        result = await call(ctx, "bash", ws, command="touch ran.txt")
    assert result.is_error
    assert result.error_code == "TOOL_ERROR"
    assert text(result) == "Error: the command was not run: no sandbox here"
    assert not (ws / "ran.txt").exists()


@attrs.frozen
class Handed:
    """A ``Confined`` command: an argv and the descriptors it inherits."""

    argv: tuple[str, ...]
    pass_fds: tuple[int, ...]


class PipeSandbox:
    """A sandbox that hands each command a fresh pipe holding a word (as bwrap's ``--file FD`` reads one)."""

    def __init__(self) -> None:
        self.handed: list[int] = []
        self.program = "sh"

    async def wrap(self, argv: Sequence[str], *, cwd: str, execution: ToolExecution) -> Handed:
        read, write = os.pipe()
        os.write(write, b"handed-over\n")
        os.close(write)
        self.handed.append(read)
        return Handed((self.program, "-c", f'cat /dev/fd/{read}; exec "$@"', "sh", *argv), (read,))


async def test_a_sandbox_can_hand_descriptors_to_the_command(ws: Path) -> None:
    """A ``Confined`` result's descriptors reach the process under their numbers; the harness closes its copies."""
    sandbox = PipeSandbox()
    assert isinstance(sandbox, Sandbox)
    assert isinstance(Handed((), ()), Confined)
    async with Harness(plugins=[WorkspacePlugin, SandboxPlugin(sandbox)], autoload=False) as ctx:
        await call(ctx, "bash", ws, command="true")
        before = sorted(os.listdir("/proc/self/fd"))
        result = await call(ctx, "bash", ws, command="echo ran")
        after = sorted(os.listdir("/proc/self/fd"))
        sandbox.program = "/no/such/wrapper"
        failed = await call(ctx, "bash", ws, command="true")
        last = sorted(os.listdir("/proc/self/fd"))
    assert text(result).startswith("handed-over\nran\n")
    assert text(failed).startswith("Error: the command could not be started: No such file or directory")
    assert after == before == last  # closed after the start, and after a failure to start
    assert len(sandbox.handed) == 3


@pytest.mark.parametrize("workspace_config", [{"shell": "no-such-shell-anywhere"}])
async def test_missing_shell_is_an_error(ctx: Context, ws: Path) -> None:
    """A shell that is not installed is named in the error."""
    result = await call(ctx, "bash", ws, command="true")
    assert "the shell 'no-such-shell-anywhere' is not installed" in text(result)


def test_credentials_never_reach_a_command() -> None:
    """API keys, tokens and secrets in the harness's environment are left out of bash's."""
    from dsh_workspace import command_environment

    env = command_environment(
        {"PATH": "/bin", "DEEPSEEK_API_KEY": "sk-1", "GITHUB_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "a", "HOME": "/h"}
    )
    assert env["PATH"] == "/bin"
    assert env["HOME"] == "/h"
    assert not {"DEEPSEEK_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"} & set(env)
    assert env["PAGER"] == "cat"
