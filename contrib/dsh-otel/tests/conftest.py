"""Fixtures of the otel tests: providers of the test's own, never the process's global ones."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .otel_kit import Telemetry


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    collected = Telemetry.fresh()
    yield collected
    collected.close()
