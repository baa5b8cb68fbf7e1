"""The session-log catalogue: one payload class per event type, one set of rules, one serialisation."""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tests.strategies as s
from dsh_core import Context, EventDataError, Harness, SessionEvent, SurfaceOp
from dsh_core._catalog_doc import render_session_log
from dsh_core.llm import Failure, Finish, LlmCallConfig, TextDelta, ToolCallDelta, Usage
from dsh_core.session_log import (
    CONSUMING_EVENT_TYPES,
    SURFACE_EVENT_TYPES,
    ApprovalRequestedEvent,
    ApprovalResolvedEvent,
    AssistantChunkEvent,
    AssistantMessageEvent,
    ContextMessageEvent,
    InboxClearedEvent,
    InboxQueuedEvent,
    LogEvent,
    PromptBlockedEvent,
    RequestHeaderDeltaEvent,
    RequestHeaderEvent,
    SteeringMessageEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
    declared_types,
    log_event,
    read_payload,
)
from dsh_core.vocabulary import (
    AssistantMessage,
    FrozenDict,
    Reasoning,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    dumps_json,
    loads_json,
)

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "session-log.md"
GOLDEN = Path(__file__).resolve().parent / "golden" / "session-log.jsonl"

USER = UserMessage("hello", {"kind": "user"}, "u1")
SCHEMA = {"name": "read", "description": "Read a file", "parameters": {"type": "object"}}
CALL = ToolCall("c1", "read", '{"path": "a.txt"}')
REPLY = AssistantMessage((Reasoning("think", "sig"), Text("looking"), CALL), "scripted", "m", "a1")
RESULT = ToolResultMessage("c1", "contents", False, "t1")
USAGE = Usage(10, 5, 2, 1, 3)

#: One payload of every core type, as the loop writes them (the golden file holds their data).
SAMPLES: list[LogEvent] = [
    TurnStartEvent(turn=1),
    InboxQueuedEvent(id="q1", kind="send", message=USER),
    UserMessageEvent(message=USER, queued_id="q1"),
    UserMessageEvent(message=UserMessage("summary", {"kind": "compaction"}, "u2"), surface=SurfaceOp.replace(0, 3)),
    PromptBlockedEvent(queued_id="q2", reason="not now", message=UserMessage("later", id="u3")),
    ContextMessageEvent(message=UserMessage("note", {"kind": "context"}, "u4")),
    ContextMessageEvent(message=UserMessage("idle", {"kind": "context"}, "u5"), queued_id="q3"),
    SteeringMessageEvent(message=UserMessage("faster", {"kind": "steering"}, "u6"), queued_id="q4"),
    StepStartEvent(turn=1, step=1),
    RequestHeaderEvent(
        config=LlmCallConfig("scripted", "m", 100, 0.5, "high"), system="be brief", tools=(SCHEMA,), prefix=(USER,)
    ),
    RequestHeaderDeltaEvent(system="be briefer"),
    RequestHeaderDeltaEvent(config=LlmCallConfig("scripted", "n"), tools=(), prefix=()),
    AssistantChunkEvent(turn=1, step=1, chunk=TextDelta(0, "look")),
    AssistantChunkEvent(turn=1, step=1, chunk=ToolCallDelta(1, "c1", "read", "{}")),
    AssistantChunkEvent(turn=1, step=1, chunk=USAGE),
    AssistantChunkEvent(turn=1, step=1, chunk=Finish("error", Failure("slow down", "RATE_LIMIT", 429, 1.5))),
    AssistantMessageEvent(turn=1, step=1, message=REPLY, usage=USAGE),
    AssistantMessageEvent(turn=1, step=2, message=AssistantMessage((Text("half"),), id="a2"), interrupted=True),
    ToolCallEvent(turn=1, step=1, call_id="c1", name="read", arguments='{"path": "a.txt"}'),
    ToolResultEvent(turn=1, step=1, message=RESULT),
    ToolResultEvent(
        turn=1, step=1, message=ToolResultMessage("c2", "denied", True, "t2"), error_code="DENIED"
    ),
    InboxClearedEvent(ids=("q5", "q6")),
    ApprovalRequestedEvent(call_id="c3", tool="bash", arguments={"command": "make"}, reason="ask bash(make*)"),
    ApprovalResolvedEvent(call_id="c3", decision="once", arguments={"command": "make -j2"}, by="cli"),
    ApprovalResolvedEvent(call_id="c4", decision="deny", reason="run the tests first", by="serve"),
    TurnEndEvent(turn=1, reason=TurnEnd("completed")),
    TurnEndEvent(turn=2, reason=TurnEnd("error", failure=Failure("boom", "SERVER", 500))),
    TurnEndEvent(turn=3, reason=TurnEnd("stopped", reason="enough")),
    TurnEndEvent(turn=4, reason=TurnEnd("interrupted")),
]

