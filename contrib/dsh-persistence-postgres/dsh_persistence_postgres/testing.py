"""A throwaway PostgreSQL server for tests: ``initdb`` in a temp dir, served on a Unix socket there.

``with temporary_postgres() as server:`` makes a cluster with the server binaries of Debian's
``postgresql`` package (or ``$DSH_POSTGRES_BINDIR``, or ``pg_config --bindir``), starts it
listening only on a socket inside its temp dir, and yields a ``PostgresServer`` whose ``dsn``
connects as a trusted superuser. Leaving the block stops the server (a fast shutdown, then a kill
if it hangs) and removes the directory: nothing is left behind.

``initdb`` refuses to run as root, so under root (CI) the cluster belongs to an unprivileged
user (``nobody`` unless ``user=`` says otherwise) and the server runs as that user.

``netns=`` (root only) runs the server in a network namespace made with ``ip netns add``, entered
with util-linux's ``nsenter``: a test can then reach it over a link that exists only between its
own namespaces (``settings={"listen_addresses": ...}``; the server trusts the peers on its
subnets, ``samenet``), while the Unix socket, a file, still serves every namespace.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Final

import attrs

__all__ = ["PostgresServer", "PostgresUnavailableError", "find_bindir", "temporary_postgres"]

#: what the server prints once it accepts connections
_READY: Final = "database system is ready to accept connections"
#: seconds the server may take to start, or to stop before it is killed
_START_TIMEOUT: Final = 120.0
_STOP_TIMEOUT: Final = 30.0


class PostgresUnavailableError(RuntimeError):
    """No PostgreSQL server binaries were found, or the server would not start."""


@attrs.frozen
class PostgresServer:
    """A running throwaway server."""

    #: libpq connection string (Unix socket in ``socket_dir``, user ``dsh``, database ``postgres``)
    dsn: str
    #: the same server over loopback TCP, when started with ``tcp=True`` (else ``None``)
    tcp_dsn: str | None
    socket_dir: Path
    data_dir: Path
    #: the server's log (its stderr), for a failing test to show
    log: Path
    #: the postmaster's pid
    pid: int


def find_bindir() -> Path:
    """The directory of ``initdb`` and ``postgres``.

    :raises PostgresUnavailableError: none found (install Debian's ``postgresql`` package).
    """
    given = os.environ.get("DSH_POSTGRES_BINDIR")
    candidates = [given] if given else []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True)
            candidates.append(out.stdout.strip())
        except (OSError, subprocess.CalledProcessError):
            pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").is_file() and (Path(candidate) / "postgres").is_file():
            return Path(candidate)
    msg = (
        "no PostgreSQL server binaries (initdb, postgres) found: install Debian's postgresql package "
        "(apt-get install postgresql) or set DSH_POSTGRES_BINDIR to their directory"
    )
    raise PostgresUnavailableError(msg)


def _version_key(path: str) -> tuple[int, ...]:
    version = Path(path).parent.name
    return tuple(int(part) for part in version.split(".") if part.isdigit())


@contextlib.contextmanager
def temporary_postgres(
    *,
    user: str = "nobody",
    settings: Mapping[str, str] | None = None,
    tcp: bool = False,
    netns: str | None = None,
) -> Iterator[PostgresServer]:
    """Start a throwaway server; stop it and remove its files on exit.

    ``settings`` are extra server settings (``-c name=value``); ``user`` is whom the cluster
    belongs to when this process runs as root (ignored otherwise); ``tcp`` also serves it on a
    free loopback port (``tcp_dsn``), for what only TCP has (keepalives); ``netns`` runs the
    server in that network namespace (``/run/netns/<netns>``; root only).

    :raises PostgresUnavailableError: no binaries, or the server failed to start (with its log).
    """
    bindir = find_bindir()
    as_root = os.geteuid() == 0
    if netns is not None and not as_root:
        msg = f"a server in network namespace {netns!r} needs root (entering a namespace does)"
        raise PostgresUnavailableError(msg)
    account = pwd.getpwnam(user) if as_root else None
    # Under root the temp dir must be reachable by ``user``: /tmp, not a private TMPDIR.
    base = tempfile.mkdtemp(prefix="dsh-pg-", dir="/tmp" if as_root else None)
    root = Path(base)
    try:
        if account is not None:
            os.chown(root, account.pw_uid, account.pw_gid)
        as_user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []} if account else {}
        data = root / "data"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", "dsh", "-A", "trust", "-E", "UTF8"]
        initdb += ["--locale=C", "--no-sync", "--no-instructions"]
        done = subprocess.run(initdb, capture_output=True, text=True, env=env, cwd=root, check=False, **as_user)  # type: ignore[call-overload]
        if done.returncode != 0:
            msg = f"initdb failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}"
            raise PostgresUnavailableError(msg)
        port = _free_port() if tcp else 5432
        options = {
            "listen_addresses": "127.0.0.1" if tcp else "",
            "port": str(port),
            "unix_socket_directories": str(root),
            "max_connections": "300",
            "logging_collector": "off",
            **(settings or {}),
        }
        command = [str(bindir / "postgres"), "-D", str(data)]
        for name, value in options.items():
            command += ["-c", f"{name}={value}"]
        if netns is not None and account is not None:
            # Trust the namespace's own subnets too: the peers a test puts on its private link.
            with (data / "pg_hba.conf").open("a") as hba:
                hba.write("host all all samenet trust\n")
            # nsenter enters the namespace as root, then becomes the cluster's owner (dropping the
            # supplementary groups) and execs the server: the pid stays the postmaster's.
            enter = ["nsenter", f"--net=/run/netns/{netns}", "-S", str(account.pw_uid), "-G", str(account.pw_gid)]
            command = [*enter, "--", *command]
            as_user = {}
        log = root / "server.log"
        with _running(command, env=env, cwd=root, log=log, as_user=as_user) as pid:
            yield PostgresServer(
                dsn=f"host={root} port={port} user=dsh dbname=postgres",
                tcp_dsn=f"host=127.0.0.1 port={port} user=dsh dbname=postgres" if tcp else None,
                socket_dir=root,
                data_dir=data,
                log=log,
                pid=pid,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _running(
    command: list[str], *, env: dict[str, str], cwd: Path, log: Path, as_user: Mapping[str, object]
) -> Iterator[int]:
    """Run the postmaster until the block ends; its stderr is copied to ``log`` by a thread."""
    process = subprocess.Popen(  # type: ignore[call-overload]
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=env, cwd=cwd, text=True, start_new_session=True, **as_user,
    )
    ready = threading.Event()
    copier = threading.Thread(target=_copy_log, args=(process.stderr, log, ready), daemon=True)
    copier.start()
    try:
        if not ready.wait(_START_TIMEOUT) or process.poll() is not None:
            process.kill()
            process.wait()
            copier.join(5)
            text = log.read_text(errors="replace") if log.exists() else ""
            msg = f"the PostgreSQL server did not start (exit {process.returncode}); its log:\n{text[-4000:]}"
            raise PostgresUnavailableError(msg)
        yield int(process.pid)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # fast shutdown: disconnect clients, stop cleanly
            try:
                process.wait(_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        copier.join(5)


def _copy_log(stream: IO[str], log: Path, ready: threading.Event) -> None:
    with stream, log.open("w") as out:
        for line in stream:
            out.write(line)
            out.flush()
            if _READY in line:
                ready.set()
    ready.set()  # the server exited: wake the starter, which sees it
