"""The pids cgroups of root's process cap: finding the harness's own, making and removing the commands'."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from dsh_permissions import _cgroup
from dsh_permissions._cgroup import MOVE_AND_EXEC, PidsCgroups

V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 /docker/abc /sys/fs/cgroup/pids\\040here rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_CGROUPS = "8:pids:/docker/abc/job\n4:memory:/x\n0::/\n"


def test_the_pids_hierarchy_of_cgroup_v1_is_found_below_its_mount_root() -> None:
    """v1: the mount with the pids option; the process's path is taken relative to the mount's root."""
    assert _cgroup._own_pids_dir(V1_MOUNTS, V1_CGROUPS) == ("/sys/fs/cgroup/pids here/job", False)


def test_a_cgroup_the_mount_does_not_show_is_no_pids_cgroup() -> None:
    """A pids mount whose root is not above the process's cgroup shows another part of the tree."""
    found = _cgroup._own_pids_dir(V1_MOUNTS, "8:pids:/elsewhere\n")
    assert found == "no cgroup hierarchy with the pids controller is mounted here"


def test_cgroup_v2_needs_the_pids_controller(tmp_path: Path) -> None:
    """v2: the unified mount, if the pids controller is available to the process's cgroup."""
    (tmp_path / "job").mkdir()
    mounts = f"30 23 0:27 / {tmp_path} rw - cgroup2 cgroup2 rw\n"
    (tmp_path / "job" / "cgroup.controllers").write_text("cpu memory\n")
    assert _cgroup._own_pids_dir(mounts, "0::/job\n") == (
        f"the pids controller is not available to the cgroup {tmp_path}/job (cgroup v2)"
    )
    (tmp_path / "job" / "cgroup.controllers").write_text("cpu memory pids\n")
    assert _cgroup._own_pids_dir(mounts, "0::/job\n") == (f"{tmp_path}/job", True)


def test_a_directory_that_is_not_a_cgroup_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pids "mount" that is a plain directory: no pids.max appears in what is made there, so no cgroup."""
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"39 31 0:36 / {tmp_path} rw - cgroup cgroup rw,pids\n")
    cgroups = tmp_path / "cgroup"
    cgroups.write_text("8:pids:/\n")
    monkeypatch.setattr(_cgroup, "MOUNTINFO", str(mountinfo))
    monkeypatch.setattr(_cgroup, "CGROUPS", str(cgroups))
    found = PidsCgroups.open()
    assert found == f"cannot make a pids cgroup in {tmp_path} (No such file or directory)"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cgroup", "mountinfo"]  # nothing left


def host_pids_cgroups() -> PidsCgroups | None:
    """This host's, or ``None`` where none can be made (a read-only /sys/fs/cgroup, not root): then it says why."""
    found = PidsCgroups.open()
    if isinstance(found, str):
        assert found.startswith(("no cgroup hierarchy", "cannot ", "the pids controller")), found
        print(f"no pids cgroup can be made here ({found}); asserted that open() says why instead")
        return None
    return found


def test_each_command_gets_a_limited_cgroup_removed_once_it_is_empty() -> None:
    """new() makes a cgroup with the pids.max asked for; a cgroup holding a process stays until it is empty."""
    cgroups = host_pids_cgroups()
    if cgroups is None:
        return
    try:
        procs = cgroups.new(7)
        cgroup = Path(procs).parent
        assert (cgroup / "pids.max").read_text() == "7\n"
        assert cgroup.parent == Path(cgroups.directory)
        assert cgroup.parent.name.startswith(f"dsh-sandbox-{os.getpid()}-")
        # The command line's wrapper: the shell enters the cgroup, then becomes the command.
        argv = ["/bin/sh", "-c", MOVE_AND_EXEC, procs, "sh", "-c", "echo in; read line || true"]
        with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as child:
            assert child.stdout is not None
            assert child.stdin is not None
            assert child.stdout.readline() == b"in\n"
            assert Path(procs).read_text().split() == [str(child.pid)]
            second = Path(cgroups.new(3)).parent  # sweeps: the first holds a process and stays
            assert cgroup.is_dir()
            assert second.is_dir()
            assert second != cgroup
            child.stdin.close()  # read gets end of file: the child exits
        assert child.returncode == 0
        cgroups.sweep()
        assert not cgroup.exists()
        assert not second.exists()
    finally:
        cgroups.close()
    assert not Path(cgroups.directory).exists()


def test_a_dead_harness_s_cgroups_are_removed_by_the_next() -> None:
    """The directory of a harness that is gone (its pid names no process) is removed when another opens."""
    cgroups = host_pids_cgroups()
    if cgroups is None:
        return
    parent = Path(cgroups.directory).parent
    cgroups.close()
    stale = parent / "dsh-sandbox-99999999-left"  # beyond any pid_max: no such process
    (stale / "c1").mkdir(parents=True)
    again = host_pids_cgroups()
    assert again is not None
    try:
        assert not stale.exists()
    finally:
        again.close()
