"""Damaged stored sessions: each gives a typed error naming the file and line (or the path), never a guess.

The data rules are the ones ``session.append`` applies: for every variant, append refuses the event with
the same event type and field that load names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from dsh_persistence_jsonl import (
    SessionAccessError,
    SessionCorruptError,
    SessionInUseError,
    SessionNotFoundError,
)

from dsh_core import EventDataError, Text, UserMessage
from dsh_core.vocabulary import AssistantMessage

from .persistence_kit import MODEL, HarnessFactory, log_lines
from .test_persistence_repair import HEADER, closed_turn, write_log

pytestmark = pytest.mark.anyio

PROMPT = UserMessage(content=(Text("hello"),)).to_json()
NO_ID = {key: value for key, value in PROMPT.items() if key != "id"}

#: (event type, data, the field named): the variants of issue 15, and a few of their neighbours
VARIANTS: list[tuple[str, dict[str, Any], str]] = [
    ("user/message", {"message": 5}, "data.message"),
    ("user/message", {"message": NO_ID}, "data.message.id"),
    ("user/message", {"message": PROMPT, "queued_id": 7}, "data.queued_id"),
    ("turn/start", {"turn": "one"}, "data.turn"),
    ("turn/start", {"turn": True}, "data.turn"),
    ("inbox/queued", {"message": "x"}, "data.id"),
    ("inbox/queued", {"id": "q1", "kind": "send", "message": "x"}, "data.message"),
    ("inbox/queued", {"id": "q1", "kind": "later", "message": PROMPT}, "data.kind"),
    ("inbox/queued", {}, "data.id"),
    ("inbox/cleared", {"ids": "q1"}, "data.ids"),
    ("tool/call", {"turn": 1}, "data.step"),
    ("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "x", "arguments": {}}, "data.arguments"),
    ("turn/end", {"reason": 5}, "data.turn"),
    ("turn/end", {"turn": 1, "reason": 5}, "data.reason"),
    ("turn/end", {"turn": 1, "reason": {"kind": "finished"}}, "data.reason.kind"),
    ("turn/end", {"turn": 1, "reason": {"kind": "error"}}, "data.reason"),  # the message names failure
    ("request/header", {"bogus": True}, "data.config"),
    (
        "request/header",
        {"config": {"provider": "p", "model": "m"}, "system": "", "tools": [], "prefix": [], "bogus": True},
        "data.bogus",
    ),
    ("request/header-delta", {"system": 5}, "data.system"),
    ("step/start", {"turn": 1, "step": 0}, "data.step"),
    ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "smoke"}}, "data.chunk.type"),
    ("tool/result", {"message": {"role": "tool"}}, "data.message.id"),
    ("prompt/blocked", {"queued_id": "q1", "reason": 1, "message": PROMPT}, "data.reason"),
]


def _inside_a_turn(event_type: str, data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A log where the variant sits on a middle line (line 4), inside turn 1, a closed turn after it."""
    answer = AssistantMessage(content=(Text("hi"),), provider="scripted", model="test")
    return [
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        (event_type, data),
        ("assistant/message", {"turn": 1, "step": 1, "message": answer.to_json()}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]


def _write_raw(root: Path, lines: list[str]) -> Path:
    path = root / "crafted" / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(line + "\n" for line in [json.dumps(HEADER), *lines]))
    return path


