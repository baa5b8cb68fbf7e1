"""The bubblewrap command line: what a confined command sees, and what holds it in.

``confined_argv`` is pure: the probe (``_sandbox``) decides which of bubblewrap's features work
here (a ``Profile``), and this module turns a command into the argv that runs it so::

    bwrap --unshare-pid --unshare-ipc --unshare-user --disable-userns --unshare-net
          --cap-drop ALL --die-with-parent --new-session
          --ro-bind /usr /usr  --symlink usr/bin /bin ...  --ro-bind /etc /etc ...   system, read-only
          --dev /dev --proc /proc --ro-bind /proc/sys /proc/sys                      its own
          --tmpfs /tmp --tmpfs /var/tmp [--tmpfs $HOME]
          [--file FD /../oldroot/proc/sys/kernel/pid_max]                            (root)
          --bind <workspace> <workspace>             (read-only mode: --ro-bind)
          --ro-bind <empty file> /etc/shadow  --ro-bind <empty dir> /etc/ssl/private ...  hidden paths
          --remount-ro / --chdir <workspace>
          -- [prlimit --nproc=N+1:N+1 --] <argv>                                  (not root)

or, as root where pid_max cannot hold the cap, preceded by ``/bin/sh -c 'echo 0 > "$0" && exec "$@"'
<cgroup.procs>``: the command's own pids cgroup (``_cgroup``), entered before bwrap starts.

Nothing else of the host is mounted: ``/run``, ``/var/run``, the host's ``/tmp`` and
``/var/tmp`` and home directories (where Unix sockets live) do not exist inside.

As root the process cap is the pid namespace's own ``pid_max`` (RLIMIT_NPROC never limits uid
0), or, below the kernel's floor for it (``PID_MAX_FLOOR``) or before Linux 6.14, the
``pids.max`` of a cgroup made for the command. bwrap writes the pid_max while it sets the sandbox
up, before the command starts: ``--file FD`` copies the number from a pipe that the sandbox filled
and hands to bwrap as descriptor ``FD`` (the workspace passes it on: ``Confinement.pass_fds``)
into ``pid_max``, reached through the host's ``/proc`` that bwrap still holds at ``/oldroot``
then; the value belongs to the pid namespace of the writer, bwrap's init. ``/proc/sys`` is
read-only inside, so the command cannot raise it again
(nor change any other kernel setting: a sysctl write needs only euid 0, no capability).

Each mount costs bwrap a read of the whole mount table, so a hidden path is mounted over only
where the command could see it (below the workspace or a mounted host directory). Elsewhere (a
private home, or a directory that is not mounted at all) nothing of the host is there, and an
empty directory is made in its place without a mount (``--dir``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from typing import Final, Literal, TypeAlias

import attrs

from ._cgroup import MOVE_AND_EXEC

__all__ = [
    "DEFAULT_HIDDEN",
    "GUARANTEES",
    "PID_MAX_FLOOR",
    "PID_MAX_LEAST_CAP",
    "SYSTEM_DIRS",
    "Guarantee",
    "Profile",
    "confined_argv",
    "hidden_paths",
    "pid_max_for",
    "pids_max_for",
    "system_mounts",
]

#: The guarantees of SPEC §9.3, each named by what it keeps from the command.
Guarantee: TypeAlias = Literal["capabilities", "mounts", "filesystem", "network", "processes", "teardown"]

#: What each guarantee means, for messages and docs.
GUARANTEES: Final[dict[Guarantee, str]] = {
    "capabilities": "no capability inside (CapEff 0)",
    "mounts": "no mount, even in the sandbox's own namespaces",
    "filesystem": "only the system directories, the workspace and a private /tmp (no host socket, no secret path)",
    "network": "no network",
    "processes": "a cap on processes (max_processes)",
    "teardown": "every process stopped when the command ends (its own pid namespace)",
}

#: Read-only system directories a command may need (those present on the host are mounted).
#: (Not /sys: binding it costs more than the rest of the sandbox, for commands that rarely need it.)
SYSTEM_DIRS: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix")
#: Paths hidden from every confined command (SPEC §9.3), ``~`` the harness's home; then the config's.
DEFAULT_HIDDEN: Final = (
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.config/gh",
    "~/.netrc",
    "~/.docker",
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssl/private",
)
#: The smallest pid_max the kernel accepts for a pid namespace.
PID_MAX_FLOOR: Final = 301
#: pid_max leaves room for the command's processes and pid 0 (never handed out) and bwrap's init (pid 1).
_PID_MAX_OVERHEAD: Final = 2
#: the fewest processes a pid_max can hold a command to: the floor, less pid 0 and bwrap's init
PID_MAX_LEAST_CAP: Final = PID_MAX_FLOOR - _PID_MAX_OVERHEAD
#: a command's cgroup also holds bwrap and its init (pid 1 of the sandbox)
_CGROUP_OVERHEAD: Final = 2
#: where bwrap, while it sets the sandbox up, sees the host's /proc (a path below its new root)
_PID_MAX_PATH: Final = "/../oldroot/proc/sys/kernel/pid_max"


@attrs.frozen(kw_only=True)
class Profile:
    """Which bubblewrap features work here, as the probe found them, and the helper they need."""

    bwrap: str
    #: a user namespace of its own (``--unshare-user``)
    user_namespace: bool = True
    #: no nested user namespace (``--disable-userns``, bubblewrap 0.8)
    disable_userns: bool = True
    #: how ``max_processes`` is enforced: RLIMIT_NPROC counted in the sandbox's user namespace
    #: (not root), the pid namespace's pid_max (root: RLIMIT_NPROC never limits uid 0), a pids
    #: cgroup of the command's own (root, where pid_max cannot hold the cap), or not at all
    process_cap: Literal["rlimit", "pid-max", "cgroup"] | None = "rlimit"
    #: ``prlimit``'s absolute path (rlimit)
    helper: tuple[str, ...] = ()

    def missing(self) -> tuple[Guarantee, ...]:
        """The guarantees this profile does not give."""
        out: list[Guarantee] = []
        if not (self.user_namespace and self.disable_userns):
            out.append("mounts")
        if self.process_cap is None:
            out.append("processes")
        return tuple(out)


def pid_max_for(max_processes: int) -> int:
    """The pid_max that lets a command run ``max_processes`` processes at once (never below the kernel's floor)."""
    return max(max_processes + _PID_MAX_OVERHEAD, PID_MAX_FLOOR)


def pids_max_for(max_processes: int) -> int:
    """The ``pids.max`` of a command's cgroup: its processes, bwrap's init and bwrap itself."""
    return max_processes + _CGROUP_OVERHEAD


def hidden_paths(extra: Iterable[str], home: str) -> tuple[str, ...]:
    """The default hidden paths and ``extra``, ``~`` expanded to ``home``, normalised, without duplicates."""
    out: dict[str, None] = {}
    for path in (*DEFAULT_HIDDEN, *extra):
        if path == "~" or path.startswith("~/"):
            path = home + path[1:]
        out[os.path.normpath(path)] = None
    return tuple(out)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def system_mounts() -> tuple[str, ...]:
    """The bwrap arguments that show the system directories present here, read-only.

    They depend only on the host's layout, so a sandbox computes them once (``confined_argv``'s
    ``system``); the hidden paths, which the user may create at any time, are looked at per command.
    """
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]  # merged /usr: /bin -> usr/bin
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    return tuple(args)


