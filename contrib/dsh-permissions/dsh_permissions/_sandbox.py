"""The bubblewrap process sandbox: the ``sandbox`` service that confines ``bash`` commands (SPEC §9.3).

In the read-only and workspace-write modes a command runs in bubblewrap as ``_confine`` lays it
out: no capability, no mount, only the system directories (read-only), the workspace (read-only
in read-only mode) and a private ``/tmp``, secret paths hidden, no network, at most
``max_processes`` processes, and its own pid namespace, which the workspace's teardown empties
(``dsh_workspace``: it kills the namespace's init and waits for bwrap, which exits only after).
In full-access mode, or with ``sandbox = "off"``, commands run unconfined.

What works here is probed once, by running ``cat /proc/self/status`` confined with every feature
and then with fewer (bubblewrap may be missing or old, the kernel may refuse user namespaces or
be too old for a pid_max per namespace); the probe checks inside that ``CapEff`` is 0 and, as
root, that ``pid_max`` is the one bwrap was handed, or that the command is in its pids cgroup.
As root, a ``max_processes`` below what pid_max can hold (299) needs that cgroup (``_cgroup``);
where none can be made, the setting is refused when the plugin starts (``required``), or one
warning says so (``auto``). With
``sandbox = "required"`` a command is refused unless every guarantee holds, with a message naming
the missing ones; with ``auto`` it runs with what works (unconfined when nothing does) and one
warning names what is missing.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread
import attrs

from dsh_core import ConfigError

from ._cgroup import PidsCgroups
from ._config import Mode, SandboxSetting
from ._confine import (
    GUARANTEES,
    PID_MAX_FLOOR,
    PID_MAX_LEAST_CAP,
    Guarantee,
    Profile,
    confined_argv,
    hidden_paths,
    pid_max_for,
    pids_max_for,
    system_mounts,
)

if TYPE_CHECKING:
    from dsh_core import ToolExecution

__all__ = ["BwrapSandbox", "Confinement", "SandboxStatus", "SandboxUnavailableError"]

logger = logging.getLogger("dsh.permissions")

#: seconds each probe run may take
_PROBE_LIMIT: Final = 10.0
#: bytes of bwrap's complaint kept for the message
_MAX_DETAIL: Final = 300
#: the first kernel whose pid namespaces each carry their own pid_max (writing it on an older one
#: would change the host's)
_PID_MAX_KERNEL: Final = (6, 14)
_CAP_EFF = re.compile(r"^CapEff:\s*([0-9a-f]+)$", re.MULTILINE)


class SandboxUnavailableError(RuntimeError):
    """A command must run in the sandbox (``sandbox = "required"``), and the sandbox cannot hold it."""


@attrs.frozen
class SandboxStatus:
    """The probe's result: whether every guarantee holds here, and if not, which are missing and why."""

    #: every guarantee of SPEC §9.3 holds
    available: bool
    #: the bwrap executable found, or ``None``
    executable: str | None
    reason: str | None = None
    #: the guarantees that do not hold (all of them when bwrap cannot run at all)
    missing: tuple[Guarantee, ...] = ()
    #: the strongest confinement that works here, or ``None``: commands run unconfined
    profile: Profile | None = None


@attrs.frozen
class Confinement:
    """A confined command: the argv to run, and descriptors it must inherit (the workspace's ``Confined``).

    ``pass_fds`` are fresh for each command and belong to the caller, who hands them to the
    process (as ``subprocess``'s ``pass_fds``) and closes them once it has started or failed to.
    """

    argv: tuple[str, ...]
    pass_fds: tuple[int, ...] = ()


def _kernel() -> tuple[int, ...]:
    release = os.uname().release
    numbers = re.match(r"(\d+)\.(\d+)", release)
    return (int(numbers.group(1)), int(numbers.group(2))) if numbers else (0, 0)


def _read_pid_max() -> str:
    with open("/proc/sys/kernel/pid_max") as file:
        return file.read().strip()


def _write_pid_max(value: str) -> None:
    with open("/proc/sys/kernel/pid_max", "w") as file:
        file.write(value)


def _pipe_holding(data: bytes) -> int:
    """The read end of a pipe holding ``data`` (then end of file): what ``bwrap --file`` reads.

    Not inheritable: only a process it is passed to explicitly gets it.
    """
    read, write = os.pipe()
    try:
        os.write(write, data)  # a few bytes: the pipe's buffer takes them at once
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read


