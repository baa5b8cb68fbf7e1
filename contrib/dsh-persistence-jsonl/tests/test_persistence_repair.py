"""load() is strict: only a torn tail (a last line without its newline) is dropped, an open turn is closed by
appending, anything else is an error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from dsh_persistence_jsonl import SessionCorruptError, SessionFormatError

from dsh_core import SessionEvent, Text, ToolExecution, ToolResultMessage, UserMessage, tool
from dsh_core.testing import Reply, ScriptedModel
from dsh_core.vocabulary import AssistantMessage, ToolCall

from .persistence_kit import MODEL, HarnessFactory, log_lines, stored_events

pytestmark = pytest.mark.anyio

HEADER = {
    "format": 1,
    "id": "crafted",
    "created": 1700000000.0,
    "cwd": None,
    "parent_id": None,
    "seed_length": 0,
    "meta": {"cwd": None, "parent_id": None, "seed_length": 0, "extra": {}},
}


def write_log(
    root: Path, events: list[tuple[str, dict[str, Any]]], *, header: dict[str, Any] | None = None
) -> Path:
    """A log file written by hand: the header, then one line per (type, data), numbered from 0."""
    path = root / "crafted" / "session.jsonl"
    path.parent.mkdir(parents=True)
    lines = [json.dumps(header or HEADER)]
    for seq, (event_type, data) in enumerate(events):
        lines.append(json.dumps(SessionEvent(event_type, seq, 1700000000.0 + seq, data).to_json()))
    path.write_text("".join(line + "\n" for line in lines))
    return path


def closed_turn() -> list[tuple[str, dict[str, Any]]]:
    prompt = UserMessage(content=(Text("hello"),))
    answer = AssistantMessage(content=(Text("hi"),), provider="scripted", model="test")
    return [
        ("turn/start", {"turn": 1}),
        ("user/message", {"message": prompt.to_json()}),
        ("step/start", {"turn": 1, "step": 1}),
        ("assistant/message", {"turn": 1, "step": 1, "message": answer.to_json()}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]


# ---------------------------------------------------------------------- the tail


@pytest.mark.parametrize(
    "tail",
    [
        b'{"type":"note/x","seq":5,"ti',  # a write cut short
        b'{"type":"note/x","seq":5,"time":1.0,"data":{}}',  # complete JSON, but no newline: never acknowledged
        b"\x00" * 64,  # zeros after a power loss
        b"garbage",  # whatever it holds: without its newline the line was never acknowledged
    ],
)
async def test_torn_last_line_is_truncated(harness: HarnessFactory, root: Path, tail: bytes) -> None:
    """A torn last line is cut off (durably), and nothing before it changes."""
    path = write_log(root, closed_turn())
    good = path.read_bytes()
    path.write_bytes(good + tail)
    async with harness() as ctx:
        loaded = await ctx.session_persistence.load("crafted")
    assert loaded.truncated == len(tail)
    assert loaded.repaired == ()
    assert [event.type for event in loaded.events] == [event_type for event_type, _ in closed_turn()]
    assert path.read_bytes() == good


async def test_corruption_before_the_last_line_names_file_and_line(
    harness: HarnessFactory, root: Path
) -> None:
    """A damaged line in the middle is an error naming the file and line; the file is left byte for byte."""
    path = write_log(root, closed_turn())
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3][:20]  # line 4: the step/start event, cut
    path.write_bytes(b"\n".join(lines) + b'{"type":"note/x"')  # plus a torn tail: still not repaired
    before = path.read_bytes()
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError, match=r"session\.jsonl:4: not JSON") as caught:
            await ctx.session_persistence.load("crafted")
    assert caught.value.line == 4
    assert caught.value.path == path
    assert str(path) in str(caught.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"type":"note/x","seq":7,"time":1.0,"data":{}}', "has seq 7 but is event 5"),
        ('{"type":"note/x","seq":5,"time":1.0,"data":[]}', "event.data"),
        ('{"type":"","seq":5,"time":1.0,"data":{}}', "event.type"),
        ('{"type":"note/x","seq":5,"time":1.0,"data":{},"extra":1}', "extra"),
        ('{"type":"note/x","seq":5,"time":1.0,"data":{"x":NaN}}', "not JSON"),
        ("garbage", "not JSON"),  # complete (it has its newline), so fsynced and acknowledged
        ("\x00\x00\x00", "not JSON"),
        ('{"type":"turn/start","seq":5,"time":1.0,"data":{"turn":"one"}}', r"turn/start: data\.turn"),
    ],
)
async def test_a_bad_event_on_the_last_line_is_corruption(
    harness: HarnessFactory, root: Path, line: str, problem: str
) -> None:
    """A complete last line that is not a valid next event is corruption, never a torn tail: never dropped."""
    path = write_log(root, closed_turn())
    path.write_bytes(path.read_bytes() + line.encode() + b"\n")
    before = path.read_bytes()
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError, match=problem) as caught:
            await ctx.session_persistence.load("crafted")
    assert caught.value.line == 7
    assert path.read_bytes() == before


async def test_unknown_format_version_is_refused(harness: HarnessFactory, root: Path) -> None:
    """A header of another format version is refused with a message saying what to do."""
    path = write_log(root, closed_turn(), header={**HEADER, "format": 2})
    async with harness() as ctx:
        with pytest.raises(SessionFormatError, match=r"format 2.*reads format 1 only.*upgrade") as caught:
            await ctx.session_persistence.load("crafted")
    assert caught.value.version == 2
    assert caught.value.path == path


async def test_damaged_header_is_corruption_on_line_one(harness: HarnessFactory, root: Path) -> None:
    """A header that is not one is an error on line 1."""
    write_log(root, closed_turn(), header={**HEADER, "id": 5})
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError, match=":1: the header is damaged: id") as caught:
            await ctx.session_persistence.load("crafted")
    assert caught.value.line == 1


async def test_unknown_event_types_are_kept(harness: HarnessFactory, root: Path) -> None:
    """Events of types this version does not know are loaded as they are (forward compatible)."""
    events = [*closed_turn(), ("future/feature", {"anything": [1, {"deep": None}]})]
    write_log(root, events)
    async with harness() as ctx:
        loaded = await ctx.session_persistence.load("crafted")
    assert loaded.events[-1].type == "future/feature"
    assert loaded.events[-1].to_json()["data"] == {"anything": [1, {"deep": None}]}


# ---------------------------------------------------------------------- open turns


def open_tool_turn() -> list[tuple[str, dict[str, Any]]]:
    """A turn cut off in its second step: three tool calls, one finished, one running, one not started."""
    prompt = UserMessage(content=(Text("do three things"),))
    calls = (ToolCall("c1", "one", "{}"), ToolCall("c2", "two", '{"x": 1}'), ToolCall("c3", "three", "{}"))
    reply = AssistantMessage(content=(Text("on it"), *calls), provider="scripted", model="test")
    done = ToolResultMessage(call_id="c1", content=(Text("done"),))
    return [
        *closed_turn(),
        ("inbox/queued", {"id": "q1", "kind": "send", "message": prompt.to_json()}),
        ("turn/start", {"turn": 2}),
        ("user/message", {"message": prompt.to_json(), "queued_id": "q1"}),
        ("step/start", {"turn": 2, "step": 1}),
        ("assistant/message", {"turn": 2, "step": 1, "message": reply.to_json()}),
        ("tool/call", {"turn": 2, "step": 1, "call_id": "c1", "name": "one", "arguments": "{}"}),
        ("tool/result", {"turn": 2, "step": 1, "message": done.to_json()}),
        ("tool/call", {"turn": 2, "step": 1, "call_id": "c2", "name": "two", "arguments": '{"x": 1}'}),
    ]


async def test_open_turn_is_closed_by_appended_repair_events(harness: HarnessFactory, root: Path) -> None:
    """Open calls get TOOL_OUTCOME_UNKNOWN, unstarted ones a TOOL_NOT_STARTED pair, then turn/end interrupted."""
    path = write_log(root, open_tool_turn())
    before = path.read_bytes()
    async with harness() as ctx:
        loaded = await ctx.session_persistence.load("crafted")
    repaired = [(event.type, dict(event.data)) for event in loaded.repaired]
    assert [kind for kind, _ in repaired] == ["tool/result", "tool/call", "tool/result", "turn/end"]
    unknown, call, not_started, end = (data for _, data in repaired)
    assert unknown["error_code"] == "TOOL_OUTCOME_UNKNOWN"
    assert unknown["message"]["call_id"] == "c2"
    assert unknown["message"]["is_error"] is True
    text = unknown["message"]["content"][0]["text"]
    assert "unknown" in text
    assert "only if the call is idempotent" in text
    assert call == {"turn": 2, "step": 1, "call_id": "c3", "name": "three", "arguments": "{}"}
    assert not_started["error_code"] == "TOOL_NOT_STARTED"
    assert not_started["message"]["call_id"] == "c3"
    assert end == {"turn": 2, "reason": {"kind": "interrupted"}}
    assert [event.seq for event in loaded.events] == list(range(len(loaded.events)))
    assert loaded.repaired[0].time == loaded.events[len(open_tool_turn()) - 1].time
    # Appended, never rewritten: the old bytes are a prefix, and the new lines are durable.
    assert path.read_bytes().startswith(before)
    assert stored_events(path) == list(loaded.events)
    async with harness() as ctx:
        again = await ctx.session_persistence.load("crafted")
    assert again.events == loaded.events
    assert again.repaired == ()


async def test_open_turn_without_tool_calls_just_ends(harness: HarnessFactory, root: Path) -> None:
    """A turn cut off while the model streamed ends interrupted, with nothing else added."""
    prompt = UserMessage(content=(Text("hi"),))
    write_log(
        root,
        [
            ("turn/start", {"turn": 1}),
            ("user/message", {"message": prompt.to_json()}),
            ("step/start", {"turn": 1, "step": 1}),
        ],
    )
    async with harness() as ctx:
        loaded = await ctx.session_persistence.load("crafted")
    assert [(e.type, dict(e.data)) for e in loaded.repaired] == [
        ("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}})
    ]


async def test_torn_tail_and_open_turn_are_repaired_together(harness: HarnessFactory, root: Path) -> None:
    """The torn tail goes first, then the repair events follow the last complete line."""
    path = write_log(root, open_tool_turn())
    good = path.read_bytes()
    path.write_bytes(good + b'{"type":"tool/res')
    async with harness() as ctx:
        loaded = await ctx.session_persistence.load("crafted")
    assert loaded.truncated == len(b'{"type":"tool/res')
    assert len(loaded.repaired) == 4
    assert path.read_bytes().startswith(good)
    assert stored_events(path) == list(loaded.events)


async def test_malformed_message_in_the_open_turn_names_its_line(harness: HarnessFactory, root: Path) -> None:
    """An open turn that cannot be understood is not guessed at: an error naming the line, file unchanged."""
    events = open_tool_turn()
    events[9] = ("assistant/message", {"turn": 2, "step": 1, "message": {"role": "assistant"}})
    path = write_log(root, events)
    before = path.read_bytes()
    async with harness() as ctx:
        with pytest.raises(SessionCorruptError, match=r":11: assistant/message: data\.message\.id") as caught:
            await ctx.session_persistence.load("crafted")
    assert caught.value.line == 11
    assert path.read_bytes() == before


async def test_repaired_session_resumes_with_a_valid_request(harness: HarnessFactory, root: Path) -> None:
    """After repair every tool call has a result, so the next request is valid and tells the model."""
    write_log(root, open_tool_turn())
    model = ScriptedModel([ScriptedModel.text("I will check c2 first")])
    async with harness(model) as ctx, await ctx.agents.resume("crafted", agent_options=MODEL) as handle:
        outcome = await handle.agent.run("what happened?")
        turns = [e.data["turn"] for e in handle.agent.session.events if e.type == "turn/start"]
    assert outcome.kind == "completed"
    assert turns == [1, 2, 3]
    messages = model.requests[0].messages
    _assert_every_call_answered(messages)
    results = {m.call_id: m.content[0].text for m in messages if isinstance(m, ToolResultMessage)}  # type: ignore[union-attr]
    assert results["c1"] == "done"
    assert "outcome of the tool call two (c2) is unknown" in results["c2"]
    assert "was not started" in results["c3"]


def _assert_every_call_answered(messages: Any) -> None:
    """Each assistant tool call is followed, before the next assistant message, by its result."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            assert not open_calls, f"calls without results: {open_calls}"
            open_calls = {block.id for block in message.content if isinstance(block, ToolCall)}
        elif isinstance(message, ToolResultMessage):
            open_calls.discard(message.call_id)
    assert not open_calls, f"calls without results: {open_calls}"


