"""Fixtures: one Temporal dev server for the module's tests, a shared store, worker processes.

Temporal's Python SDK runs only on asyncio, so these tests run on asyncio alone (the harness inside
each worker runs anyio on that loop); the core support they rely on is tested on both backends
in the root suite.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from dsh_temporal.testing import DevServer

from .temporal_kit import Cluster


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def dev_server() -> Iterator[DevServer]:
    """One dev server for the whole run (each test uses its own task queue and session ids)."""
    with DevServer() as server:
        yield server


@pytest.fixture
def cluster(dev_server: DevServer, tmp_path: Path) -> Cluster:
    """A task queue of its own, a shared JSONL store, and a way to start ``dsh worker`` processes."""
    return Cluster(dev_server.address, tmp_path, task_queue=f"dsh-test-{uuid.uuid4().hex[:8]}")
