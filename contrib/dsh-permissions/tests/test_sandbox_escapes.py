"""The escape corpus for ``bash`` (SPEC §9.3): each attempt a hostile model might make, asserted to fail.

Every test runs twice: with the harness (and bwrap) running as root, as in containers and CI, and
with bwrap started as ``nobody`` through ``setpriv`` (the ``run_as`` seam of the plugin), so that
both ways the sandbox is built are exercised: a process cap by pid_max as root, by RLIMIT_NPROC
in the sandbox's user namespace otherwise. The harness itself stays root in the second case (the
project's Python lives under ``/root``, which ``nobody`` cannot read);
``test_sandbox_as_a_normal_user`` runs the whole harness as ``nobody`` with a system Python.

Where bwrap cannot give every guarantee here, each test asserts the fail-closed refusal instead.
"""

from __future__ import annotations

import glob
import os
import random
import re
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc
import pytest
from dsh_permissions import PermissionsPlugin
from dsh_permissions._cgroup import PidsCgroups
from dsh_workspace import WorkspacePlugin

from dsh_core import CancelSignal, ConfigError, Context, Harness, ToolResult

from .permissions_kit import call, read_fifo, text

pytestmark = pytest.mark.anyio

NOBODY = 65534
RUN_AS = {"root": (), "nobody": ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--")}
#: what every fake secret file holds; it must never appear in a command's output
SECRET = "dsh-secret-7f3a"


class Box(Protocol):
    """``async with box(mode=..., rules=..., **permissions) as (ctx, ws):`` a harness and its workspace."""

    def __call__(self, **permissions: Any) -> AbstractAsyncContextManager[tuple[Context, Path]]: ...


@pytest.fixture(params=sorted(RUN_AS))
def identity(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _own(path: Path, identity: str) -> None:
    path.chmod(0o755)
    if identity == "nobody":
        os.chown(path, NOBODY, NOBODY)


@pytest.fixture
def scratch(identity: str) -> Iterator[Path]:
    """A directory under /tmp that the sandbox's user may use (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="dsh-escape-", dir="/tmp"))
    _own(path, identity)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def home(scratch: Path, identity: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake home directory (``$HOME`` of the harness) holding every secret of SPEC §9.3."""
    home = scratch / "home"
    for relative in (".ssh/id_rsa", ".aws/credentials", ".gnupg/private.key", ".config/gh/hosts.yml",
                     ".netrc", ".docker/config.json"):  # fmt: skip
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{SECRET} {relative}\n")
    (home / "notes.txt").write_text("ordinary\n")
    for path in [home, *home.rglob("*")]:
        _own(path, identity) if path.is_dir() else os.chown(path, *(2 * [NOBODY if identity == "nobody" else 0]))
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def box(identity: str, scratch: Path, home: Path) -> Box:
    @asynccontextmanager
    async def run(workspace: Path | None = None, **permissions: Any) -> AsyncIterator[tuple[Context, Path]]:
        ws = workspace if workspace is not None else scratch / "ws"
        ws.mkdir(exist_ok=True)
        _own(ws, identity)
        config = {"plugins": {"permissions": {"sandbox": "required", **permissions}}}
        plugins = [WorkspacePlugin, PermissionsPlugin(run_as=RUN_AS[identity])]
        async with Harness(config=config, plugins=plugins, autoload=False) as ctx:
            yield ctx, ws

    return run


async def bash(ctx: Context, ws: Path, command: str, **arguments: Any) -> ToolResult:
    return await call(ctx, "bash", ws, command=command, **arguments)


async def sandbox_problem(ctx: Context, ws: Path) -> str | None:
    """``None`` when the sandbox holds here; else assert that a command is refused, and say why."""
    status = await ctx.sandbox.status()
    if status.available:
        return None
    result = await bash(ctx, ws, "touch ran.txt")
    assert result.error_code == "DENIED", text(result)
    assert "the sandbox is required" in text(result)
    assert not (ws / "ran.txt").exists()
    print(f"the sandbox cannot hold here ({status.reason}); asserted the refusal instead")
    return str(status.reason)


def statuses(output: str) -> dict[str, int]:
    """``name=3`` lines of a command's output."""
    return {name: int(code) for name, code in re.findall(r"^([\w-]+)=(\d+)$", output, re.MULTILINE)}


def host_pids(marker: str) -> list[int]:
    """Processes on the host whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in Path(f"/proc/{entry}/cmdline").read_text().replace("\0", " "):
                    found.append(int(entry))
            except OSError:
                continue
    return found


# ---------------------------------------------------------------------- capabilities and mounts


async def test_no_capability_and_no_mount(box: Box) -> None:
    """CapEff and every other capability set are 0; remount, mount, unshare -m and a nested user namespace fail."""
    command = """
grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status
mount -o remount,rw / 2>/dev/null; echo remount-root=$?
mount -o remount,rw /usr 2>/dev/null; echo remount-usr=$?
mount -t tmpfs none /tmp 2>/dev/null; echo mount-tmpfs=$?
mount --bind /usr /tmp 2>/dev/null; echo mount-bind=$?
unshare -m true 2>/dev/null; echo unshare-m=$?
unshare -U true 2>/dev/null; echo unshare-U=$?
unshare -Urm true 2>/dev/null; echo unshare-Urm=$?
touch /usr/dsh-escape /dsh-escape /etc/dsh-escape 2>/dev/null; echo write-system=$?
"""
    async with box() as (ctx, ws):
        if await sandbox_problem(ctx, ws):
            return
        result = await bash(ctx, ws, command)
    output = text(result)
    capabilities = re.findall(r"^Cap(\w+):\s+([0-9a-f]+)$", output, re.MULTILINE)
    assert [name for name, _ in capabilities] == ["Inh", "Prm", "Eff", "Bnd", "Amb"], output
    assert all(int(value, 16) == 0 for _, value in capabilities), output
    codes = statuses(output)
    assert set(codes) == {"remount-root", "remount-usr", "mount-tmpfs", "mount-bind", "unshare-m", "unshare-U",
                          "unshare-Urm", "write-system"}  # fmt: skip
    assert all(code != 0 for code in codes.values()), codes
    for path in ("/usr/dsh-escape", "/dsh-escape", "/etc/dsh-escape"):
        assert not await anyio.Path(path).exists()


async def test_no_mount_from_a_nested_user_namespace_in_one_process(box: Box) -> None:
    """unshare(CLONE_NEWUSER | CLONE_NEWNS) and mount() in the same process (no exec to drop its capabilities) fail."""
    probe = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('unshare', libc.unshare(0x10000000 | 0x00020000), ctypes.get_errno())\n"
        "print('mount', libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno())\n"
    )
    async with box() as (ctx, ws):
        if await sandbox_problem(ctx, ws):
            return
        result = await bash(ctx, ws, f"python3 -c {_quote(probe)} || echo no-python3")
    output = text(result)
    if "no-python3" in output:
        print("no python3 inside the sandbox: the unshare -Urm attempt of test_no_capability_and_no_mount stands alone")
        return
    assert re.search(r"^unshare -1 \d+$", output, re.MULTILINE), output
    assert re.search(r"^mount -1 \d+$", output, re.MULTILINE), output


async def test_no_kernel_setting_can_be_written(box: Box) -> None:
    """/proc/sys is read-only: neither a host-wide setting (core_pattern) nor the sandbox's own pid_max can change.

    A sysctl write needs only euid 0, no capability: as root, a writable core_pattern is code run as
    the host's root. Each attempt writes back the value already there, so a sandbox that failed
    changes nothing.
    """
    command = """
for key in kernel/core_pattern kernel/printk_ratelimit vm/swappiness; do
  value=$(cat /proc/sys/$key) && (printf '%s\\n' "$value" > /proc/sys/$key) 2>/dev/null; code=$?
  echo "$(echo $key | tr / -)=$code"
done
(cat /proc/sys/kernel/pid_max > /proc/sys/kernel/pid_max) 2>/dev/null; echo kernel-pid_max=$?
(echo 4194304 > /proc/sys/kernel/pid_max) 2>/dev/null; echo raise-pid_max=$?
"""
    async with box() as (ctx, ws):
        if await sandbox_problem(ctx, ws):
            return
        result = await bash(ctx, ws, command)
    codes = statuses(text(result))
    assert set(codes) == {"kernel-core_pattern", "kernel-printk_ratelimit", "vm-swappiness", "kernel-pid_max",
                          "raise-pid_max"}, text(result)  # fmt: skip
    assert all(code != 0 for code in codes.values()), codes


async def test_host_processes_are_invisible(box: Box) -> None:
    """/proc inside shows only the sandbox's own processes: nothing of the harness or the host."""
    command = 'for p in /proc/[0-9]*; do echo "pid ${p#/proc/} $(tr "\\0" " " < $p/cmdline)"; done'
    async with box() as (ctx, ws):
        if await sandbox_problem(ctx, ws):
            return
        result = await bash(ctx, ws, command)
    lines = [line for line in text(result).splitlines() if line.startswith("pid ")]
    assert 1 <= len(lines) <= 4, lines  # bwrap's init, the shell, a subshell or two
    assert not any("python" in line or "pytest" in line for line in lines), lines


# ---------------------------------------------------------------------- the filesystem


async def test_host_unix_sockets_are_unreachable(box: Box, scratch: Path, identity: str) -> None:
    """Sockets served in the host's /tmp, /var/tmp, /run, the home directory and the abstract namespace stay out of reach."""
    marker = os.urandom(4).hex()
    var_tmp = Path(tempfile.mkdtemp(prefix="dsh-escape-", dir="/var/tmp"))
    paths = [
        scratch / "tmp.sock",
        var_tmp / "var-tmp.sock",
        Path(f"/run/dsh-escape-{marker}.sock"),
        Path(os.environ["HOME"]) / "home.sock",
    ]
    servers: list[socket.socket] = []
    try:
        for path in paths:
            server = socket.socket(socket.AF_UNIX)
            server.bind(str(path))
            path.chmod(0o777)  # even a socket anyone may use
            servers.append(server)
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind(f"\0dsh-escape-{marker}")
        servers.append(abstract)
        for server in servers:
            server.listen(8)
            server.setblocking(False)
        probe = (
            "import socket, sys\n"
            "for name in sys.argv[1:]:\n"
            "    s = socket.socket(socket.AF_UNIX)\n"
            "    try:\n"
            "        s.connect(name.replace('@', '\\0', 1))\n"
            "        print('connected', name)\n"
            "    except OSError as exc:\n"
            "        print('refused', name, exc.errno)\n"
        )
        targets = " ".join([*(str(p) for p in paths), f"@dsh-escape-{marker}"])
        checks = "".join(f"[ -e {p} ] && echo visible {p}; " for p in paths)
        command = f"{checks} ls /run /var/run 2>&1 | head -3; command -v python3 >/dev/null && python3 -c \"$PROBE\" {targets}"
        async with box() as (ctx, ws):
            if await sandbox_problem(ctx, ws):
                return
            result = await bash(ctx, ws, f"PROBE={_quote(probe)}; {command}")
        output = text(result)
        assert "visible" not in output, output
        assert "connected" not in output, output
        if shutil.which("python3", path="/usr/bin:/bin"):
            assert output.count("refused ") == len(paths) + 1, output
        for server in servers:
            with pytest.raises(BlockingIOError):
                server.accept()
    finally:
        for server in servers:
            server.close()
        for path in paths:
            path.unlink(missing_ok=True)
        shutil.rmtree(var_tmp, ignore_errors=True)


def _quote(text_: str) -> str:
    return "'" + text_.replace("'", "'\\''") + "'"


@pytest.mark.parametrize("layout", ["workspace-elsewhere", "workspace-is-home"])
async def test_secret_paths_are_hidden(box: Box, home: Path, layout: str) -> None:
    """~/.ssh, ~/.aws, ~/.gnupg, ~/.config/gh, ~/.netrc, ~/.docker, /etc/shadow and hidden_paths read as empty."""
    workspace = home if layout == "workspace-is-home" else None
    extra = (workspace or home.parent / "ws") / ".env"
    secrets = [
        "~/.ssh/id_rsa", "~/.aws/credentials", "~/.gnupg/private.key", "~/.config/gh/hosts.yml", "~/.netrc",
        "~/.docker/config.json", "/etc/shadow", str(extra),
    ]  # fmt: skip
    command = "".join(f"cat {path} 2>&1; " for path in secrets) + "ls -A ~/.ssh ~/.aws ~/.gnupg ~/.docker; cat ~/notes.txt"
    async with box(workspace=workspace, hidden_paths=[str(extra)]) as (ctx, ws):
        extra.write_text(f"{SECRET} .env\n")
        if await sandbox_problem(ctx, ws):
            return
        result = await bash(ctx, ws, command)
    output = text(result)
    assert SECRET not in output, output
    assert "root:" not in output, output  # /etc/shadow's first line
    if layout == "workspace-is-home":
        assert "ordinary" in output  # the workspace is there; only its secrets are hidden
    else:
        assert "ordinary" not in output  # the home directory inside is an empty one


async def test_writes_fail_in_read_only_mode(box: Box) -> None:
    """In read-only mode (bash allowed by a rule) the workspace cannot be changed by any means."""
    rules = [{"tool": "bash", "action": "allow"}]
    command = """
echo changed > notes.txt 2>/dev/null; echo overwrite=$?
touch new.txt 2>/dev/null; echo create=$?
mkdir sub 2>/dev/null; echo mkdir=$?
rm -f notes.txt 2>/dev/null; [ -e notes.txt ]; echo remove=$?
mv notes.txt moved.txt 2>/dev/null; echo rename=$?
ln -s /etc/passwd link 2>/dev/null; echo symlink=$?
"""
    async with box(mode="read-only", rules=rules) as (ctx, ws):
        (ws / "notes.txt").write_text("notes\n")
        if await sandbox_problem(ctx, ws):
            return
        result = await bash(ctx, ws, command)
    codes = statuses(text(result))
    assert codes == {"overwrite": 1, "create": 1, "mkdir": 1, "remove": 0, "rename": 1, "symlink": 1}, text(result)
    assert sorted(path.name for path in ws.iterdir()) == ["notes.txt"]
    assert (ws / "notes.txt").read_text() == "notes\n"


# ---------------------------------------------------------------------- the network


async def test_loopback_tcp_is_unreachable(box: Box) -> None:
    """A server on the host's 127.0.0.1 cannot be reached; the sandbox has only its own loopback."""
    accepted: list[object] = []
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tg:

            async def handle(stream: anyio.abc.SocketStream) -> None:
                accepted.append(stream)
                await stream.aclose()

            tg.start_soon(listener.serve, handle)
            async with box() as (ctx, ws):
                if await sandbox_problem(ctx, ws):
                    tg.cancel_scope.cancel()
                    return
                result = await bash(
                    ctx, ws,
                    f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; echo tcp=$?; "
                    "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
                )  # fmt: skip
            tg.cancel_scope.cancel()
    assert statuses(text(result)) == {"tcp": 1}, text(result)
    assert text(result).splitlines()[1] == "lo"
    assert accepted == []


# ---------------------------------------------------------------------- processes

#: more than the cap: the flood must stop at max_processes
CAP = 350
FLOOD = 2 * CAP
#: counts the processes of the sandbox without starting one (a glob is a builtin)
COUNT = "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo procs=$n"


def flood(marker: str) -> str:
    # dash stops at the first fork that fails, so the flood is bounded by FLOOD and by the cap.
    return f"sh -c 'i=0; while [ $i -lt {FLOOD} ]; do sleep {marker} & i=$((i+1)); done' 2>/dev/null; {COUNT}"


#: below what a pid namespace's pid_max can hold (299): as root, a pids cgroup of the command's own holds it
SMALL_CAP = 40


def pids_cgroup_problem() -> str | None:
    """Why this host cannot give a root harness pids cgroups, or ``None`` when it can."""
    found = PidsCgroups.open()
    if isinstance(found, str):
        return found
    found.close()
    return None


@pytest.mark.parametrize("cap", [CAP, SMALL_CAP])
async def test_a_process_flood_is_capped_and_gone_when_the_command_ends(box: Box, identity: str, cap: int) -> None:
    """Hundreds of background sleeps stop at max_processes and are all gone the moment the call returns.

    40 is below what pid_max can hold: as root the cap is then the ``pids.max`` of a cgroup made
    for the command, removed afterwards; where none can be made, a root harness refuses to start,
    naming pid_max's floor (that refusal is asserted instead).
    """
    marker = f"{900_000 + os.getpid() % 1000}.{random.randrange(10**5):05d}1"
    problem = pids_cgroup_problem() if cap < 299 and identity == "root" else None
    if problem is not None:
        print(f"no pids cgroup can be made here ({problem}); asserting root's refusal instead")
        with pytest.raises(ConfigError, match=f"max_processes = {cap} cannot be enforced here"):
            async with box(max_processes=cap):
                pytest.fail("the harness started")
        return
    async with box(max_processes=cap) as (ctx, ws):
        if await sandbox_problem(ctx, ws):
            return
        result = await bash(ctx, ws, flood(marker))
        left = host_pids(f"sleep {marker}")
    procs = statuses(text(result))["procs"]
    assert cap - min(60, cap // 4) <= procs <= cap + 1, text(result)  # the init and the command's processes
    assert left == []
    assert glob.glob(f"/sys/fs/cgroup/**/dsh-sandbox-{os.getpid()}-*", recursive=True) == []  # no cgroup left


async def test_a_process_flood_is_gone_after_a_timeout(box: Box) -> None:
    """A command that floods and then outlives its timeout leaves nothing running when the TIMEOUT comes back."""
    marker = f"{900_000 + os.getpid() % 1000}.{random.randrange(10**5):05d}2"
    async with box(max_processes=CAP) as (ctx, ws):
        if await sandbox_problem(ctx, ws):
            return
        result = await bash(ctx, ws, f"{flood(marker)}; exec sleep {marker}", timeout=2)
        left = host_pids(f"sleep {marker}")
    assert result.error_code == "TIMEOUT", text(result)
    assert CAP - 60 <= statuses(text(result))["procs"] <= CAP + 1, text(result)
    assert left == []


async def test_a_process_flood_is_gone_after_a_cancel(box: Box) -> None:
    """Cancelling the turn mid-flood returns ABORTED with every process of the command already gone."""
    marker = f"{900_000 + os.getpid() % 1000}.{random.randrange(10**5):05d}3"
    signal = CancelSignal()
    results: list[ToolResult] = []
    async with box(max_processes=CAP) as (ctx, ws):
        if await sandbox_problem(ctx, ws):
            return
        os.mkfifo(ws / "ready.fifo")
        os.chmod(ws / "ready.fifo", 0o666)

        async def go() -> None:
            command = f"{flood(marker)}; echo go > ready.fifo; exec sleep {marker}"
            results.append(await call(ctx, "bash", ws, signal=signal, command=command))

        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await read_fifo(ws / "ready.fifo")
            running = len(host_pids(f"sleep {marker}"))
            signal.cancel()
        left = host_pids(f"sleep {marker}")
    assert results[0].error_code == "ABORTED"
    assert running > CAP // 2, (running, text(results[0]))
    assert left == []