def _raw_events(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Event lines written with nothing but ``json`` (bypassing every check of the vocabulary)."""
    return [
        json.dumps({"type": kind, "seq": seq, "time": 1.0 + seq, "data": data})
        for seq, (kind, data) in enumerate(events)
    ]


@pytest.mark.parametrize(("event_type", "data", "field"), VARIANTS)
async def test_a_variant_is_refused_by_append_and_by_load_alike(
    harness: HarnessFactory, root: Path, event_type: str, data: dict[str, Any], field: str
) -> None:
    """Append refuses the event naming a field; load refuses it stored on line 4, naming file, line, type and
    the same field, and leaves the file as it was."""
    async with harness() as ctx:
        session = await ctx.sessions.create("live")
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        with pytest.raises(EventDataError) as refused:
            session.append(event_type, data)
    assert (refused.value.event_type, refused.value.field) == (event_type, field)
    path = _write_raw(root, _raw_events(_inside_a_turn(event_type, data)))
    before = path.read_bytes()
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError) as caught:
            await ctx.session_persistence.load("crafted")
    error = caught.value
    assert (error.path, error.line, error.event_type, error.field) == (path, 4, event_type, field)
    assert str(error).startswith(f"{path}:4: {event_type}: {field}")
    assert path.read_bytes() == before


async def test_a_variant_on_the_last_line_is_not_dropped(harness: HarnessFactory, root: Path) -> None:
    """A complete last line that breaks its rules is corruption: reported, never truncated away."""
    events = [*closed_turn(), ("inbox/queued", {})]
    path = _write_raw(root, _raw_events(events))
    before = path.read_bytes()
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError, match=r":7: inbox/queued: data\.id: missing") as caught:
            await ctx.session_persistence.load("crafted")
    assert caught.value.line == 7
    assert path.read_bytes() == before


async def test_seed_refuses_inbox_queued_without_fields(harness: HarnessFactory) -> None:
    """A seed with ``inbox/queued {}`` is refused at prepare, naming the field: no KeyError from the inbox."""
    async with harness() as ctx:
        with pytest.raises(EventDataError, match=r"inbox/queued: data\.id: missing") as caught:
            ctx.sessions.prepare("s", seed=[("inbox/queued", {})])
    assert caught.value.field == "data.id"


async def test_the_session_state_rules_are_checked_on_load(harness: HarnessFactory, root: Path) -> None:
    """Rules that depend on the log so far (turn order, a message of the wrong role) name their line too."""
    answer = AssistantMessage(content=(Text("hi"),), provider="scripted", model="test")
    events = [
        *closed_turn(),
        ("turn/start", {"turn": 1}),  # turn numbers only grow
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    path = _write_raw(root, _raw_events(events))
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError, match=r":7: turn/start: data\.turn: .*only grow") as caught:
            await ctx.session_persistence.load("crafted")
    assert (caught.value.line, caught.value.field) == (7, "data.turn")
    lines = [json.dumps(HEADER), *_raw_events([("user/message", {"message": answer.to_json()})])]
    path.write_text("".join(f"{line}\n" for line in lines))
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError, match=r":2: user/message: data\.message\.role") as caught:
            await ctx.session_persistence.load("crafted")
    assert caught.value.field == "data.message.role"


async def test_deep_nesting_on_a_middle_line_is_corruption(harness: HarnessFactory, root: Path) -> None:
    """A line nested 10,000 deep is an error naming its line, not a RecursionError."""
    events = closed_turn()
    events.insert(2, ("note/x", {"x": "NEST"}))
    lines = _raw_events(events)
    lines[2] = lines[2].replace('"NEST"', "[" * 10_000 + "]" * 10_000)  # line 4
    path = _write_raw(root, lines)
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError, match=r":4: nested too deeply") as caught:
            await ctx.session_persistence.load("crafted")
        assert caught.value.path == path
        with pytest.raises(SessionCorruptError, match=r":4: nested too deeply"):
            await ctx.session_persistence.read("crafted")


async def test_a_directory_in_place_of_the_log_is_named(harness: HarnessFactory, root: Path) -> None:
    """A directory where session.jsonl should be is an access error naming it, not "no stored session"."""
    path = root / "crafted" / "session.jsonl"
    path.mkdir(parents=True)
    async with harness() as ctx:
        assert await ctx.session_persistence.exists("crafted")
        for call in (ctx.session_persistence.load, ctx.session_persistence.read):
            with pytest.raises(SessionAccessError, match="is a directory, not a session log") as caught:
                await call("crafted")
            assert caught.value.path == path
            assert str(path) in str(caught.value)
        with pytest.raises(SessionNotFoundError):
            await ctx.session_persistence.load("elsewhere")


async def test_a_directory_in_place_of_the_lock_is_named(harness: HarnessFactory, root: Path) -> None:
    """A directory where the lock file should be is an access error naming the lock path."""
    path = write_log(root, closed_turn())
    (path.parent / "lock").mkdir()
    async with harness() as ctx:
        with pytest.raises(
            SessionAccessError, match="a directory stands where the lock file should be"
        ) as caught:
            await ctx.session_persistence.load("crafted")
    assert caught.value.path == path.parent / "lock"
    assert isinstance(caught.value.__cause__, IsADirectoryError)


#: loads a session in a process that may not read the file; prints the error's class, path and text
UNREADABLE = textwrap.dedent(
    """
    import sys
    import anyio
    from dsh_core import Harness
    from dsh_persistence_jsonl import PersistencePlugin

    async def main(root: str) -> None:
        config = {"plugins": {"persistence-jsonl": {"root": root}}}
        async with Harness(config=config, plugins=[PersistencePlugin()], autoload=False) as ctx:
            try:
                await ctx.session_persistence.read("crafted")
            except Exception as exc:
                print(type(exc).__name__, getattr(exc, "path", None), type(exc.__cause__).__name__, exc, sep="\\n")

    anyio.run(main, sys.argv[1])
    """
)


def test_an_unreadable_log_is_an_access_error(root: Path) -> None:
    """A log this process may not read is an access error naming it (a real EACCES: as root, the child
    runs without the capabilities that override file permissions)."""
    path = write_log(root, closed_turn())
    path.chmod(0o000)
    command = [sys.executable, "-c", UNREADABLE, str(root)]
    if os.geteuid() == 0:
        drop = "-dac_override,-dac_read_search"
        command = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    kind, where, cause, message = done.stdout.splitlines()[:4]
    assert (kind, where, cause) == ("SessionAccessError", str(path), "PermissionError")
    assert message.startswith(f"session 'crafted': cannot use {path}: Permission denied")


# ---------------------------------------------------------------------- the explicit repair


async def test_repair_cuts_before_the_first_damaged_line_and_keeps_a_backup(
    harness: HarnessFactory, root: Path
) -> None:
    """repair() copies the file aside byte for byte, cuts it at the first refused line, and the session then
    resumes (the turn the cut leaves open closed by crash repair)."""
    prompt = UserMessage(content=(Text("again"),))
    events = [
        *closed_turn(),
        ("turn/start", {"turn": 2}),
        ("user/message", {"message": prompt.to_json()}),
        ("tool/call", {"turn": 2}),  # line 9: refused
        ("turn/end", {"turn": 2, "reason": {"kind": "completed"}}),
    ]
    path = _write_raw(root, _raw_events(events))
    original = path.read_bytes()
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError):
            await ctx.session_persistence.load("crafted")
        report = await ctx.session_persistence.repair("crafted")
        assert (report.line, report.dropped_lines, report.events) == (9, 2, 7)
        assert report.backup is not None
        assert report.backup.parent == path.parent
        assert report.backup.name.startswith("session.jsonl.damaged-")
        assert report.backup.read_bytes() == original
        assert report.dropped_bytes == len(original) - len(path.read_bytes())
        assert report.problem is not None
        assert "tool/call: data.step" in report.problem
        assert original.startswith(path.read_bytes())
        assert log_lines(path) == original.split(b"\n")[:8]
        async with await ctx.agents.resume("crafted", agent_options=MODEL) as handle:
            kinds = [event.type for event in handle.agent.session.events]
        assert kinds[-3:] == ["turn/start", "user/message", "turn/end"]
        again = await ctx.session_persistence.repair("crafted")  # sound now: nothing cut
        assert (again.backup, again.line, again.dropped_lines) == (None, None, 0)
        await ctx.session_persistence.delete("crafted")
    assert not path.parent.exists()  # the backup went with the session


async def test_repair_cuts_what_only_the_whole_log_check_refuses(harness: HarnessFactory, root: Path) -> None:
    """A line that is not JSON after a line that breaks a rule: the cut is at the first of them."""
    lines = _raw_events([*closed_turn(), ("turn/start", {"turn": "two"}), ("note/x", {})])
    lines[-1] = "garbage"
    path = _write_raw(root, lines)
    async with harness() as ctx:
        report = await ctx.session_persistence.repair("crafted")
        loaded = await ctx.session_persistence.load("crafted")
    assert (report.line, report.dropped_lines) == (7, 2)
    assert len(loaded.events) == 5
    assert len(log_lines(path)) == 6


async def test_repair_refuses_a_damaged_header_and_a_live_session(
    harness: HarnessFactory, root: Path
) -> None:
    """With the header gone there is nothing to keep; a live session is not cut under its writer."""
    path = write_log(root, closed_turn(), header={**HEADER, "id": 5})
    before = path.read_bytes()
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError, match=":1: the header is damaged"):
            await ctx.session_persistence.repair("crafted")
        assert path.read_bytes() == before
        assert list(path.parent.glob("session.jsonl.damaged-*")) == []
        await ctx.sessions.create("live")
        with pytest.raises(SessionInUseError, match="dispose it before repairing it"):
            await ctx.session_persistence.repair("live")
        with pytest.raises(SessionNotFoundError):
            await ctx.session_persistence.repair("nobody")
