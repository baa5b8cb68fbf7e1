"""The escape corpus with the whole harness running as ``nobody``, not only bwrap (SPEC §9.3, issue 14).

``test_sandbox_escapes`` runs bwrap as ``nobody`` from a root harness (the ``run_as`` seam). Here
the harness itself is an unprivileged process: ``normal_user_child.py`` runs under ``setpriv``
as ``nobody`` with a system Python of the same version and this environment's site-packages
(the project's own interpreter lives under ``/root``, which ``nobody`` cannot read), so the
probe, the process cap (RLIMIT_NPROC in the sandbox's user namespace), the home directory and the
teardown are the ones a normal user gets. Each attempt asserts it failed.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

NOBODY = 65534
SETPRIV = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--")
SECRET = "dsh-secret-5e1d"
CAP = 350
CHILD = Path(__file__).with_name("normal_user_child.py")


def _interpreter() -> str | None:
    """A Python of this version that ``nobody`` can run, or ``None``."""
    wanted = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/python{wanted}", f"/usr/local/bin/python{wanted}", sys.executable):
        if not os.path.exists(candidate):
            continue
        probe = [*SETPRIV, candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
        done = subprocess.run(probe, capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"})
        if done.returncode == 0 and done.stdout.strip() == wanted:
            return candidate
    return None


#: the checkout: nobody must reach its sources and the venv inside it
REPOSITORY = CHILD.parents[3]


@pytest.fixture(scope="module")
def reachable_checkout() -> Iterator[None]:
    """Let nobody traverse (not list) the folders above the checkout, for the test's duration.

    A checkout may sit in a 0700 folder (``mktemp -d``, as CI clones it): nobody could not even
    open the child script. Only the search bit is added, and each folder's mode is put back.
    """
    changed: list[tuple[Path, int]] = []
    try:
        for folder in (REPOSITORY, *REPOSITORY.parents):
            mode = folder.stat().st_mode
            if not mode & 0o001:
                folder.chmod((mode & 0o7777) | 0o001)
                changed.append((folder, mode & 0o7777))
        yield
    finally:
        for folder, mode in reversed(changed):
            folder.chmod(mode)


@pytest.fixture(scope="module")
def interpreter(reachable_checkout: None) -> str:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux) to become nobody")
    found = _interpreter()
    if found is None:
        pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that nobody can run")
    return found


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory owned by nobody: its home (with every secret) and its workspace."""
    path = Path(tempfile.mkdtemp(prefix="dsh-nobody-", dir="/tmp"))
    try:
        home, ws = path / "home", path / "ws"
        for relative in (".ssh/id_rsa", ".aws/credentials"):
            (home / relative).parent.mkdir(parents=True, exist_ok=True)
            (home / relative).write_text(f"{SECRET} {relative}\n")
        (home / "notes.txt").write_text("ordinary\n")
        ws.mkdir()
        (ws / "notes.txt").write_text("notes\n")
        (path / "outside.txt").write_text(f"{SECRET} outside\n")  # nobody's own file, beside the workspace
        for item in [path, *path.rglob("*")]:
            os.chown(item, NOBODY, NOBODY)
            item.chmod(0o755 if item.is_dir() else 0o644)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _run_child(interpreter: str, backend: str, scratch: Path, env: dict[str, str], marker: str) -> dict[str, Any]:
    site = sysconfig.get_paths()["purelib"]
    boot = f"import site, sys, runpy; site.addsitedir({site!r}); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    argv = [*SETPRIV, interpreter, "-c", boot, str(CHILD), backend, str(scratch / "ws"), str(CAP), marker]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, cwd=scratch, timeout=120)
    if done.returncode != 0 and "ModuleNotFoundError" in done.stderr:
        pytest.skip(f"nobody cannot import this environment's packages: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def _codes(output: str) -> dict[str, int]:
    return {name: int(code) for name, code in re.findall(r"^([\w-]+)=(\d+)$", output, re.MULTILINE)}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_every_attempt_fails_with_the_harness_running_as_nobody(interpreter: str, scratch: Path, backend: str) -> None:
    """Capabilities, mounts, sysctls, secrets, host processes, host sockets, loopback, a flood, read-only writes,
    and the file tools' paths out of the workspace (``..``, absolute, ``/proc/self/root``, a symlink)."""
    marker = f"{800_000 + os.getpid() % 1000}.{random.randrange(10**5):05d}"
    unix = socket.socket(socket.AF_UNIX)
    tcp = socket.socket()
    try:
        unix_path = scratch / "host.sock"  # outside the workspace, and anyone may connect to it
        unix.bind(str(unix_path))
        unix_path.chmod(0o777)
        tcp.bind(("127.0.0.1", 0))
        for server in (unix, tcp):
            server.listen(8)
            server.setblocking(False)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(scratch / "home"),
            "DSH_SOCKET": str(unix_path),
            "DSH_PORT": str(tcp.getsockname()[1]),
        }
        out = _run_child(interpreter, backend, scratch, env, marker)
        for server in (unix, tcp):
            with pytest.raises(BlockingIOError):
                server.accept()
    finally:
        unix.close()
        tcp.close()
    assert out["euid"] == NOBODY
    status = out["status"]
    if not status["available"]:
        pytest.skip(f"the sandbox cannot hold here as a normal user: {status['reason']}")
    assert status["process_cap"] == "rlimit", status  # a normal user's cap: RLIMIT_NPROC, no pid_max helper
    capabilities = re.findall(r"^Cap(\w+):\s+([0-9a-f]+)$", out["capabilities"]["text"], re.MULTILINE)
    assert len(capabilities) == 5, out["capabilities"]
    assert all(int(value, 16) == 0 for _, value in capabilities), out["capabilities"]
    for name in ("mounts", "sysctl", "tcp", "unix"):
        codes = _codes(out[name]["text"])
        assert codes, out[name]
        assert all(code != 0 for code in codes.values()), (name, out[name])
    assert "visible" not in out["unix"]["text"]
    assert "connected" not in out["unix"]["text"]
    assert SECRET not in out["secrets"]["text"]
    assert "root:" not in out["secrets"]["text"]
    assert "ordinary" not in out["secrets"]["text"]  # the home directory inside is an empty one
    pids = [line for line in out["processes"]["text"].splitlines() if line.startswith("pid ")]
    assert 1 <= len(pids) <= 4, pids
    assert not any("python" in line for line in pids), pids
    procs = _codes(out["flood"]["text"])["procs"]
    assert CAP - 60 <= procs <= CAP + 1, out["flood"]
    assert out["flood"]["left"] == []
    assert _codes(out["read-only"]["text"]) == {"overwrite": 1, "create": 1}, out["read-only"]
    for name in ("dotdot", "absolute", "proc-root", "symlink"):
        for tool in ("read_file", "write_file"):
            attempt = out[f"{tool} {name}"]
            assert attempt["error_code"] is not None, (tool, name, attempt)
            assert SECRET not in attempt["text"], (tool, name, attempt)
    assert (scratch / "outside.txt").read_text() == f"{SECRET} outside\n"
    assert sorted(path.name for path in (scratch / "ws").iterdir()) == ["notes.txt"]
    assert (scratch / "ws" / "notes.txt").read_text() == "notes\n"