def _hidden_mounts(hidden: Sequence[str], shown: Sequence[str], empty_file: str, empty_dir: str) -> list[str]:
    """An empty file or directory in place of each hidden path that exists on the host.

    Mounted over only where the command could see the host's (below, or above, a directory in
    ``shown``); elsewhere nothing of the host is there, and a directory is just made (no mount).
    """
    args: list[str] = []
    for path in hidden:
        try:
            mode = os.lstat(path).st_mode
        except OSError:  # missing: nothing to hide
            continue
        if stat.S_ISLNK(mode):
            try:
                mode = os.stat(path).st_mode  # where it leads decides
            except OSError:  # dangling: an empty file in its place
                mode = stat.S_IFREG
        if not stat.S_ISDIR(mode):
            args += ["--ro-bind", empty_file, path]
        elif any(_within(path, root) or _within(root, path) for root in shown):
            args += ["--ro-bind", empty_dir, path]
        else:
            args += ["--dir", path]
    return args


def confined_argv(
    profile: Profile,
    argv: Sequence[str],
    *,
    cwd: str,
    writable: bool,
    max_processes: int,
    hidden: Sequence[str],
    empty_file: str,
    empty_dir: str,
    home: str | None,
    read_only: Sequence[str] = (),
    system: Sequence[str] | None = None,
    network: bool = False,
    pid_max_fd: int | None = None,
    cgroup_procs: str | None = None,
) -> list[str]:
    """``argv`` run in ``cwd`` (the workspace, writable when ``writable``) inside the sandbox ``profile`` allows.

    ``system`` is ``system_mounts()`` computed earlier; ``None`` computes it now. ``read_only``
    directories (those present) are shown read-only, after the private ``/tmp`` and home, so that
    they may lie there (``~/.rustup``).
    ``pid_max_fd`` (the pid-max cap) is a descriptor bwrap inherits, holding ``pid_max_for(max_processes)``.
    ``cgroup_procs`` (the cgroup cap) is the ``cgroup.procs`` of the command's pids cgroup.
    ``empty_file`` and ``empty_dir`` are what a hidden file or directory shows inside.
    """
    command = list(argv)
    if profile.process_cap == "rlimit":
        # Counted per (user namespace, uid): the limit covers the sandbox's init and the command's processes.
        (prlimit,) = profile.helper
        command = [prlimit, f"--nproc={max_processes + 1}:{max_processes + 1}", "--", *command]
    elif profile.process_cap == "pid-max" and pid_max_fd is None:
        msg = "the pid-max process cap needs the descriptor that hands bwrap the pid_max (pid_max_fd)"
        raise ValueError(msg)
    elif profile.process_cap == "cgroup" and cgroup_procs is None:
        msg = "the cgroup process cap needs the cgroup.procs of the command's cgroup (cgroup_procs)"
        raise ValueError(msg)
    # The namespaces that keep something from the command: not cgroup (slow to make; /sys is not
    # mounted) nor UTS (without a capability the hostname cannot be changed anyway).
    args = [profile.bwrap, "--unshare-pid", "--unshare-ipc"]
    if profile.user_namespace:
        args.append("--unshare-user")
        if profile.disable_userns:
            args.append("--disable-userns")
    if not network:
        args.append("--unshare-net")
    args += ["--cap-drop", "ALL", "--die-with-parent", "--new-session"]
    args += system_mounts() if system is None else system
    # /proc/sys read-only (bwrap leaves it writable): as root, a command could otherwise change
    # host-wide kernel settings (core_pattern runs a program as the host's root) and its pid_max.
    # The bind's source is the host's /proc/sys; what a read shows follows the reader's namespaces.
    args += ["--dev", "/dev", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
    args += ["--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
    if profile.process_cap == "pid-max":
        args += ["--file", str(pid_max_fd), _PID_MAX_PATH]
    # The home directory is an empty one of its own, unless the workspace shows it (then the hidden
    # paths below cover its secrets). Mounted before the workspace, which may lie inside it.
    if home and home != "/" and not _within(home, cwd) and not any(_within(home, d) for d in SYSTEM_DIRS):
        args += ["--tmpfs", home]
    # The workspace and read_only come after the tmpfs mounts, so that they may lie below /tmp or ~.
    for path in read_only:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    args += ["--bind" if writable else "--ro-bind", cwd, cwd]
    args += _hidden_mounts(hidden, (*SYSTEM_DIRS, *read_only, cwd), empty_file, empty_dir)
    # bwrap's own root (a tmpfs holding the mount points) becomes read-only; the mounts keep theirs.
    args += ["--remount-ro", "/", "--chdir", cwd, "--", *command]
    if profile.process_cap == "cgroup":
        # The shell enters the cgroup, then becomes bwrap: nothing of the command runs outside it.
        return ["/bin/sh", "-c", MOVE_AND_EXEC, str(cgroup_procs), *args]
    return args
