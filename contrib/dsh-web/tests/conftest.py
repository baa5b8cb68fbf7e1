"""Fixtures: a real local HTTP server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .web_kit import LocalServer, serve


@pytest.fixture
def server() -> Iterator[LocalServer]:
    yield from serve()
