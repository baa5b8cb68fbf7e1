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


@pytest.fixture
def http_demo(signals: Path) -> Iterator[dict[str, Any]]:
    """The demo server over streamable HTTP, on a loopback port bound here; stopped afterwards."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, DEMO, "--signals", str(signals), "--http", str(sock.fileno())],
        pass_fds=[sock.fileno()],
        stderr=subprocess.DEVNULL,
    )
    sock.close()  # the server holds the listening socket now; connections queue until it accepts
    try:
        yield {"url": f"http://127.0.0.1:{port}/mcp"}
    finally:
        process.terminate()
        process.wait(timeout=10)


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
