"""Session ids become one folder name under the root: hostile ids can never name a path outside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dsh_persistence_jsonl import escape_id

from .persistence_kit import HarnessFactory

pytestmark = pytest.mark.anyio

HOSTILE = [
    "../x",
    "../../etc/passwd",
    "a/b",
    "/abs/path",
    ".",
    "..",
    "...",
    ".hidden",
    "a\\b",
    "nul\x00byte",
    "new\nline",
    "ünïcødé ✓ 会话",
    "%2E%2E",
    "~",
    " x ",
    "x" * 1000,
    "é" * 300,
    "/" * 200,
]


@pytest.mark.parametrize("session_id", HOSTILE)
def test_escaped_id_is_one_plain_component(session_id: str) -> None:
    """Every escaped id is a single path component, never `.` or `..`, and short enough for a file name."""
    name = escape_id(session_id)
    assert name not in {"", ".", ".."}
    assert not name.startswith(".")
    assert "/" not in name
    assert "\\" not in name
    assert "\x00" not in name
    assert len(name.encode()) <= 200
    assert Path(name).name == name


def test_safe_ids_keep_their_name() -> None:
    """Ids made of letters, digits, `.`, `_` and `-` are their own folder name."""
    assert escape_id("agent-1_session.v2") == "agent-1_session.v2"


def test_escaping_is_injective() -> None:
    """Distinct ids never share a folder, even when one looks like the escaped form of another."""
    ids = [*HOSTILE, "a%2Fb", "%2E", "a%5Cb", "x" * 999, "x" * 1001, "A", "a"]
    names = [escape_id(session_id) for session_id in ids]
    assert len(set(names)) == len(ids)


def test_empty_and_non_str_ids_are_refused() -> None:
    """An empty id would name the root itself; a non-str id is a type error."""
    with pytest.raises(ValueError, match="non-empty"):
        escape_id("")
    with pytest.raises(TypeError, match="must be a str"):
        escape_id(42)  # type: ignore[arg-type]


async def test_hostile_ids_are_stored_inside_the_root(harness: HarnessFactory, root: Path) -> None:
    """Sessions with hostile ids are written, listed and loaded back, and every file stays under the root."""
    outside = root.parent
    async with harness() as ctx:
        for session_id in HOSTILE:
            session = await ctx.sessions.create(session_id)
            session.append("note/added", {"id": session_id})
            await ctx.sessions.flush(session)
    async with harness() as ctx:
        listed = {info.id for info in await ctx.session_persistence.list()}
        for session_id in HOSTILE:
            loaded = await ctx.session_persistence.load(session_id)
            assert [event.data["id"] for event in loaded.events] == [session_id]
    assert listed == set(HOSTILE)
    everything = [Path(folder) / name for folder, _, names in os.walk(outside) for name in names]
    assert all(path.is_relative_to(root) for path in everything)
    assert {path.parent.parent for path in everything} == {root}  # one folder deep, no further
    assert sorted(os.listdir(outside)) == ["sessions"]
