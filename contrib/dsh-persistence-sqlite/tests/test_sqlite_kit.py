"""The conformance kit, run the way any backend runs it: ``check_session_store(make)``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dsh_persistence_sqlite import PersistencePlugin

from dsh_core.testing import check_session_store

pytestmark = pytest.mark.anyio


async def test_the_store_passes_the_kit() -> None:
    """Every case of ``check_session_store`` holds on persistence-sqlite."""

    def make(directory: Path) -> tuple[object, dict[str, Any]]:
        return PersistencePlugin(), {"path": str(directory / "sessions.db")}

    await check_session_store(make)
