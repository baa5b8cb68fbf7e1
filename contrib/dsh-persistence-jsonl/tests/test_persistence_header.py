"""The header line of a log: what it records about the session (the round trips are in tests/persistence/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dsh_persistence_jsonl import FORMAT_VERSION

from .persistence_kit import HarnessFactory, log_lines, stored_events

pytestmark = pytest.mark.anyio


async def test_header_describes_the_session(harness: HarnessFactory, root: Path, tmp_path: Path) -> None:
    """Line 1 holds the format, id, created time, cwd, parent, seed length and the full meta."""
    async with harness() as ctx:
        parent = await ctx.sessions.create("parent", meta={"cwd": str(tmp_path)})
        parent.append("turn/start", {"turn": 1})
        parent.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        child = await ctx.sessions.fork(parent, 1, "child")
        await ctx.sessions.flush(child)
    header = json.loads(log_lines(root / "child" / "session.jsonl")[0])
    assert header["format"] == FORMAT_VERSION
    assert header["id"] == "child"
    assert isinstance(header["created"], float)
    assert (header["cwd"], header["parent_id"], header["seed_length"]) == (str(tmp_path), "parent", 2)
    assert header["meta"] == {"cwd": str(tmp_path), "parent_id": "parent", "seed_length": 2, "extra": {}}
    assert [event.type for event in stored_events(root / "child" / "session.jsonl")] == [
        "turn/start",
        "turn/end",
    ]