CORE = [spec for spec in declared_types() if spec.module.startswith("dsh_core.session_log.")]


def golden_lines() -> list[str]:
    return [dumps_json({"type": sample.type, "data": sample.to_data()}) for sample in SAMPLES]


# ---------------------------------------------------------------------- the catalogue


def test_every_core_type_of_spec_section_3_is_declared_once() -> None:
    """The catalogue declares exactly the types SPEC §3 lists, plus the inbox and approval records (§10.1)."""
    assert {spec.type for spec in CORE} == {
        "approval/requested",
        "approval/resolved",
        "turn/start",
        "user/message",
        "prompt/blocked",
        "step/start",
        "request/header",
        "request/header-delta",
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/result",
        "context/message",
        "steering/message",
        "turn/end",
        "inbox/queued",
        "inbox/cleared",
    }
    assert SURFACE_EVENT_TYPES == {
        "user/message",
        "assistant/message",
        "tool/result",
        "context/message",
        "steering/message",
    }
    assert CONSUMING_EVENT_TYPES == {"user/message", "steering/message", "context/message", "prompt/blocked"}
    assert all(spec.doc for spec in CORE)
    assert {type(sample) for sample in SAMPLES} == {spec.cls for spec in CORE}


def test_docs_session_log_page_is_current() -> None:
    """docs/session-log.md is regenerated whenever the catalogue changes."""
    assert DOCS.read_text(encoding="utf-8") == render_session_log(), (
        "docs/session-log.md is stale: run `python -m dsh_core session-log > docs/session-log.md`"
    )


def _string_literals(path: Path) -> Iterator[tuple[int, object]]:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    for token in tokens:
        if token.type == tokenize.STRING:
            try:
                yield token.start[0], ast.literal_eval(token.string)
            except ValueError:  # an f-string: its text is checked as written
                yield token.start[0], token.string


def test_no_module_outside_the_catalogue_spells_a_core_event_type() -> None:
    """Writers and readers name core types by their payload class (``TurnStartEvent.type``)."""
    core = {spec.type for spec in CORE}
    sources = [*ROOT.glob("dsh_core/**/*.py"), *ROOT.glob("dsh_agent_loop/**/*.py"), *ROOT.glob("contrib/*/dsh_*/**/*.py")]
    # every writer and reader is searched: the core, the loop and each contrib plugin's package
    parts = [path.relative_to(ROOT).parts for path in sources]
    assert {"session_log", "vocabulary", "services"} <= {part[1] for part in parts if part[0] == "dsh_core"}
    assert any(part[0] == "dsh_agent_loop" for part in parts)
    plugins = {path.name for path in (ROOT / "contrib").iterdir() if any(path.glob("dsh_*/__init__.py"))}
    assert len(plugins) >= 10
    assert plugins <= {part[1] for part in parts if part[0] == "contrib"}
    spelled = []
    for path in sources:
        if path == ROOT / "dsh_core" / "session_log" / "_catalogue.py":
            continue
        for line, value in _string_literals(path):
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            if not isinstance(text, str):
                continue
            if text in core or any(f'"{name}"' in text for name in core):
                spelled.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert spelled == []


# ---------------------------------------------------------------------- JSON shapes


def test_golden_file_holds_the_data_of_every_event_type() -> None:
    """Each core type's data, byte for byte as the loop wrote it before the catalogue (SPEC §7)."""
    assert GOLDEN.read_text(encoding="utf-8").splitlines() == golden_lines(), (
        f"the JSON of a session-log event changed; if that is intended, regenerate {GOLDEN.name}"
    )


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda sample: sample.type)
def test_payload_round_trips_through_json_text(sample: LogEvent) -> None:
    """to_data() -> JSON text -> from_data() gives back an equal payload; optional keys are left out."""
    text = dumps_json(sample.to_data())
    parsed = loads_json(text, where=sample.type)
    assert type(sample).from_data(parsed) == sample  # type: ignore[arg-type]
    assert read_payload(sample.type, parsed) == sample  # type: ignore[arg-type]
    if sample.type == "approval/resolved":  # SPEC §10.1 spells its keys out: reason and arguments may be null
        assert set(parsed) == {"call_id", "decision", "reason", "arguments", "by"}  # type: ignore[arg-type]
    else:
        assert None not in parsed.values()  # type: ignore[union-attr]


