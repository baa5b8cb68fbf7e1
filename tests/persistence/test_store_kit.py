"""``dsh_core.testing.check_session_store`` on every backend, one test per case (so a failure names it),
and what the kit itself must do: name the cases that fail, refuse an unknown one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dsh_persistence_jsonl import PersistencePlugin

from dsh_core.testing import STORE_CASES, check_session_store

from .backends import Backend

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("case", STORE_CASES)
async def test_store_kit_case(backend: Backend, case: str) -> None:
    """Each case of the conformance kit holds on this backend."""
    await check_session_store(backend.make, cases=[case])


class ForgetfulPlugin(PersistencePlugin):
    """persistence-jsonl whose stop writes nothing that was pending: a backend that breaks the contract."""

    async def start(self, ctx: Any) -> None:
        await super().start(ctx)
        assert self.store is not None
        store = self.store

        async def forget() -> None:
            for journal in list(store._followed.values()):
                journal.pending.clear()

        ctx.effect(forget)  # runs before the store's close: what was pending is gone


async def test_the_kit_names_the_case_a_backend_breaks(tmp_path: Path) -> None:
    """A backend that loses what was pending at stop fails the kit with an AssertionError naming the case."""

    def make(directory: Path) -> tuple[object, dict[str, Any]]:
        return ForgetfulPlugin(), {"root": str(directory / "sessions"), "batch_delay": 3600}

    with pytest.raises(AssertionError, match="case 'stop_writes_what_is_pending' failed"):
        await check_session_store(make, cases=["stop_writes_what_is_pending", "exists_load_and_delete"])


async def test_an_unknown_case_is_refused() -> None:
    with pytest.raises(ValueError, match="no case named 'no_such_case'"):
        await check_session_store(lambda directory: (PersistencePlugin(), {}), cases=["no_such_case"])
