"""The conformance kit, called the way any backend calls it: ``check_session_store(make)``.

Every case runs on this backend in the shared suite (``tests/persistence/test_store_kit.py``, one
test per case, beside persistence-jsonl and persistence-postgres); here a few of them run through
the kit's own entry point, as a third party's backend would run it in its own tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dsh_persistence_sqlite import PersistencePlugin

from dsh_core.testing import check_session_store

pytestmark = pytest.mark.anyio


async def test_the_store_passes_the_kit() -> None:
    def make(directory: Path) -> tuple[object, dict[str, Any]]:
        return PersistencePlugin(), {"path": str(directory / "sessions.db")}

    cases = [
        "every_event_type_round_trips",
        "open_turn_is_closed_by_appended_repair_events",
        "second_harness_in_this_process_is_refused",
        "sigkill_mid_tool_then_resume",
    ]
    await check_session_store(make, cases=cases)