@settings(max_examples=60, deadline=None)
@given(s.user_messages, s.assistant_messages, s.tool_result_messages, st.integers(1, 9), st.booleans())
def test_any_visible_payload_round_trips(
    user: UserMessage, reply: AssistantMessage, result: ToolResultMessage, turn: int, flag: bool
) -> None:
    """Payloads built from any message read back equal from their own data."""
    payloads: list[LogEvent] = [
        UserMessageEvent(message=user, queued_id="q" if flag else None),
        AssistantMessageEvent(turn=turn, step=turn, message=reply, interrupted=flag),
        ToolResultEvent(turn=turn, step=1, message=result, error_code="TIMEOUT" if flag else None),
        InboxQueuedEvent(id="q", kind="steer", message=user),
    ]
    for payload in payloads:
        assert type(payload).from_data(payload.to_data()) == payload


@pytest.mark.parametrize(
    ("event_type", "data", "field", "match"),
    [
        ("tool/call", {"turn": 1}, "data.step", "expected a step number"),
        ("tool/call", {"turn": 1, "step": 1, "call_id": "c", "name": "n"}, "data.arguments", "missing"),
        ("turn/end", {"turn": 1, "reason": 5}, "data.reason", "expected a JSON object"),
        ("turn/end", {"turn": 1, "reason": {"kind": "later"}}, "data.reason.kind", "'later' is not valid"),
        ("request/header", {"bogus": True}, "data.config", "missing"),
        ("inbox/queued", {}, "data.id", "missing"),
        ("inbox/queued", {"id": "q", "kind": "send", "message": "x"}, "data.message", "JSON object"),
        ("inbox/cleared", {"ids": [1]}, "data.ids[0]", "expected a string"),
        ("user/message", {"message": 5}, "data.message", "JSON object"),
        ("user/message", {"message": {"role": "user", "content": []}}, "data.message.id", "missing"),
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "beep"}}, "data.chunk.type", "unknown chunk"),
        ("step/start", {"turn": 1, "step": 1, "extra": 0}, "data.extra", "unknown field"),
    ],
)
def test_stored_data_breaking_its_rules_names_type_and_field(
    event_type: str, data: dict[str, Any], field: str, match: str
) -> None:
    """read_payload (what append and the seeding of a stored log run) names the type and the field."""
    with pytest.raises(EventDataError, match=match) as caught:
        read_payload(event_type, data)
    assert caught.value.event_type == event_type
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{event_type}: {field}: ")


def test_an_undeclared_type_is_free_json() -> None:
    assert read_payload("note/anything", {"x": [1, {"y": None}]}) is None


