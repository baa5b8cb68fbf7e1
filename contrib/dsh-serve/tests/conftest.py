"""Fixtures: a running server over a store in ``tmp_path``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .serve_kit import Served, serving


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with serving(tmp_path / "sessions", workspace) as server:
        yield server
