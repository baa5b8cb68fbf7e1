"""Fixtures: a running server over a store in ``tmp_path``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .serve_kit import Served, serving


@pytest.fixture
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """The server, its harness on the test's backend (a sync test's: asyncio)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    backend = request.getfixturevalue("anyio_backend") if "anyio_backend" in request.fixturenames else "asyncio"
    with serving(tmp_path / "sessions", workspace, backend=backend) as server:
        yield server