def test_payload_constructors_check_python_types() -> None:
    """A payload refuses a wrong value when it is built, naming the field and what was wrong."""
    with pytest.raises(ValueError, match=r"TurnStartEvent.turn must be an int >= 1, got 0"):
        TurnStartEvent(turn=0)
    with pytest.raises(TypeError, match=r"'message' must be <class '.*UserMessage'> \(got .* that is a <class 'dict'>\)"):
        UserMessageEvent(message={"role": "user"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"'chunk' must be \(<class '.*TextDelta'>"):
        AssistantChunkEvent(turn=1, step=1, chunk="hi")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'error_code' must be in \('ABORTED',.* \(got 'OOPS'\)"):
        ToolResultEvent(message=RESULT, error_code="OOPS")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'kind' must be in \('aborted', .* \(got 'paused'\)"):
        TurnEnd("paused")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- appending


async def _session(ctx: Context, name: str = "s") -> Any:
    return await ctx.sessions.create(name)


async def test_typed_and_raw_appends_store_the_same_event(dsh_ctx: Context) -> None:
    """append(payload) and append(type, data) give equal events, in the same JSON text."""
    typed, raw = await _session(dsh_ctx, "typed"), await _session(dsh_ctx, "raw")
    for sample in SAMPLES:
        if isinstance(sample, UserMessageEvent) and sample.surface.op == "replace":
            continue  # needs a surface to replace: covered below
        if isinstance(sample, TurnEndEvent) and sample.turn != 1:
            continue  # only turn 1 is open
        left = typed.append(sample)
        right = raw.append(sample.type, loads_json(dumps_json(sample.to_data()), where="test"))  # type: ignore[arg-type]
        assert (left.type, left.seq, left.data) == (right.type, right.seq, right.data)
        assert dumps_json(left.data) == dumps_json(right.data)
        assert type(left.data) is FrozenDict
        assert left.payload is sample
        assert right.payload == sample
    assert typed.derive_messages() == raw.derive_messages()
    assert typed.open_turn == raw.open_turn


async def test_derived_view_holds_the_appended_message_itself(dsh_ctx: Context) -> None:
    """A typed append folds the payload's own message into the view: nothing is parsed back."""
    session = await _session(dsh_ctx)
    session.append(UserMessageEvent(message=USER))
    session.append(AssistantMessageEvent(turn=1, step=1, message=REPLY))
    session.append(ToolResultEvent(turn=1, step=1, message=RESULT))
    derived = session.derive_messages()
    assert [message is original for message, original in zip(derived, (USER, REPLY, RESULT), strict=True)] == [
        True,
        True,
        True,
    ]


async def test_typed_surface_replace_and_turn_checks(dsh_ctx: Context) -> None:
    """A payload's surface op and turn number are checked against the session like raw data."""
    session = await _session(dsh_ctx)
    for text in ("a", "b", "c"):
        session.append(UserMessageEvent(message=UserMessage(text)))
    summary = UserMessage("sum", {"kind": "compaction"})
    session.append(UserMessageEvent(message=summary, surface=SurfaceOp.replace(0, 2)))
    assert [m.text for m in session.derive_messages()] == ["sum", "c"]
    with pytest.raises(EventDataError, match="do not exist") as caught:
        session.append(UserMessageEvent(message=summary, surface=SurfaceOp.replace(0, 9)))
    assert caught.value.field == "data.surface"
    session.append(TurnStartEvent(turn=1))
    with pytest.raises(EventDataError, match="while turn 1 is open"):
        session.append(TurnStartEvent(turn=2))
    session.append(TurnEndEvent(turn=1, reason=TurnEnd("completed")))
    with pytest.raises(EventDataError, match="no turn is open"):
        session.append(TurnEndEvent(turn=1, reason=TurnEnd("completed")))
    assert len(session.events) == 6


async def test_a_typed_append_serialises_when_data_is_first_read(dsh_ctx: Context) -> None:
    """The event's data is built from the payload once, on first read, and then kept."""
    session = await _session(dsh_ctx)
    event = session.append(ToolCallEvent(turn=1, step=1, call_id="c", name="n", arguments="{}"))
    first = event.data
    assert first == {"turn": 1, "step": 1, "call_id": "c", "name": "n", "arguments": "{}"}
    assert event.data is first
    assert attrs.evolve(event, seq=9).data is first
    assert SessionEvent.from_json(event.to_json()) == event


async def test_append_refuses_a_payload_with_data(dsh_ctx: Context) -> None:
    session = await _session(dsh_ctx)
    with pytest.raises(TypeError, match="carries its own data"):
        session.append(TurnStartEvent(turn=1), {"turn": 1})  # type: ignore[call-overload]
    assert len(session.events) == 0


async def test_crash_repair_reason_interrupted_is_a_turn_end_reason(dsh_ctx: Context) -> None:
    """turn/end {kind: interrupted} (written by crash repair) reads and appends like any reason."""
    session = await _session(dsh_ctx)
    session.append(TurnStartEvent(turn=1))
    event = session.append("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}})
    assert event.payload == TurnEndEvent(turn=1, reason=TurnEnd("interrupted"))
    seeded = dsh_ctx.sessions.prepare("copy", seed=session.events)
    assert seeded.open_turn is None


async def test_a_seeded_event_breaking_its_rules_is_refused(dsh_ctx: Context) -> None:
    """Events given as a seed (a loaded log) are checked by the same rules, naming the field."""
    with pytest.raises(EventDataError, match=r"tool/call: data.step") as caught:
        dsh_ctx.sessions.prepare("bad", seed=[SessionEvent("tool/call", 0, 0.0, {"turn": 1})])
    assert caught.value.field == "data.step"


# ---------------------------------------------------------------------- a plugin's own types


@log_event("testplugin/mark")
@attrs.frozen(kw_only=True)
class MarkEvent(LogEvent):
    """A test plugin's own event: a label and an optional count."""

    label: str
    count: int | None = attrs.field(default=None, metadata={})


async def test_a_plugin_declares_its_own_type_the_same_way() -> None:
    """A plugin's type is appended typed or raw, and its raw data is checked by its rules."""
    async with Harness(autoload=False) as ctx:
        session = await ctx.sessions.create("p")
        event = session.append(MarkEvent(label="x"))
        assert event.type == "testplugin/mark"
        assert event.data == {"label": "x", "count": None}
        raw = session.append("testplugin/mark", {"label": "y", "count": 2})
        assert raw.payload == MarkEvent(label="y", count=2)
        with pytest.raises(EventDataError, match=r"testplugin/mark: data.label: missing"):
            session.append("testplugin/mark", {"count": 2})
        assert len(session.events) == 2


@log_event("testplugin/note", visible=True)
@attrs.frozen(kw_only=True)
class VisibleNoteEvent(LogEvent):
    """A test plugin's own model-visible type (declared after the session module was imported)."""

    message: UserMessage
    surface: SurfaceOp = attrs.field(default=SurfaceOp.append(), metadata={})


async def test_a_plugin_visible_type_appended_as_a_payload_joins_the_surface() -> None:
    """A model-visible type declared by a plugin is folded into the derived messages when appended
    as a payload, as when appended as a type and its data."""
    async with Harness(autoload=False) as ctx:
        session = await ctx.sessions.create("p")
        session.append(VisibleNoteEvent(message=UserMessage(content="typed")))
        session.append("testplugin/note", {"message": UserMessage(content="raw").to_json()})
        assert [message.text for message in session.derive_messages()] == ["typed", "raw"]  # type: ignore[union-attr]
        assert len(session.surface) == 2


def test_a_type_cannot_be_declared_twice() -> None:
    from dsh_core import DuplicateRegistrationError

    with pytest.raises(DuplicateRegistrationError, match="already declared"):

        @log_event("turn/start")
        @attrs.frozen(kw_only=True)
        class Impostor(LogEvent):
            """Not the real one."""

            turn: int


# ---------------------------------------------------------------------- append_unchecked


async def test_append_unchecked_gives_the_event_append_would() -> None:
    """An event appended from field values reads as the same payload and data as one appended typed;
    its payload is built once, when first read, and listeners hear it."""
    heard: list[Any] = []

    class Reader:
        from dsh_core import hookimpl

        @hookimpl
        def dsh_session_event(self, event: SessionEvent) -> None:
            heard.append((event.type, event.data))

    async with Harness(autoload=False, plugins=[Reader()]) as ctx:
        session = await ctx.sessions.create("u")
        delta = TextDelta(0, "hi")
        typed = session.append(AssistantChunkEvent(turn=1, step=2, chunk=delta))
        quiet = session.append_unchecked(AssistantChunkEvent, 1, 2, delta)
        assert (quiet.type, quiet.seq) == ("assistant/chunk", 1)
        assert quiet.payload == typed.payload == AssistantChunkEvent(turn=1, step=2, chunk=delta)
        assert quiet.payload is quiet.payload
        assert quiet.data == typed.data
        assert heard == [("assistant/chunk", typed.data)] * 2


async def test_append_unchecked_with_listeners_off_builds_the_payload_when_read() -> None:
    """With nobody listening the payload waits; reading data or payload later gives the right values."""
    async with Harness(autoload=False) as ctx:
        session = await ctx.sessions.create("u")
        for _ in range(2):  # the second append takes the deferring path (the class is known by then)
            event = session.append_unchecked(AssistantChunkEvent, 3, 4, TextDelta(1, "x"))
        assert event.data == {"turn": 3, "step": 4, "chunk": {"type": "text-delta", "index": 1, "text": "x"}}
        assert event.payload == AssistantChunkEvent(turn=3, step=4, chunk=TextDelta(1, "x"))


async def test_append_unchecked_refuses_a_wrong_count_of_values_and_commits_nothing() -> None:
    async with Harness(autoload=False) as ctx:
        session = await ctx.sessions.create("u")
        session.append_unchecked(AssistantChunkEvent, 1, 1, TextDelta(0, "a"))
        with pytest.raises(TypeError, match="AssistantChunkEvent has 3 fields, got 2 values"):
            session.append_unchecked(AssistantChunkEvent, 1, TextDelta(0, "a"))
        assert len(session.events) == 1


async def test_append_unchecked_of_a_checked_type_is_checked_against_the_session() -> None:
    """A turn boundary appended from values is still numbered against the session (and refused)."""
    async with Harness(autoload=False) as ctx:
        session = await ctx.sessions.create("u")
        session.append_unchecked(TurnStartEvent, 1)
        with pytest.raises(EventDataError, match="cannot start while turn 1 is open"):
            session.append_unchecked(TurnStartEvent, 2)
        assert session.open_turn == 1
        assert len(session.events) == 1


# ---------------------------------------------------------------------- plain_data: what persistence writes


def _thawed(value: Any) -> Any:
    """Frozen JSON as plain dicts and lists (``plain_data`` may be either)."""
    if isinstance(value, dict):
        return {key: _thawed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thawed(item) for item in value]
    return value


def _data_built(event: SessionEvent) -> bool:
    try:
        SessionEvent.__dict__["data"].__get__(event, SessionEvent)
    except AttributeError:
        return False
    return True


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda sample: sample.type)
async def test_plain_data_of_a_typed_append_is_its_data_without_building_it(sample: LogEvent) -> None:
    """Written straight from the payload: the same JSON as ``data`` (key order included), and the
    frozen ``data`` is still not built (nobody asked for it)."""
    async with Harness(autoload=False) as ctx:
        session = await ctx.sessions.create("p")
        if isinstance(sample, UserMessageEvent) and sample.surface.op == "replace":
            for _ in range(3):  # something to replace
                session.append(UserMessageEvent(message=USER))
        if isinstance(sample, TurnEndEvent):
            session.append(TurnStartEvent(turn=sample.turn))
        event = session.append(sample)
        plain = event.plain_data()
        assert not _data_built(event)
        assert dumps_json(plain) == dumps_json(event.data)
        assert list(_thawed(plain)) == list(event.data)


async def test_plain_data_of_a_chunk_appended_from_values_builds_neither_payload_nor_data() -> None:
    async with Harness(autoload=False) as ctx:
        session = await ctx.sessions.create("p")
        for _ in range(2):  # the second append defers (the class is known by then)
            event = session.append_unchecked(AssistantChunkEvent, 2, 3, ToolCallDelta(1, "c1", "read", "{}"))
        plain = event.plain_data()
        assert event._payload.__class__ is tuple  # still the values: no payload object made
        assert not _data_built(event)
        assert plain == _thawed(event.data)
        assert plain == {"turn": 2, "step": 3, "chunk": ToolCallDelta(1, "c1", "read", "{}").to_json()}


async def test_plain_data_of_json_given_data_is_that_data() -> None:
    """Data appended as JSON is written as given, even once its payload was read: the payload's own
    encoding spells out defaults the given JSON left out, and the stored text must not change."""
    given = {"config": {"provider": "p", "model": "m"}, "system": "s", "tools": []}
    async with Harness(autoload=False) as ctx:
        session = await ctx.sessions.create("p")
        event = session.append("request/header", given)
        assert event.payload == RequestHeaderEvent(config=LlmCallConfig("p", "m"), system="s", tools=())
        assert event.plain_data() is event.data
        assert _thawed(event.plain_data()) == given
        loaded = SessionEvent.from_json(event.to_json())
        assert loaded.plain_data() is loaded.data


@log_event("testplugin/shouted")
@attrs.frozen(kw_only=True)
class ShoutedEvent(LogEvent):
    """A plugin's type that writes its data itself (its own ``to_data``)."""

    word: str

    def to_data(self) -> FrozenDict:
        return FrozenDict({"word": self.word.upper()})


async def test_plain_data_of_a_payload_with_its_own_to_data_is_its_data() -> None:
    async with Harness(autoload=False) as ctx:
        session = await ctx.sessions.create("p")
        event = session.append(ShoutedEvent(word="hi"))
        assert event.plain_data() == {"word": "HI"} == event.data


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda sample: sample.type)
def test_encode_values_is_encode_plain_of_the_instance(sample: LogEvent) -> None:
    """The codec's encoder from field values (a deferred payload) writes what its encoder of the
    instance writes, for every core type (defaults left out, optional keys, nested classes)."""
    codec = type(sample).spec.codec
    values = tuple(getattr(sample, attribute.name) for attribute in attrs.fields(type(sample)))
    assert dumps_json(codec.encode_values(values)) == dumps_json(codec.encode_plain(sample))
