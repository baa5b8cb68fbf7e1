"""A pids cgroup per confined command: root's process cap where the pid namespace's pid_max cannot hold it.

As root, ``RLIMIT_NPROC`` never applies, and a pid namespace's ``pid_max`` goes no lower than 301
(the kernel's floor) and exists only from Linux 6.14 on. Below that, the cap is the ``pids``
controller: each command gets a cgroup of its own whose ``pids.max`` is the cap, made in a
directory the sandbox owns below the harness's own cgroup::

    <the harness's pids cgroup>/dsh-sandbox-<harness pid>-<random>/c<n>

The command line starts with ``sh``, which moves itself into the cgroup and then becomes bwrap
(``exec``), so bwrap and everything the command starts are counted from their first fork. The
cgroup of a command that has ended is removed when the next command is confined, and every one
when the sandbox closes; one left behind by a harness that died is removed by the next harness
that makes its directory there.

Where the host has no such cgroup (no ``pids`` hierarchy mounted, a read-only ``/sys/fs/cgroup``,
cgroup v2 where the controller is not enabled for the harness's cgroup and cannot be), ``open``
says why.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from typing import Final

__all__ = ["MOVE_AND_EXEC", "PidsCgroups"]

#: where this process's mounts and cgroups are read from
MOUNTINFO = "/proc/self/mountinfo"
CGROUPS = "/proc/self/cgroup"
#: the ``sh -c`` script that moves the shell into the cgroup whose ``cgroup.procs`` is ``$0``, then runs ``$@``
MOVE_AND_EXEC: Final = 'echo 0 > "$0" && exec "$@"'
_PREFIX: Final = "dsh-sandbox-"
_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes come octal-escaped."""
    return _OCTAL.sub(lambda found: chr(int(found.group(1), 8)), field)


def _own_pids_dir(mountinfo: str, cgroups: str) -> tuple[str, bool] | str:
    """The directory of this process's cgroup in a hierarchy with the pids controller, and whether it is v2.

    Or why there is none. ``mountinfo`` and ``cgroups`` are the text of ``/proc/self/mountinfo``
    and ``/proc/self/cgroup``.
    """
    memberships: dict[str, str] = {}  # controller ("" for v2) -> the process's cgroup path
    for line in cgroups.splitlines():
        _, controllers, member_of = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            memberships[controller] = member_of
    v2_dir = None
    for line in mountinfo.splitlines():
        fields, _, tail = line.partition(" - ")
        parts, kind = fields.split(), tail.split()
        if len(parts) < 5 or len(kind) < 3:
            continue
        root, mountpoint = _unescape(parts[3]), _unescape(parts[4])
        if kind[0] == "cgroup" and "pids" in kind[2].split(","):
            path = memberships.get("pids")
        elif kind[0] == "cgroup2":
            path = memberships.get("")
        else:
            continue
        if path is None or not (path == root or path.startswith(root.rstrip("/") + "/")):
            continue  # this mount does not show the process's cgroup
        directory = os.path.normpath(os.path.join(mountpoint, path[len(root) :].lstrip("/")))
        if kind[0] == "cgroup":
            return directory, False
        v2_dir = directory
    if v2_dir is None:
        return "no cgroup hierarchy with the pids controller is mounted here"
    try:
        with open(os.path.join(v2_dir, "cgroup.controllers")) as file:
            available = file.read().split()
    except OSError as exc:
        return f"cannot read {v2_dir}/cgroup.controllers ({exc.strerror or exc})"
    if "pids" not in available:
        return f"the pids controller is not available to the cgroup {v2_dir} (cgroup v2)"
    return v2_dir, True


def _enable_pids(directory: str) -> None:
    """Give ``directory``'s children the pids controller (cgroup v2), if they do not have it yet."""
    control = os.path.join(directory, "cgroup.subtree_control")
    with open(control) as file:
        if "pids" in file.read().split():
            return
    with open(control, "w") as file:
        file.write("+pids")


def _remove_stale(parent: str) -> None:
    """Remove the directories of sandboxes whose harness is gone (only empty cgroups can be removed)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            owner = entry.name.removeprefix(_PREFIX).partition("-")[0]
            if not entry.name.startswith(_PREFIX) or not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
                continue
            with contextlib.suppress(OSError):
                for child in os.scandir(entry.path):
                    if child.is_dir(follow_symlinks=False):
                        os.rmdir(child.path)
                os.rmdir(entry.path)


class PidsCgroups:
    """The sandbox's own pids cgroups: one per confined command, below one directory made by ``open``."""

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._made: list[str] = []
        self._count = 0

    @property
    def directory(self) -> str:
        return self._directory

    @classmethod
    def open(cls) -> PidsCgroups | str:
        """Make the sandbox's directory below this process's pids cgroup, or say why it cannot be made."""
        try:
            with open(MOUNTINFO) as file:
                mounts = file.read()
            with open(CGROUPS) as file:
                memberships = file.read()
        except OSError as exc:
            return f"cannot read this process's cgroups ({exc.strerror or exc})"
        found = _own_pids_dir(mounts, memberships)
        if isinstance(found, str):
            return found
        parent, v2 = found
        _remove_stale(parent)
        directory = None
        try:
            if v2:
                _enable_pids(parent)
            directory = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=parent)
            if v2:
                _enable_pids(directory)
            cgroups_here = cls(directory)
            probe = cgroups_here.new(1)
        except OSError as exc:
            if directory is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
            return f"cannot make a pids cgroup in {parent} ({exc.strerror or exc})"
        cgroups_here.sweep()
        if os.path.exists(os.path.dirname(probe)):
            cgroups_here.close()
            return f"cannot remove the pids cgroup {os.path.dirname(probe)} it made"
        return cgroups_here

    def new(self, limit: int) -> str:
        """A fresh cgroup whose ``pids.max`` is ``limit``: the path of its ``cgroup.procs``.

        :raises OSError: when the cgroup cannot be made or limited (it is removed again).
        """
        self.sweep()
        self._count += 1
        cgroup = os.path.join(self._directory, f"c{self._count}")
        os.mkdir(cgroup)
        try:
            # Never created: a directory without one is not a pids cgroup.
            limit_fd = os.open(os.path.join(cgroup, "pids.max"), os.O_WRONLY)
            try:
                os.write(limit_fd, str(limit).encode())
            finally:
                os.close(limit_fd)
        except BaseException:
            os.rmdir(cgroup)
            raise
        self._made.append(cgroup)
        return os.path.join(cgroup, "cgroup.procs")

    def sweep(self) -> None:
        """Remove the cgroups whose commands have ended (the kernel refuses to remove one that holds a process)."""
        kept = []
        for cgroup in self._made:
            try:
                os.rmdir(cgroup)
            except FileNotFoundError:
                pass
            except OSError:
                kept.append(cgroup)
        self._made = kept

    def close(self) -> None:
        """Remove every cgroup made, and the directory; those still holding a process stay. Idempotent."""
        self.sweep()
        if not self._made:
            with contextlib.suppress(OSError):
                os.rmdir(self._directory)
