"""The bubblewrap sandbox: what it stops, and failing closed when it is required but cannot be made.

Tests that need a working bwrap assert the fail-closed denial instead where bwrap is missing or
the kernel refuses its namespaces, and print that they did so.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from dsh_permissions import BwrapSandbox, Confinement, SandboxStatus, SandboxUnavailableError, _cgroup
from dsh_permissions._confine import Profile, confined_argv, pid_max_for, pids_max_for
from dsh_workspace import Confined

from dsh_core import CancelSignal, ConfigError, Context, ToolExecution, ToolResult

from .conftest import Start
from .permissions_kit import call, is_alive, read_fifo, text, wait_gone

pytestmark = pytest.mark.anyio


async def fails_closed_instead(start: Start, ws: Path, problem: str) -> None:
    """bwrap cannot work here: check that a required sandbox refuses the command, and say so."""
    print(f"bwrap is unavailable here ({problem}); asserting the fail-closed denial instead")
    async with start(sandbox="required") as ctx:
        result = await call(ctx, "bash", ws, command="touch ran.txt")
    assert result.error_code == "DENIED"
    assert "the sandbox is required (plugins.permissions.sandbox = 'required') but cannot guarantee" in text(
        result
    )
    assert not (ws / "ran.txt").exists()


async def run(ctx: Context, ws: Path, command: str) -> ToolResult:
    result = await call(ctx, "bash", ws, command=command)
    assert result.error_code is None, text(result)
    return result


# ---------------------------------------------------------------------- with a working bwrap


async def test_sandbox_allows_the_workspace_and_stops_writes_elsewhere(
    start: Start, ws: Path, host_dir: Path, bwrap_problem: str | None
) -> None:
    """In workspace-write, commands write the workspace but not the system, nor via `cd /`."""
    if bwrap_problem is not None:
        await fails_closed_instead(start, ws, bwrap_problem)
        return
    async with start(sandbox="required") as ctx:
        inside = await run(ctx, ws, "echo hi > made.txt && cat made.txt")
        outside = await run(ctx, ws, f"touch {host_dir}/planted.txt; echo status=$?")
        root = await run(ctx, ws, "cd / && touch dsh-sandbox-escape; echo status=$?")
    assert text(inside).startswith("hi\n")
    assert (ws / "made.txt").read_text() == "hi\n"
    assert "No such file or directory" in text(outside)  # /var/tmp inside is a private one
    assert "status=1" in text(outside)
    assert not (host_dir / "planted.txt").exists()
    assert "Read-only file system" in text(root)
    assert not await anyio.Path("/dsh-sandbox-escape").exists()


async def test_read_only_mode_makes_the_workspace_read_only_too(
    start: Start, ws: Path, bwrap_problem: str | None
) -> None:
    """A command allowed in read-only mode by a rule can read the workspace but not write it."""
    if bwrap_problem is not None:
        await fails_closed_instead(start, ws, bwrap_problem)
        return
    (ws / "notes.txt").write_text("notes\n")
    rules = [{"tool": "bash", "action": "allow"}]
    async with start(mode="read-only", rules=rules, sandbox="required") as ctx:
        result = await run(ctx, ws, "cat notes.txt; echo new > notes.txt; echo status=$?")
    assert text(result).startswith("notes\n")
    assert "Read-only file system" in text(result)
    assert (ws / "notes.txt").read_text() == "notes\n"


async def test_sandbox_has_no_network(start: Start, ws: Path, bwrap_problem: str | None) -> None:
    """Inside the sandbox only loopback exists, and a server listening on the host is unreachable."""
    if bwrap_problem is not None:
        await fails_closed_instead(start, ws, bwrap_problem)
        return
    accepted = []
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tg:

            async def handle(stream: anyio.abc.SocketStream) -> None:
                accepted.append(stream)
                await stream.aclose()

            tg.start_soon(listener.serve, handle)
            async with start(sandbox="required") as ctx:
                interfaces = await run(ctx, ws, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
                connect = await run(
                    ctx, ws, f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; echo status=$?"
                )
            tg.cancel_scope.cancel()
    assert text(interfaces).splitlines()[0] == "lo"
    assert len(text(interfaces).splitlines()) == 2  # lo, then the exit line
    assert "status=1" in text(connect)
    assert accepted == []


async def test_full_access_runs_commands_unconfined(start: Start, ws: Path, host_dir: Path) -> None:
    """full-access uses no sandbox: the network and the system are reachable (sandbox required or not)."""
    accepted = anyio.Event()
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tg:

            async def handle(stream: anyio.abc.SocketStream) -> None:
                accepted.set()
                await stream.aclose()

            tg.start_soon(listener.serve, handle)
            async with start(mode="full-access", sandbox="required", bwrap="/nonexistent/bwrap") as ctx:
                connect = await run(ctx, ws, f"(exec 3<>/dev/tcp/127.0.0.1/{port}); echo status=$?")
                write = await run(ctx, ws, f"touch {host_dir}/made.txt; echo status=$?")
            with anyio.fail_after(5):
                await accepted.wait()
            tg.cancel_scope.cancel()
    assert "status=0" in text(connect)
    assert "status=0" in text(write)
    assert (host_dir / "made.txt").exists()


async def test_cancel_kills_every_process_in_the_sandbox(
    start: Start, ws: Path, bwrap_problem: str | None
) -> None:
    """Cancelling a sandboxed command stops bwrap and everything the command started inside."""
    if bwrap_problem is not None:
        await fails_closed_instead(start, ws, bwrap_problem)
        return
    os.mkfifo(ws / "ready.fifo")
    # The background child signals from the process that becomes the sleep (same pid across exec).
    command = "sh -c 'echo go > ready.fifo; exec sleep 876543.21' & exec sleep 876543.22"
    signal = CancelSignal()
    results: list[ToolResult] = []
    async with start(sandbox="required") as ctx:

        async def go() -> None:
            results.append(await call(ctx, "bash", ws, signal=signal, command=command))

        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await read_fifo(ws / "ready.fifo")
            pids = pids_with("876543.2")  # bwrap, its pid-1 helper, the shell and the child
            [child] = [
                pid for pid in pids if argv_of(pid)[0] in ("sh", "sleep") and "876543.21" in argv_of(pid)[-1]
            ]
            assert in_own_pid_namespace(child), "the command should run in the sandbox's pid namespace"
            pidfds = [os.pidfd_open(pid) for pid in pids]  # held so the pids cannot be reused meanwhile
            signal.cancel()
    try:
        assert results[0].error_code == "ABORTED"
        await wait_gone(pids)
    finally:
        for fd in pidfds:
            os.close(fd)


def argv_of(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().rstrip("\0").split("\0")


def in_own_pid_namespace(pid: int) -> bool:
    return os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")


async def test_sandbox_stops_daemons_that_left_the_process_group(
    start: Start, ws: Path, bwrap_problem: str | None
) -> None:
    """A process started with setsid escapes a process-group kill, but not the sandbox's pid namespace."""
    if bwrap_problem is not None:
        await fails_closed_instead(start, ws, bwrap_problem)
        return
    os.mkfifo(ws / "ready.fifo")
    os.mkfifo(ws / "go.fifo")
    command = "setsid sh -c 'echo ready > ready.fifo; exec sleep 765432.1' & read x < go.fifo; echo finished"
    results: list[ToolResult] = []
    async with start(sandbox="required") as ctx:

        async def go() -> None:
            results.append(await call(ctx, "bash", ws, command=command))

        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await read_fifo(ws / "ready.fifo")
            daemons = pids_with("765432.1")  # bwrap, its pid-1 helper, the shell and the daemon
            [daemon] = [pid for pid in daemons if argv_of(pid)[0] in ("sh", "sleep")]
            assert in_own_pid_namespace(daemon), "the command should run in the sandbox's pid namespace"
            pidfds = [os.pidfd_open(pid) for pid in daemons]  # held so the pids cannot be reused meanwhile
            await anyio.to_thread.run_sync(write_fifo, ws / "go.fifo")
    try:
        assert text(results[0]).startswith("finished\n")
        await wait_gone(daemons)
    finally:
        for fd in pidfds:
            os.close(fd)


