"""Fixtures: the demo server's configuration (stdio or HTTP), its signal FIFOs, and a harness with it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeAlias

import pytest
from dsh_mcp import Backoff, McpPlugin

from dsh_core import Context, Harness

DEMO = str(Path(__file__).with_name("demo_server.py"))

#: ``async with start({"demo": {...}}, plugins=[...], permissions={...}) as ctx:``
Start: TypeAlias = Callable[..., AbstractAsyncContextManager[Context]]


@pytest.fixture
def signals(tmp_path: Path) -> Path:
    """The directory through which the demo server reports; ``started`` and ``cancelled`` are FIFOs."""
    folder = tmp_path / "signals"
    folder.mkdir()
    os.mkfifo(folder / "started")
    os.mkfifo(folder / "cancelled")
    return folder


@pytest.fixture
def stdio_demo(signals: Path) -> dict[str, Any]:
    """The demo server over stdio."""
    return {"command": sys.executable, "args": [DEMO, "--signals", str(signals)]}


class HttpDemo:
    """The demo server over streamable HTTP on a loopback port bound here; the socket outlives the process.

    So the test can kill the server and start a new one at the same address.
    """

    def __init__(self, signals: Path) -> None:
        self._signals = signals
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)  # connections queue here until a server process accepts them
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/mcp"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        fd = self._sock.fileno()
        command = [sys.executable, DEMO, "--signals", str(self._signals), "--http", str(fd)]
        self._process = subprocess.Popen(command, pass_fds=[fd], stderr=subprocess.DEVNULL)

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=10)
            self._process = None

    def close(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None
        self._sock.close()


@pytest.fixture
def http_server(signals: Path) -> Iterator[HttpDemo]:
    """The demo HTTP server, running; stopped afterwards."""
    server = HttpDemo(signals)
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def http_demo(http_server: HttpDemo) -> dict[str, Any]:
    """The configuration of the demo HTTP server."""
    return {"url": http_server.url}


@pytest.fixture
def start() -> Start:
    """Start a harness with the mcp plugin serving ``servers`` (and the permissions plugin if asked)."""

    @asynccontextmanager
    async def run(
        servers: dict[str, Any],
        *,
        plugins: Sequence[object] = (),
        permissions: dict[str, Any] | None = None,
        backoff: Backoff | None = None,
    ) -> AsyncIterator[Context]:
        config: dict[str, Any] = {"plugins": {"mcp": {"servers": servers}}}
        loaded: list[object] = [McpPlugin(backoff), *plugins]
        if permissions is not None:
            from dsh_permissions import PermissionsPlugin

            config["plugins"]["permissions"] = permissions
            loaded.append(PermissionsPlugin)
        async with Harness(config=config, plugins=loaded, autoload=False) as ctx:
            yield ctx

    return run
