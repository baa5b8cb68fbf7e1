"""The bubblewrap process sandbox: the ``sandbox`` service that confines ``bash`` commands.

In the read-only and workspace-write modes a command runs as::

    bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp
          --bind <cwd> <cwd>          (workspace-write; read-only mode: --ro-bind <cwd> <cwd>)
          --unshare-net --unshare-pid --die-with-parent --new-session --chdir <cwd> -- <argv>

so the system is read-only, only the workspace (and a private ``/tmp``) is writable, there is no
network but a private loopback, and the command's processes live in their own pid namespace,
which the kernel empties when bwrap dies: stopping bwrap stops everything the command started.
In full-access mode, or with ``sandbox = "off"``, commands run unconfined.

Whether bwrap works is probed once, by running ``true`` under the same options (it may be
missing, or the kernel may refuse the namespaces it needs). With ``sandbox = "required"`` a
failed probe refuses every command it would confine; with ``auto`` they run unconfined and a
warning is logged once.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio
import attrs

from ._config import Mode, SandboxSetting

if TYPE_CHECKING:
    from dsh_core import ToolExecution

__all__ = ["BwrapSandbox", "SandboxStatus", "SandboxUnavailableError", "bwrap_argv"]

logger = logging.getLogger("dsh.permissions")

#: seconds the probe may take
_PROBE_LIMIT = 10.0
#: bytes of bwrap's complaint kept for the message
_MAX_DETAIL = 500


class SandboxUnavailableError(RuntimeError):
    """A command must run in the sandbox (``sandbox = "required"``), and no sandbox can be made."""


@attrs.frozen
class SandboxStatus:
    """The probe's result: whether bwrap can confine commands here, and if not, why."""

    available: bool
    #: the bwrap executable found, or ``None``
    executable: str | None
    reason: str | None = None


def bwrap_argv(
    bwrap: str, argv: Sequence[str], *, cwd: str, writable: bool, network: bool = False
) -> list[str]:
    """``argv`` confined by bwrap: read-only system, ``cwd`` writable when ``writable``, no network."""
    confined = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # The workspace is bound after the /tmp tmpfs, so that a workspace below /tmp stays visible.
    confined += ["--bind" if writable else "--ro-bind", cwd, cwd]
    if not network:
        confined.append("--unshare-net")
    confined += ["--unshare-pid", "--die-with-parent", "--new-session", "--chdir", cwd, "--", *argv]
    return confined


class BwrapSandbox:
    """The ``sandbox`` service: wraps commands in bwrap according to each agent's mode."""

    def __init__(self, setting: SandboxSetting, bwrap: str, mode_for: Callable[[str | None], Mode]) -> None:
        self._setting = setting
        self._bwrap = bwrap
        self._mode_for = mode_for
        self._status: SandboxStatus | None = None
        self._probing: anyio.Event | None = None
        self._warned = False

    @property
    def setting(self) -> SandboxSetting:
        return self._setting

    def confines(self, mode: Mode) -> bool:
        """Whether commands of an agent in ``mode`` are meant to run in the sandbox."""
        return self._setting != "off" and mode != "full-access"

    async def status(self) -> SandboxStatus:
        """Whether bwrap works here; probed on first use, then remembered."""
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

    async def _probe(self) -> SandboxStatus:
        executable = shutil.which(self._bwrap)
        if executable is None:
            return SandboxStatus(False, None, f"bubblewrap ({self._bwrap!r}) is not installed or not on PATH")
        argv = bwrap_argv(executable, ["true"], cwd="/", writable=False)
        failure: str | None = None
        with anyio.move_on_after(_PROBE_LIMIT) as deadline:
            try:
                done = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
            except OSError as exc:
                failure = f"{executable} could not be started ({exc.strerror or exc})"
            else:
                if done.returncode != 0:
                    detail = (done.stderr or done.stdout).decode("utf-8", "replace").strip()[:_MAX_DETAIL]
                    failure = (
                        f"{executable} failed its probe (exit {done.returncode}): {detail or 'no message'}"
                    )
        if deadline.cancelled_caught:
            failure = f"{executable} did not finish its probe within {_PROBE_LIMIT:g} s"
        if failure is not None:
            return SandboxStatus(False, executable, failure)
        return SandboxStatus(True, executable)

    def refusal(self, status: SandboxStatus) -> str:
        """The message for a command that cannot run because the required sandbox cannot be made."""
        return (
            f"the sandbox is required (plugins.permissions.sandbox = 'required') but cannot be made: "
            f"{status.reason}. Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) on a kernel "
            "that allows unprivileged user namespaces, or set sandbox = 'auto' to run commands unconfined"
        )

    async def wrap(self, argv: Sequence[str], *, cwd: str, execution: ToolExecution) -> list[str]:
        """The argv that runs ``argv`` as the agent's mode says: confined, or as it is.

        :raises SandboxUnavailableError: when the sandbox is required and cannot be made.
        """
        mode = self._mode_for(execution.agent_id)
        if not self.confines(mode):
            return list(argv)
        status = await self.status()
        if not status.available or status.executable is None:
            if self._setting == "required":
                raise SandboxUnavailableError(self.refusal(status))
            if not self._warned:
                self._warned = True
                logger.warning(
                    "commands run without a sandbox: %s (plugins.permissions.sandbox = 'auto')", status.reason
                )
            return list(argv)
        return bwrap_argv(status.executable, argv, cwd=cwd, writable=mode == "workspace-write")