# ---------------------------------------------------------------------- a real agent cut off mid-tool


async def test_crash_image_taken_mid_tool_resumes_repaired(
    harness: HarnessFactory, root: Path, tmp_path: Path
) -> None:
    """The log as it stands while two parallel tools run (one more waiting) resumes repaired and valid."""
    image = tmp_path / "crash-image"
    started = 0
    release = anyio.Event()

    @tool(parallel_safe=True)
    async def fetch(execution: ToolExecution, url: str) -> str:
        """Fetch a URL."""
        nonlocal started
        started += 1
        if started == 2:  # both parallel calls are running: take the image the disk holds now
            ctx = execution.ctx
            assert ctx is not None
            await ctx.sessions.flush(ctx.sessions.get(execution.session_id))
            shutil.copytree(root / "job", image / "job")
            release.set()
        await release.wait()
        return f"fetched {url}"

    @tool
    def store(key: str) -> str:
        """Store a value."""
        return "stored"

    reply = Reply(
        ScriptedModel.call("fetch", {"url": "a"}),
        ScriptedModel.call("fetch", {"url": "b"}),
        ScriptedModel.call("store", {"key": "k"}),
    )
    model = ScriptedModel([reply, ScriptedModel.text("all done")])
    async with harness(model) as ctx:
        ctx.tools.register(fetch)
        ctx.tools.register(store)
        async with await ctx.agents.create("job", agent_options=MODEL) as handle:
            with anyio.fail_after(10):
                await handle.agent.run("fetch a and b, then store")

    after = ScriptedModel([ScriptedModel.text("I will retry the fetches, they are idempotent")])
    async with harness(after, root_dir=image) as ctx:
        ctx.tools.register(fetch)
        ctx.tools.register(store)
        loaded = await ctx.session_persistence.load("job")
        codes = [e.data.get("error_code") for e in loaded.repaired if e.type == "tool/result"]
        assert codes == ["TOOL_OUTCOME_UNKNOWN", "TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"]
        assert loaded.repaired[-1].data == {"turn": 1, "reason": {"kind": "interrupted"}}
        async with await ctx.agents.resume("job", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("status?")
    assert outcome.kind == "completed"
    messages = after.requests[0].messages
    _assert_every_call_answered(messages)
    assert "is unknown" in messages[2].content[0].text  # type: ignore[union-attr]
    assert log_lines(image / "job" / "session.jsonl")[0] == log_lines(root / "job" / "session.jsonl")[0]


async def test_read_views_an_open_turn_without_writing_or_locking(harness: Any, root: Path) -> None:
    """read() shows the repaired log but leaves the file byte for byte as it was, and takes no lock."""
    async with harness() as ctx:
        session = await ctx.sessions.create("open")
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
    path = root / "open" / "session.jsonl"
    before = path.read_bytes()
    async with harness() as ctx:
        viewed = await ctx.session_persistence.read("open")
        again = await ctx.session_persistence.read("open")  # no lock was kept by the first read
        assert path.read_bytes() == before  # nothing written by read()
        loaded = await ctx.session_persistence.load("open")  # and load can still take it
    assert [event.type for event in viewed.events] == ["turn/start", "turn/end"]
    assert viewed.events[-1].data["reason"] == {"kind": "interrupted"}
    assert again.events == viewed.events
    assert loaded.events == viewed.events
    assert path.read_bytes() != before  # load (not read) appended the repair