class BwrapSandbox:
    """The ``sandbox`` service: wraps commands in bwrap according to each agent's mode.

    ``run_as`` is an argv prefix that runs bwrap as another user (``setpriv --reuid=...``); with
    it, bwrap is treated as unprivileged. The tests use it to run the sandbox as ``nobody``.
    """

    def __init__(
        self,
        setting: SandboxSetting,
        bwrap: str,
        mode_for: Callable[[str | None], Mode],
        *,
        max_processes: int = 512,
        hidden: Sequence[str] = (),
        read_only: Sequence[str] = (),
        run_as: Sequence[str] = (),
    ) -> None:
        self._setting = setting
        self._bwrap = bwrap
        self._mode_for = mode_for
        self._max_processes = max_processes
        self._home = os.path.expanduser("~")
        self._hidden = hidden_paths(hidden, self._home)
        self._read_only = tuple(os.path.normpath(os.path.expanduser(path)) for path in read_only)
        self._run_as = tuple(run_as)
        self._as_root = os.geteuid() == 0 and not self._run_as
        self._status: SandboxStatus | None = None
        self._probing: anyio.Event | None = None
        self._warned = False
        #: guarantees a warning has named already (the start's, about the process cap)
        self._told: set[Guarantee] = set()
        #: the commands' pids cgroups, why there are none, or ``None``: not looked for yet
        self._cgroups: PidsCgroups | str | None = None
        self._private: str | None = None
        self._system: tuple[str, ...] | None = None

    @property
    def setting(self) -> SandboxSetting:
        return self._setting

    @property
    def max_processes(self) -> int:
        return self._max_processes

    def confines(self, mode: Mode) -> bool:
        """Whether commands of an agent in ``mode`` are meant to run in the sandbox."""
        return self._setting != "off" and mode != "full-access"

    def close(self) -> None:
        """Remove the sandbox's private directory (the empty file that stands in for hidden files). Idempotent."""
        private, self._private = self._private, None
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)
        if isinstance(self._cgroups, PidsCgroups):
            self._cgroups.close()

    def _private_dir(self) -> str:
        """A directory with an empty, read-only file and directory: what hidden paths look like inside."""
        if self._private is None:
            private = tempfile.mkdtemp(prefix="dsh-sandbox-")
            os.chmod(private, 0o755)  # bwrap may run as another user (run_as)
            empty = os.path.join(private, "empty")
            with open(empty, "x"):
                pass
            os.chmod(empty, 0o444)
            os.mkdir(empty + ".d", 0o555)
            self._private = private
        return self._private

    def _confined(self, profile: Profile, argv: Sequence[str], *, cwd: str, writable: bool) -> Confinement:
        """``argv`` confined by ``profile``, with a fresh pipe holding the pid_max when the cap needs one."""
        private = self._private_dir()
        pid_max_fd = cgroup_procs = None
        if profile.process_cap == "pid-max":
            pid_max_fd = _pipe_holding(b"%d\n" % pid_max_for(self._max_processes))
        elif profile.process_cap == "cgroup":
            cgroups = self._pids_cgroups()
            if isinstance(cgroups, str):  # the probe found them; they cannot have gone
                raise SandboxUnavailableError(f"the pids cgroup of the process cap is gone: {cgroups}")
            cgroup_procs = cgroups.new(pids_max_for(self._max_processes))
        try:
            confined = confined_argv(
                profile,
                argv,
                cwd=cwd,
                writable=writable,
                max_processes=self._max_processes,
                hidden=self._hidden,
                empty_file=os.path.join(private, "empty"),
                empty_dir=os.path.join(private, "empty.d"),
                home=self._home,
                read_only=self._read_only,
                system=self._system_mounts(),
                pid_max_fd=pid_max_fd,
                cgroup_procs=cgroup_procs,
            )
        except BaseException:
            if pid_max_fd is not None:
                os.close(pid_max_fd)
            raise
        return Confinement((*self._run_as, *confined), () if pid_max_fd is None else (pid_max_fd,))

    # ------------------------------------------------------------------ the probe

    async def status(self) -> SandboxStatus:
        """Which guarantees hold here; probed on first use, then remembered."""
        while self._status is None:
            if self._probing is not None:
                await self._probing.wait()
                continue
            self._probing = anyio.Event()
            try:
                self._status = await self._probe()
            finally:
                self._probing.set()
                self._probing = None
        return self._status

    def _pids_cgroups(self) -> PidsCgroups | str:
        """The commands' pids cgroups, made on first use, or why this host has none."""
        if self._cgroups is None:
            self._cgroups = PidsCgroups.open()
        return self._cgroups

    def _pid_max_problem(self) -> str | None:
        """Why, as root, a pid namespace's pid_max cannot hold ``max_processes`` here, or ``None``."""
        kernel = _kernel()
        if kernel < _PID_MAX_KERNEL:
            return f"Linux {'.'.join(map(str, kernel))} has no pid_max per pid namespace (6.14 or later is needed)"
        if self._max_processes < PID_MAX_LEAST_CAP:
            return (
                f"a pid namespace's pid_max cannot go below {PID_MAX_FLOOR} (the kernel's floor), "
                f"which lets {PID_MAX_LEAST_CAP} processes run"
            )
        return None

    def check_setting(self) -> None:
        """Refuse (``required``) or warn once about (``auto``) a ``max_processes`` this host cannot enforce.

        Called when the plugin starts. Only root's cap can fall short of the setting: below what
        pid_max can hold, a pids cgroup is needed, and this looks for one now.

        :raises ConfigError: when the sandbox is required and the cap cannot hold.
        """
        if self._setting == "off" or not self._as_root:
            return
        if self._max_processes >= PID_MAX_LEAST_CAP:
            return
        cgroups = self._pids_cgroups()
        if isinstance(cgroups, PidsCgroups):
            return
        why = (
            f"plugins.permissions.max_processes = {self._max_processes} cannot be enforced here: dsh runs as root, "
            f"where RLIMIT_NPROC does not apply and {self._pid_max_problem()}, and no pids cgroup can be made for "
            f"the commands ({cgroups})"
        )
        if self._setting == "required":
            msg = (
                f"{why}. Set max_processes to {PID_MAX_LEAST_CAP} or more, run dsh as a normal "
                "user, or run it where it may make cgroups with the pids controller (a writable /sys/fs/cgroup); "
                "sandbox = 'auto' runs commands with the cap that works"
            )
            raise ConfigError(msg, path="plugins.permissions.max_processes")
        cap = f"at most {PID_MAX_LEAST_CAP} processes" if _kernel() >= _PID_MAX_KERNEL else "no cap on processes"
        self._told.add("processes")
        logger.warning("%s; commands run with %s (plugins.permissions.sandbox = 'auto')", why, cap)

    def _process_cap(self, bwrap: str) -> tuple[Profile, str | None]:
        """The strongest profile this host may allow, and why its process cap falls short (or ``None``)."""
        if not self._as_root:
            prlimit = shutil.which("prlimit")
            if prlimit is None:
                return Profile(bwrap=bwrap, process_cap=None), "prlimit (util-linux) is not installed"
            return Profile(bwrap=bwrap, process_cap="rlimit", helper=(prlimit,)), None
        # RLIMIT_NPROC never applies to uid 0, even in a user namespace: as root the cap is the
        # pid namespace's own pid_max, which exists from Linux 6.14 on and cannot go below the
        # kernel's floor, or else a pids cgroup of the command's own.
        pid_max_problem = self._pid_max_problem()
        if pid_max_problem is None:
            return Profile(bwrap=bwrap, process_cap="pid-max"), None
        cgroups = self._pids_cgroups()
        if isinstance(cgroups, PidsCgroups):
            return Profile(bwrap=bwrap, process_cap="cgroup"), None
        why = (
            f"dsh runs as root, where RLIMIT_NPROC does not apply and {pid_max_problem}, "
            f"and no pids cgroup can be made ({cgroups})"
        )
        if _kernel() < _PID_MAX_KERNEL:
            return Profile(bwrap=bwrap, process_cap=None), why
        return Profile(bwrap=bwrap, process_cap="pid-max"), why  # a cap, if not the one asked for

    async def _probe(self) -> SandboxStatus:
        executable = shutil.which(self._bwrap)
        if executable is None:
            reason = f"bubblewrap ({self._bwrap!r}) is not installed or not on PATH"
            return SandboxStatus(False, None, reason, tuple(GUARANTEES))
        private = await anyio.to_thread.run_sync(self._private_dir)
        full, cap_problem = self._process_cap(executable)
        # From the strongest to the weakest; the first that runs is used, and what it lacks is missing.
        no_cap = {"process_cap": None, "helper": ()}
        candidates: list[Profile] = []
        for changes in (
            {},
            {"disable_userns": False},
            no_cap,
            {"disable_userns": False, **no_cap},
            {"user_namespace": False, "disable_userns": False, **no_cap},
        ):
            candidate = attrs.evolve(full, **changes)
            if candidate not in candidates:
                candidates.append(candidate)
        problems: list[str] = [cap_problem] if cap_problem else []
        short_cap: list[Guarantee] = ["processes"] if cap_problem else []
        for profile in candidates:
            outcome = await self._try(profile, private)
            if isinstance(outcome, str):
                if outcome not in problems:
                    problems.append(outcome)
                continue
            missing = list(profile.missing())
            missing += [guarantee for guarantee in short_cap if guarantee not in missing]
            if outcome != 0:
                missing.insert(0, "capabilities")
                problems.append(f"CapEff is {outcome:x} inside")
            if not missing:
                return SandboxStatus(True, executable, None, (), profile)
            return SandboxStatus(False, executable, "; ".join(problems), tuple(missing), profile)
        return SandboxStatus(False, executable, "; ".join(problems), tuple(GUARANTEES))

    async def _try(self, profile: Profile, private: str) -> int | str:
        """Run the probe in ``profile``: the CapEff inside, or why it failed (the pid_max it sets included)."""
        probe = ["cat", "/proc/self/cgroup", "/proc/self/status", "/proc/sys/kernel/pid_max"]
        try:
            confinement = self._confined(profile, probe, cwd=private, writable=False)
        except OSError as exc:  # the command's cgroup
            return f"cannot make the probe's pids cgroup ({exc.strerror or exc})"
        before = _read_pid_max() if profile.process_cap == "pid-max" else None
        try:
            with anyio.move_on_after(_PROBE_LIMIT) as deadline:
                try:
                    done = await anyio.run_process(
                        confinement.argv, check=False, stdin=subprocess.DEVNULL, pass_fds=confinement.pass_fds
                    )
                except OSError as exc:
                    return f"{profile.bwrap} could not be started ({exc.strerror or exc})"
        finally:
            for fd in confinement.pass_fds:
                os.close(fd)
        if deadline.cancelled_caught:
            return f"{profile.bwrap} did not finish its probe within {_PROBE_LIMIT:g} s"
        if before is not None and _read_pid_max() != before:  # never expected on Linux >= 6.14
            _write_pid_max(before)
            return "writing pid_max in a pid namespace changed the host's; the process cap is off"
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).decode("utf-8", "replace").strip()[:_MAX_DETAIL]
            return (
                f"{profile.bwrap} failed its probe ({_features(profile)}; exit {done.returncode}): "
                f"{detail or 'no message'}"
            )
        output = done.stdout.decode("utf-8", "replace")
        if profile.process_cap == "pid-max":
            expected = str(pid_max_for(self._max_processes))
            seen = output.split()[-1] if output.split() else "nothing"
            if seen != expected:
                return f"{profile.bwrap} did not set the sandbox's pid_max (it reads {seen}, not {expected})"
        if profile.process_cap == "cgroup" and isinstance(self._cgroups, PidsCgroups):  # _confined made its cgroup
            if f"{os.path.basename(self._cgroups.directory)}/c" not in output:
                return f"the probe did not run in its pids cgroup (below {self._cgroups.directory})"
        found = _CAP_EFF.search(output)
        return int(found.group(1), 16) if found else -1

    # ------------------------------------------------------------------ use

    def refusal(self, status: SandboxStatus) -> str:
        """The message for a command that cannot run because the required sandbox does not hold here."""
        missing = "; ".join(GUARANTEES[guarantee] for guarantee in status.missing)
        return (
            f"the sandbox is required (plugins.permissions.sandbox = 'required') but cannot guarantee: {missing} "
            f"({status.reason}). Install bubblewrap 0.8 or later (Debian/Ubuntu: apt-get install bubblewrap) on a "
            "kernel that allows user namespaces (Linux 6.14 or later when dsh runs as root), or set "
            "sandbox = 'auto' to run commands with the confinement that works here"
        )

    async def wrap(self, argv: Sequence[str], *, cwd: str, execution: ToolExecution) -> list[str] | Confinement:
        """What runs ``argv`` as the agent's mode says: a ``Confinement``, or ``argv`` as it is.

        A ``Confinement``'s ``pass_fds`` belong to the caller (the workspace closes them).

        :raises SandboxUnavailableError: when the sandbox is required and a guarantee does not hold.
        """
        mode = self._mode_for(execution.agent_id)
        if not self.confines(mode):
            return list(argv)
        status = await self.status()
        if not status.available:
            if self._setting == "required":
                raise SandboxUnavailableError(self.refusal(status))
            if not self._warned:
                self._warned = True
                untold = [guarantee for guarantee in status.missing if guarantee not in self._told]
                if status.profile is None:
                    logger.warning(
                        "commands run without a sandbox: %s (plugins.permissions.sandbox = 'auto')", status.reason
                    )
                elif untold:
                    logger.warning(
                        "commands run in a sandbox without: %s; because %s (plugins.permissions.sandbox = 'auto')",
                        "; ".join(GUARANTEES[guarantee] for guarantee in untold),
                        status.reason,
                    )
        profile = status.profile
        if profile is None:
            return list(argv)
        return self._confined(profile, argv, cwd=cwd, writable=mode == "workspace-write")

    def _system_mounts(self) -> tuple[str, ...]:
        """The system directories' mounts, looked up on first use (the host's layout does not change under us)."""
        if self._system is None:
            self._system = system_mounts()
        return self._system


def _features(profile: Profile) -> str:
    used = ["--unshare-user"] if profile.user_namespace else ["no user namespace"]
    if profile.disable_userns:
        used.append("--disable-userns")
    if profile.process_cap is not None:
        used.append(f"process cap by {profile.process_cap}")
    return ", ".join(used)