def pids_with(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and is_alive(int(entry)):
            try:
                if marker in Path(f"/proc/{entry}/cmdline").read_text():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def write_fifo(path: Path) -> None:
    with open(path, "w") as fifo:
        fifo.write("go\n")


# ---------------------------------------------------------------------- failing closed


async def test_required_sandbox_without_bwrap_denies_commands(start: Start, ws: Path) -> None:
    """sandbox = 'required' with no bwrap: bash is denied, saying why and how to fix it; nothing runs."""
    async with start(sandbox="required", bwrap="/nonexistent/bwrap") as ctx:
        result = await call(ctx, "bash", ws, command="touch ran.txt")
        reads = await call(ctx, "list_dir", ws)
    assert result.error_code == "DENIED"
    assert text(result) == (
        "Error: the call to tool 'bash' was denied: the sandbox is required (plugins.permissions.sandbox = "
        "'required') but cannot guarantee: no capability inside (CapEff 0); no mount, even in the sandbox's own "
        "namespaces; only the system directories, the workspace and a private /tmp (no host socket, no secret "
        "path); no network; a cap on processes (max_processes); every process stopped when the command ends (its "
        "own pid namespace) (bubblewrap ('/nonexistent/bwrap') is not installed or not on PATH). Install "
        "bubblewrap 0.8 or later (Debian/Ubuntu: apt-get install bubblewrap) on a kernel that allows user "
        "namespaces (Linux 6.14 or later when dsh runs as root), or set sandbox = 'auto' to run commands with the "
        "confinement that works here. Do not repeat the same call; try another approach, or ask the user."
    )
    assert not (ws / "ran.txt").exists()
    assert not reads.is_error


async def test_required_sandbox_with_a_failing_bwrap_denies_commands(
    start: Start, ws: Path, tmp_path: Path
) -> None:
    """A bwrap that fails its probe (as where user namespaces are refused) is a denial quoting its error."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    async with start(sandbox="required", bwrap=str(fake)) as ctx:
        result = await call(ctx, "bash", ws, command="touch ran.txt")
        status = await ctx.sandbox.status()
    assert result.error_code == "DENIED"
    assert f"{fake} failed its probe (--unshare-user, --disable-userns" in text(result)
    assert "exit 1): bwrap: No permissions to create new namespace" in text(result)
    assert not status.available
    assert not (ws / "ran.txt").exists()


async def test_required_sandbox_refuses_in_wrap_too(start: Start, ws: Path) -> None:
    """The sandbox service itself refuses to hand out an unconfined command when one is required."""
    async with start(sandbox="required", bwrap="/nonexistent/bwrap") as ctx:
        execution = ToolExecution(call_id="c", name="bash", arguments="{}", agent_id="a1")
        with pytest.raises(SandboxUnavailableError, match="the sandbox is required"):
            await ctx.sandbox.wrap(["bash", "-c", "true"], cwd=str(ws), execution=execution)


async def test_auto_without_bwrap_runs_unconfined_and_warns_once(
    start: Start, ws: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """sandbox = 'auto' with no bwrap runs commands unconfined and logs one warning."""
    with caplog.at_level(logging.WARNING, logger="dsh.permissions"):
        async with start(sandbox="auto", bwrap="/nonexistent/bwrap") as ctx:
            first = await run(ctx, ws, "echo one")
            second = await run(ctx, ws, "echo two")
    assert text(first).startswith("one\n")
    assert text(second).startswith("two\n")
    warnings = [r.getMessage() for r in caplog.records if r.name == "dsh.permissions"]
    assert warnings == [
        "commands run without a sandbox: bubblewrap ('/nonexistent/bwrap') is not installed or not on PATH "
        "(plugins.permissions.sandbox = 'auto')"
    ]


async def test_sandbox_off_never_wraps(start: Start, ws: Path) -> None:
    """sandbox = 'off' hands commands back untouched in every mode."""
    async with start(sandbox="off") as ctx:
        for agent, mode in (("a", "read-only"), ("b", "workspace-write"), ("c", "full-access")):
            ctx.permissions.set_mode(agent, mode)
            execution = ToolExecution(call_id="c", name="bash", arguments="{}", agent_id=agent)
            assert await ctx.sandbox.wrap(["bash", "-c", "x"], cwd=str(ws), execution=execution) == [
                "bash",
                "-c",
                "x",
            ]


def test_confined_argv_mounts_the_workspace_after_tmp_and_hides_last(tmp_path: Path) -> None:
    """Private /tmp and home first, then read_only and the workspace, then the hidden paths; no network, no capability.

    A hidden path is mounted over where the command could see it (here, in the workspace), and
    only made, as an empty directory, where nothing of the host shows (a directory not mounted).
    """
    ws = tmp_path / "w"
    (ws / ".ssh").mkdir(parents=True)
    secret = ws / "secret.txt"
    secret.write_text("x")
    elsewhere = tmp_path / "keys"
    elsewhere.mkdir()
    hidden = [str(secret), str(ws / ".ssh"), str(elsewhere), str(tmp_path / "missing")]
    profile = Profile(bwrap="bwrap", process_cap="rlimit", helper=("prlimit",))
    argv = confined_argv(
        profile, ["bash", "-c", "ls"], cwd=str(ws), writable=True, max_processes=7, hidden=hidden,
        empty_file="/e", empty_dir="/e.d", home="/home/u", read_only=[str(tmp_path)],
    )  # fmt: skip
    assert argv[:10] == ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-user", "--disable-userns",
                         "--unshare-net", "--cap-drop", "ALL", "--die-with-parent", "--new-session"]  # fmt: skip
    tail = argv[argv.index("/proc") + 1 :]
    assert tail == [
        "--ro-bind", "/proc/sys", "/proc/sys", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/home/u",
        "--ro-bind", str(tmp_path), str(tmp_path), "--bind", str(ws), str(ws),
        "--ro-bind", "/e", str(secret), "--ro-bind", "/e.d", str(ws / ".ssh"), "--ro-bind", "/e.d", str(elsewhere),
        "--remount-ro", "/", "--chdir", str(ws), "--", "prlimit", "--nproc=8:8", "--", "bash", "-c", "ls",
    ]  # fmt: skip
    unmounted = confined_argv(
        profile, ["x"], cwd=str(ws), writable=True, max_processes=7, hidden=hidden, empty_file="/e",
        empty_dir="/e.d", home=None,
    )  # fmt: skip
    assert unmounted[unmounted.index(str(secret)) + 1 : unmounted.index("--remount-ro")] == [
        "--ro-bind", "/e.d", str(ws / ".ssh"), "--dir", str(elsewhere),
    ]  # fmt: skip
    read_only = confined_argv(
        profile, ["x"], cwd="/w", writable=False, max_processes=7, hidden=[], empty_file="/e", empty_dir="/e.d",
        home="/w/home",
    )  # fmt: skip
    assert read_only[read_only.index("/var/tmp") + 1 : read_only.index("/var/tmp") + 4] == ["--ro-bind", "/w", "/w"]


def test_confined_argv_as_root_caps_processes_with_pid_max() -> None:
    """As root, bwrap writes its pid namespace's pid_max (read from the descriptor it is handed) before the command starts."""
    profile = Profile(bwrap="bwrap", process_cap="pid-max")
    argv = confined_argv(
        profile, ["x"], cwd="/w", writable=True, max_processes=512, hidden=[], empty_file="/e", empty_dir="/e.d",
        home=None, pid_max_fd=7,
    )  # fmt: skip
    assert argv[:2] == ["bwrap", "--unshare-pid"]  # bwrap itself, no wrapper process
    at = argv.index("--file")
    assert argv[at : at + 3] == ["--file", "7", "/../oldroot/proc/sys/kernel/pid_max"]
    assert argv.index("--unshare-pid") < at  # the value belongs to the pid namespace of bwrap's init
    assert argv[argv.index("/proc/sys") - 1 : argv.index("/proc/sys") + 2] == ["--ro-bind", "/proc/sys", "/proc/sys"]
    assert "prlimit" not in argv
    assert argv[-2:] == ["--", "x"]
    with pytest.raises(ValueError, match="pid_max_fd"):
        confined_argv(profile, ["x"], cwd="/w", writable=True, max_processes=5, hidden=[], empty_file="/e",
                      empty_dir="/e.d", home=None)  # fmt: skip
    assert pid_max_for(5) == 301
    assert pid_max_for(350) == 352


def test_confined_argv_below_the_pid_max_floor_enters_a_pids_cgroup_first() -> None:
    """As root below what pid_max can hold, a shell enters the command's pids cgroup, then becomes bwrap."""
    profile = Profile(bwrap="bwrap", process_cap="cgroup")
    argv = confined_argv(
        profile, ["x"], cwd="/w", writable=True, max_processes=40, hidden=[], empty_file="/e", empty_dir="/e.d",
        home=None, cgroup_procs="/cg/c1/cgroup.procs",
    )  # fmt: skip
    assert argv[:6] == ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', "/cg/c1/cgroup.procs", "bwrap", "--unshare-pid"]
    assert "--file" not in argv
    assert "prlimit" not in argv
    assert argv[-2:] == ["--", "x"]
    with pytest.raises(ValueError, match="cgroup_procs"):
        confined_argv(profile, ["x"], cwd="/w", writable=True, max_processes=40, hidden=[], empty_file="/e",
                      empty_dir="/e.d", home=None)  # fmt: skip
    assert pids_max_for(40) == 42  # bwrap and its init are in the cgroup too


@pytest.fixture
def no_pids_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This host as one where no cgroup is mounted: the mount table the sandbox reads lacks them."""
    mountinfo = tmp_path / "mountinfo"
    lines = Path("/proc/self/mountinfo").read_text().splitlines(keepends=True)
    mountinfo.write_text("".join(line for line in lines if not line.partition(" - ")[2].startswith("cgroup")))
    monkeypatch.setattr(_cgroup, "MOUNTINFO", str(mountinfo))


async def test_required_refuses_at_start_a_max_processes_that_root_cannot_enforce(
    start: Start, no_pids_cgroup: None
) -> None:
    """As root, with no pids cgroup to be made, max_processes = 40 is below pid_max's floor: the harness does not start.

    The message names the floor and why it matters; 299, the least pid_max holds, starts. A
    normal user's cap is RLIMIT_NPROC, which holds any number: there the harness starts.
    """
    if os.geteuid() != 0:
        async with start(sandbox="required", max_processes=40) as ctx:
            assert ctx.sandbox.max_processes == 40
        return
    with pytest.raises(ConfigError) as raised:
        async with start(sandbox="required", max_processes=40):
            pytest.fail("the harness started")
    assert raised.value.path == "plugins.permissions.max_processes"
    message = str(raised.value)
    assert "plugins.permissions.max_processes = 40 cannot be enforced here: dsh runs as root, where RLIMIT_NPROC does not apply and " in message
    assert "301" in message, message
    assert (
        ", and no pids cgroup can be made for the commands (no cgroup hierarchy with the pids controller is mounted "
        "here). Set max_processes to 299 or more, run dsh as a normal user, or run it where it may make cgroups"
    ) in message
    async with start(sandbox="required", max_processes=299) as ctx:
        assert ctx.sandbox.max_processes == 299
    async with start(sandbox="off", max_processes=40) as ctx:
        assert ctx.sandbox.max_processes == 40


async def test_auto_warns_once_at_start_when_root_cannot_enforce_max_processes(
    start: Start, ws: Path, no_pids_cgroup: None, bwrap_problem: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """auto: one warning when the harness starts, naming the cap that holds instead (pid_max's 299); commands run."""
    with caplog.at_level(logging.WARNING, logger="dsh.permissions"):
        async with start(sandbox="auto", max_processes=40) as ctx:
            at_start = [r.getMessage() for r in caplog.records if r.name == "dsh.permissions"]
            first = await run(ctx, ws, "cat /proc/sys/kernel/pid_max")
            await run(ctx, ws, "true")
    warnings = [r.getMessage() for r in caplog.records if r.name == "dsh.permissions"]
    if os.geteuid() != 0:  # RLIMIT_NPROC holds 40
        assert at_start == []
        return
    assert len(at_start) == 1
    assert at_start[0].startswith("plugins.permissions.max_processes = 40 cannot be enforced here: dsh runs as root")
    if bwrap_problem is not None:  # then the sandbox's own warning: it cannot run at all
        assert len(warnings) == 2
        assert warnings[1].startswith("commands run without a sandbox")
        return
    assert at_start[0].endswith("; commands run with at most 299 processes (plugins.permissions.sandbox = 'auto')")
    assert warnings == at_start  # not warned again when the first command runs
    assert text(first).splitlines()[0] == "301"  # the cap that holds: pid_max at the kernel's floor


async def test_wrap_hands_the_pid_max_on_a_fresh_pipe_that_the_bash_call_closes(
    start: Start, ws: Path, bwrap_problem: str | None
) -> None:
    """As root, each confined command gets its own pipe holding the pid_max; the workspace closes it after the start.

    No descriptor is left open in the harness however many commands ran, and none reaches the
    command. (A normal user's cap is RLIMIT_NPROC, which needs no descriptor.)
    """
    if bwrap_problem is not None:
        await fails_closed_instead(start, ws, bwrap_problem)
        return
    as_root = os.geteuid() == 0
    async with start(sandbox="required") as ctx:
        execution = ToolExecution(call_id="c", name="bash", arguments="{}", agent_id="a1")
        first = await ctx.sandbox.wrap(["bash", "-c", "true"], cwd=str(ws), execution=execution)
        second = await ctx.sandbox.wrap(["bash", "-c", "true"], cwd=str(ws), execution=execution)
        assert isinstance(first, Confinement)
        assert isinstance(second, Confinement)
        assert isinstance(first, Confined)  # the workspace's shape
        try:
            assert len(first.pass_fds) == len(second.pass_fds) == (1 if as_root else 0)
            for fd in first.pass_fds:
                assert fd not in second.pass_fds
                assert not os.get_inheritable(fd)  # only the process it is passed to gets it
                assert first.argv[first.argv.index("--file") + 1] == str(fd)
                assert os.read(fd, 100) == b"514\n"
                assert os.read(fd, 100) == b""  # then end of file: the writing end is closed
        finally:
            for fd in (*first.pass_fds, *second.pass_fds):
                os.close(fd)
        await run(ctx, ws, "true")  # the probe has run
        before = sorted(os.listdir("/proc/self/fd"))
        for _ in range(3):
            await run(ctx, ws, "true")
        result = await run(ctx, ws, "cat /proc/sys/kernel/pid_max; ls /proc/self/fd")
        after = sorted(os.listdir("/proc/self/fd"))
    lines = text(result).splitlines()
    if as_root:
        assert lines[0] == "514"
    assert lines[1:5] == ["0", "1", "2", "3"]  # ls's own and the standard ones: the pipe did not reach the command
    assert lines[5].startswith("[exit code 0"), lines
    assert after == before


async def test_read_only_paths_show_even_below_the_private_home(
    start: Start, ws: Path, tmp_path: Path, bwrap_problem: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read_only_paths entry in the home directory (a toolchain in ~/.rustup) is readable, and read-only, inside."""
    if bwrap_problem is not None:
        await fails_closed_instead(start, ws, bwrap_problem)
        return
    home = tmp_path / "home"
    (home / ".tool").mkdir(parents=True)
    (home / ".tool" / "version").write_text("1.2.3\n")
    (home / "notes.txt").write_text("ordinary\n")
    monkeypatch.setenv("HOME", str(home))
    async with start(sandbox="required", read_only_paths=["~/.tool"]) as ctx:
        result = await run(
            ctx, ws, "cat ~/.tool/version; echo x > ~/.tool/version; echo write=$?; cat ~/notes.txt; echo home=$?"
        )
    output = text(result)
    assert output.startswith("1.2.3\n"), output
    assert "write=1" in output
    assert "home=1" in output  # the rest of the home directory is a private, empty one
    assert (home / ".tool" / "version").read_text() == "1.2.3\n"


async def test_status_is_probed_once(tmp_path: Path) -> None:
    """Concurrent first uses share one probe; the result is remembered."""
    counter = tmp_path / "count"
    fake = tmp_path / "bwrap"
    fake.write_text(f"#!/bin/sh\necho x >> {counter}\necho 'CapEff:\t0000000000000000'\necho 514\n")  # 514: the pid_max it was handed
    fake.chmod(0o755)
    sandbox = BwrapSandbox("required", str(fake), lambda agent: "workspace-write")
    results: list[SandboxStatus] = []
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(lambda: _append(results, sandbox))
    finally:
        sandbox.close()
    assert [status.available for status in results] == [True, True, True]
    assert counter.read_text() == "x\n"


async def _append(results: list[SandboxStatus], sandbox: BwrapSandbox) -> None:
    results.append(await sandbox.status())


def old_bwrap(tmp_path: Path) -> Path:
    """A bwrap that knows no --disable-userns (as bubblewrap before 0.8), and is the real one otherwise."""
    real = shutil.which("bwrap")
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do [ "$arg" = --disable-userns ] && { echo "bwrap: Unknown option --disable-userns" >&2; '
        "exit 1; }; done\n"
        f'exec {real} "$@"\n'
    )
    fake.chmod(0o755)
    return fake


async def test_required_names_the_missing_guarantee(
    start: Start, ws: Path, tmp_path: Path, bwrap_problem: str | None
) -> None:
    """A bwrap without --disable-userns: required refuses, naming 'no mount' and bwrap's complaint."""
    if bwrap_problem is not None:
        await fails_closed_instead(start, ws, bwrap_problem)
        return
    async with start(sandbox="required", bwrap=str(old_bwrap(tmp_path))) as ctx:
        result = await call(ctx, "bash", ws, command="touch ran.txt")
        status = await ctx.sandbox.status()
    assert result.error_code == "DENIED"
    assert "but cannot guarantee: no mount, even in the sandbox's own namespaces (" in text(result)
    assert "bwrap: Unknown option --disable-userns" in text(result)
    assert status.missing == ("mounts",)
    assert not (ws / "ran.txt").exists()


async def test_auto_runs_with_what_works_and_warns_once_naming_it(
    start: Start, ws: Path, tmp_path: Path, bwrap_problem: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """auto with a bwrap lacking --disable-userns still confines (CapEff 0, no network) and warns once."""
    if bwrap_problem is not None:
        await fails_closed_instead(start, ws, bwrap_problem)
        return
    with caplog.at_level(logging.WARNING, logger="dsh.permissions"):
        async with start(sandbox="auto", bwrap=str(old_bwrap(tmp_path))) as ctx:
            first = await run(ctx, ws, "grep CapEff /proc/self/status; tail -n +3 /proc/net/dev | wc -l")
            await run(ctx, ws, "true")
    assert "CapEff:\t0000000000000000\n1\n" in text(first)
    warnings = [r.getMessage() for r in caplog.records if r.name == "dsh.permissions"]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "commands run in a sandbox without: no mount, even in the sandbox's own namespaces; because"
    )


async def test_required_refuses_when_bwrap_did_not_set_pid_max(
    start: Start, ws: Path, tmp_path: Path, bwrap_problem: str | None
) -> None:
    """As root, a bwrap that drops --file (pid_max never written): the probe sees it, required names the process cap."""
    if os.geteuid() != 0:
        pytest.skip("the pid_max cap is root's; a normal user's cap is RLIMIT_NPROC")
    if bwrap_problem is not None:
        await fails_closed_instead(start, ws, bwrap_problem)
        return
    real = shutil.which("bwrap")
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/bash\n"
        "args=()\n"
        'while [ $# -gt 0 ]; do if [ "$1" = --file ]; then shift 3; else args+=("$1"); shift; fi; done\n'
        f'exec {real} "${{args[@]}}"\n'
    )
    fake.chmod(0o755)
    async with start(sandbox="required", bwrap=str(fake)) as ctx:
        result = await call(ctx, "bash", ws, command="touch ran.txt")
        status = await ctx.sandbox.status()
    assert result.error_code == "DENIED", text(result)
    assert "but cannot guarantee: a cap on processes (max_processes) (" in text(result)
    assert "did not set the sandbox's pid_max (it reads " in text(result)
    assert status.missing == ("processes",)
    assert not (ws / "ran.txt").exists()
