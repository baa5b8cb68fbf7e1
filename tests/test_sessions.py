"""The in-memory session store and its sessions: lifecycle, appends, surface, publication, flush, fork."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import pytest

from dsh_core import (
    Context,
    DuplicateRegistrationError,
    EventDataError,
    ScopeDisposedError,
    VocabularyError,
    hookimpl,
)
from dsh_core.services.sessions import Session, SessionMeta, SessionStore
from dsh_core.session_log import SessionEvent, SurfaceOp
from dsh_core.vocabulary import AssistantMessage, FrozenDict, Reasoning, Text, ToolResultMessage, UserMessage

pytestmark = pytest.mark.anyio

StartHarness = Callable[..., AbstractAsyncContextManager[Context]]


class Recorder:
    """Hears every session notification, in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, int]] = []

    @hookimpl
    def dsh_session_created(self, session: Session) -> None:
        self.log.append(("created", session.id, len(session.events)))

    @hookimpl
    def dsh_session_disposed(self, session: Session) -> None:
        self.log.append(("disposed", session.id, len(session.events)))

    @hookimpl
    def dsh_session_event(self, session: Session, event: SessionEvent) -> None:
        # Post-commit: the event is already in the log when listeners hear it.
        assert session.events[event.seq] is event
        self.log.append(("event", session.id, event.seq))


@pytest.fixture
async def recorded(start_harness: StartHarness) -> AsyncIterator[tuple[Context, Recorder]]:
    recorder = Recorder()
    async with start_harness(plugins=[recorder]) as ctx:
        yield ctx, recorder


def user(text: str = "hi", kind: str = "user") -> dict[str, Any]:
    return {"message": UserMessage(text, {"kind": kind}).to_json()}


def assistant(text: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"turn": 1, "step": 1, "message": AssistantMessage(text).to_json(), **extra}


# ---------------------------------------------------------------------- SessionMeta


def test_meta_defaults_and_round_trip() -> None:
    """SessionMeta round-trips through JSON and freezes extra."""
    meta = SessionMeta(cwd="/work", parent_id="p", seed_length=3, extra={"tags": ["a", "b"]})
    assert isinstance(meta.extra, FrozenDict)
    assert meta.extra["tags"] == ("a", "b")
    assert SessionMeta.from_json(meta.to_json()) == meta
    assert SessionMeta() == SessionMeta.from_json({})


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"cwd": "relative/dir"}, ValueError, "absolute"),
        ({"cwd": 3}, TypeError, "cwd"),
        ({"seed_length": -1}, ValueError, "seed_length"),
        ({"seed_length": "2"}, TypeError, "seed_length"),
        ({"parent_id": 5}, TypeError, "parent_id"),
        ({"extra": {"x": float("nan")}}, ValueError, "extra"),
    ],
)
def test_meta_refuses_bad_values(kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    """Bad metadata is refused with the field's name."""
    with pytest.raises(error, match=text):
        SessionMeta(**kwargs)


def test_meta_from_json_names_the_field() -> None:
    """Malformed metadata JSON raises VocabularyError naming the field."""
    with pytest.raises(VocabularyError) as info:
        SessionMeta.from_json({"cwd": "rel"})
    assert info.value.field == "meta.cwd"
    with pytest.raises(VocabularyError, match="unknown"):
        SessionMeta.from_json({"colour": "red"})


# ---------------------------------------------------------------------- store lifecycle


async def test_prepare_is_invisible_until_entered(recorded: tuple[Context, Recorder]) -> None:
    """prepare() builds a session nobody sees; enter() lists it and emits session/created."""
    ctx, recorder = recorded
    session = ctx.sessions.prepare("s1")
    assert ctx.sessions.get("s1") is None
    assert ctx.sessions.list() == ()
    detach = await ctx.sessions.enter(session)
    assert ctx.sessions.get("s1") is session
    assert ctx.sessions.list() == (session,)
    assert recorder.log == [("created", "s1", 0)]
    await detach()
    await detach()  # idempotent: one session/disposed only
    assert ctx.sessions.get("s1") is None
    assert recorder.log == [("created", "s1", 0), ("disposed", "s1", 0)]


async def test_session_has_no_public_constructor() -> None:
    """Sessions come from the store only."""
    with pytest.raises(TypeError, match="prepare"):
        Session("x")


async def test_entering_a_taken_id_is_refused(dsh_ctx: Context) -> None:
    """Two prepares of one id may coexist; the second enter raises."""
    first = dsh_ctx.sessions.prepare("dup")
    second = dsh_ctx.sessions.prepare("dup")
    await dsh_ctx.sessions.enter(first)
    with pytest.raises(DuplicateRegistrationError, match="'dup' is taken"):
        await dsh_ctx.sessions.enter(second)
    with pytest.raises(DuplicateRegistrationError, match="already live"):
        await dsh_ctx.sessions.enter(first)
    assert dsh_ctx.sessions.get("dup") is first


async def test_stale_detach_never_removes_a_later_session(recorded: tuple[Context, Recorder]) -> None:
    """A detach bound to an earlier session leaves a later same-id session in place."""
    ctx, recorder = recorded
    old = ctx.sessions.prepare("s")
    stale = await ctx.sessions.enter(old)
    await stale()
    new = await ctx.sessions.create("s")
    await stale()
    assert ctx.sessions.get("s") is new
    assert [entry[0] for entry in recorder.log] == ["created", "disposed", "created"]


async def test_create_is_undone_with_the_creating_context(recorded: tuple[Context, Recorder]) -> None:
    """A session created through a context is detached when that context is disposed."""
    ctx, recorder = recorded
    child = ctx.child("owner")
    session = await child.sessions.create("owned")
    await child.dispose()
    assert ctx.sessions.get("owned") is None
    assert recorder.log[-1] == ("disposed", "owned", len(session.events))


async def test_detach_through_a_bound_store_is_idempotent_with_the_context(dsh_ctx: Context) -> None:
    """Detaching early removes the context's effect: disposing the context later is harmless."""
    child = dsh_ctx.child("owner")
    session = child.sessions.prepare("s")
    detach = await child.sessions.enter(session)
    await detach()
    again = await dsh_ctx.sessions.create("s")
    await child.dispose()
    assert dsh_ctx.sessions.get("s") is again


async def test_stopping_the_harness_detaches_live_sessions(start_harness: StartHarness) -> None:
    """Sessions still live when the sessions plugin stops get their session/disposed."""
    recorder = Recorder()
    async with start_harness() as ctx:
        ctx.register_plugin(recorder)  # on the root context: it outlives every plugin
        await ctx.sessions.create("a")
        await ctx.sessions.create("b")
    assert ("disposed", "a", 0) in recorder.log
    assert ("disposed", "b", 0) in recorder.log


async def test_enter_cancelled_during_created_is_rolled_back(start_harness: StartHarness) -> None:
    """If enter() is cancelled while session/created runs, the session leaves again, with its
    session/disposed, so listeners see the pair."""
    heard: list[str] = []

    class Slow:
        @hookimpl
        async def dsh_session_created(self, session: Session) -> None:
            heard.append("created")
            if heard.count("created") == 1:
                await anyio.sleep_forever()

        @hookimpl
        def dsh_session_disposed(self, session: Session) -> None:
            heard.append("disposed")

    async with start_harness(plugins=[Slow()]) as ctx:
        session = ctx.sessions.prepare("s")
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ctx.sessions.enter, session)
                await anyio.wait_all_tasks_blocked()
                tg.cancel_scope.cancel()
        assert ctx.sessions.get("s") is None
        assert heard == ["created", "disposed"]
        await ctx.sessions.enter(session)  # the id is free again
        assert ctx.sessions.get("s") is session


async def test_a_stopped_store_refuses_enter(start_harness: StartHarness) -> None:
    """Once the sessions plugin has stopped, nothing can be entered."""
    async with start_harness() as ctx:
        store = ctx.sessions
    with pytest.raises(ScopeDisposedError):
        await store.enter(store.prepare("late"))


@pytest.mark.parametrize(
    ("call", "error", "text"),
    [
        (lambda store: store.prepare(3), TypeError, "str"),
        (lambda store: store.prepare(""), ValueError, "non-empty"),
        (lambda store: store.prepare("x", meta=["/"]), TypeError, "SessionMeta"),
        (lambda store: store.prepare("x", meta={"cwd": "rel"}), VocabularyError, "meta.cwd"),
        (lambda store: store.prepare("x", seed="turn/start"), TypeError, "seed"),
        (lambda store: store.prepare("x", seed=[["a/b", {}]]), TypeError, r"seed\[0\]"),
        (
            lambda store: store.prepare("x", seed=[("a/b", {})], meta=SessionMeta(seed_length=2)),
            ValueError,
            "seed",
        ),
    ],
)
async def test_prepare_refuses_bad_input(
    dsh_ctx: Context, call: Callable[[SessionStore], object], error: type[Exception], text: str
) -> None:
    """prepare() refuses wrong types and inconsistent metadata."""
    with pytest.raises(error, match=text):
        call(dsh_ctx.sessions)


async def test_seed_becomes_the_first_events_and_is_not_published(recorded: tuple[Context, Recorder]) -> None:
    """Seed pairs and events are copied in, checked, numbered from 0; enter publishes none of them."""
    ctx, recorder = recorded
    seed = [("turn/start", {"turn": 1}), ("user/message", user("hello")), ("turn/end", {"turn": 1})]
    session = await ctx.sessions.create("seeded", seed=seed)
    assert [event.type for event in session.events] == ["turn/start", "user/message", "turn/end"]
    assert [event.seq for event in session.events] == [0, 1, 2]
    assert session.meta.seed_length == 3
    assert session.last_turn == 1
    assert session.open_turn is None
    assert [m.text for m in session.derive_messages()] == ["hello"]
    assert recorder.log == [("created", "seeded", 3)]
    copy = ctx.sessions.prepare("copy", seed=session.events)
    assert list(copy.events) == list(session.events)


async def test_meta_may_be_given_as_json(dsh_ctx: Context) -> None:
    """A mapping meta is read as SessionMeta JSON; its seed_length defaults to the seed's length."""
    session = dsh_ctx.sessions.prepare("s", meta={"cwd": "/w"}, seed=[("note/a", {})])
    assert session.meta == SessionMeta(cwd="/w", seed_length=1)
    resumed = dsh_ctx.sessions.prepare("r", meta={"seed_length": 0}, seed=[("note/a", {})])
    assert resumed.meta.seed_length == 0


async def test_seed_is_validated(dsh_ctx: Context) -> None:
    """A seed event that the session would refuse as an append is refused, naming its type."""
    with pytest.raises(EventDataError, match="user/message"):
        dsh_ctx.sessions.prepare("bad", seed=[("user/message", {"message": {"role": "user"}})])
    event = SessionEvent("note/x", 5, 1.0, {})
    with pytest.raises(EventDataError, match="seq 5"):
        dsh_ctx.sessions.prepare("bad", seed=[event])


# ---------------------------------------------------------------------- append


async def test_append_numbers_times_and_freezes(dsh_ctx: Context) -> None:
    """seq is the index, time is now, data is a deep-frozen copy."""
    session = await dsh_ctx.sessions.create("s")
    data: dict[str, Any] = {"items": [1, {"k": "v"}], "n": 1.5}
    before = time.time()
    first = session.append("note/a", data)
    second = session.append("note/b", {})
    after = time.time()
    assert (first.seq, second.seq) == (0, 1)
    assert before <= first.time <= second.time <= after
    data["items"].append(2)
    assert first.data == {"items": (1, {"k": "v"}), "n": 1.5}
    assert isinstance(first.data, FrozenDict)
    items: Any = first.data["items"]
    assert isinstance(items[1], FrozenDict)
    assert session.events[0] is first
    assert list(session.events) == [first, second]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"x": math.nan}, "float nan"),
        ({"x": b"raw"}, "bytes"),
        ({"x": object()}, "object"),
        ({1: "non-str key"}, "key"),
        ("not an object", "JSON object"),
    ],
)
async def test_append_refuses_non_json(dsh_ctx: Context, data: Any, problem: str) -> None:
    """Non-JSON data is refused with EventDataError naming the event type; nothing is committed."""
    session = await dsh_ctx.sessions.create("s")
    with pytest.raises(EventDataError, match=problem) as info:
        session.append("tool/custom", data)
    assert info.value.event_type == "tool/custom"
    assert "tool/custom" in str(info.value)
    assert len(session.events) == 0


async def test_append_refuses_a_cycle(dsh_ctx: Context) -> None:
    """A cyclic value is refused, naming the event type."""
    session = await dsh_ctx.sessions.create("s")
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(EventDataError, match="cycle"):
        session.append("note/cycle", cyclic)
    assert len(session.events) == 0


async def test_append_refuses_bad_types(dsh_ctx: Context) -> None:
    """The event type must be a non-empty str."""
    session = await dsh_ctx.sessions.create("s")
    with pytest.raises(TypeError, match="str"):
        session.append(7, {})
    with pytest.raises(ValueError, match="Length of 'type' must be >= 1"):
        session.append("", {})
    assert len(session.events) == 0


async def test_events_view_is_read_only(dsh_ctx: Context) -> None:
    """session.events reads the log but cannot change it; slices are tuples."""
    session = await dsh_ctx.sessions.create("s")
    session.append("a/a", {})
    session.append("a/b", {})
    events = session.events
    with pytest.raises(TypeError):
        events[0] = events[1]
    assert not hasattr(events, "append")
    assert events[-1].type == "a/b"
    assert isinstance(events[0:1], tuple)
    assert [event.type for event in events[::-1]] == ["a/b", "a/a"]
    seen = []
    for event in events:  # iteration stops at the length it started with
        seen.append(event.type)
        session.append("a/more", {})
    assert seen == ["a/a", "a/b"]
    assert len(events) == 4


async def test_validator_can_veto_an_append(recorded: tuple[Context, Recorder]) -> None:
    """A raising validator vetoes: the append raises it, nothing is committed or published."""
    ctx, recorder = recorded
    session = await ctx.sessions.create("s")
    seen: list[tuple[Session, str, Any]] = []

    def no_secrets(target: Session, event_type: str, data: FrozenDict) -> None:
        seen.append((target, event_type, data))
        if "secret" in data:
            msg = "secrets stay out of the log"
            raise PermissionError(msg)

    remove = session.add_validator(no_secrets)
    session.append("note/a", {"fine": 1})
    with pytest.raises(PermissionError, match="secrets"):
        session.append("note/b", {"secret": "hunter2"})
    assert [event.type for event in session.events] == ["note/a"]
    assert [entry for entry in recorder.log if entry[0] == "event"] == [("event", "s", 0)]
    assert seen[0] == (session, "note/a", {"fine": 1})
    assert isinstance(seen[0][2], FrozenDict)
    remove()
    remove()
    session.append("note/b", {"secret": "ok now"})
    assert len(session.events) == 2


async def test_add_validator_refuses_a_non_callable(dsh_ctx: Context) -> None:
    """A validator must be callable."""
    session = dsh_ctx.sessions.prepare("s")
    with pytest.raises(TypeError, match="callable"):
        session.add_validator("nope")


async def test_events_are_published_only_once_entered(recorded: tuple[Context, Recorder]) -> None:
    """Appends before enter are committed silently; after enter each is published once, in order."""
    ctx, recorder = recorded
    session = ctx.sessions.prepare("s")
    session.append("note/early", {})
    detach = await ctx.sessions.enter(session)
    session.append("note/live", {})
    session.append("note/live", {})
    await detach()
    session.append("note/late", {})
    assert recorder.log == [("created", "s", 1), ("event", "s", 1), ("event", "s", 2), ("disposed", "s", 3)]


async def test_append_from_own_listener_is_refused(start_harness: StartHarness) -> None:
    """A session/event listener appending to the same session gets a clear error; other sessions are fine."""
    errors: list[EventDataError] = []

    class Echo:
        @hookimpl
        def dsh_session_event(self, session: Session, event: SessionEvent) -> None:
            if event.type != "note/ping":
                return
            try:
                session.append("note/echo", {})
            except EventDataError as exc:
                errors.append(exc)
            other = ctx.sessions.get("other")
            assert other is not None
            other.append("note/echo", {"from": session.id})

    async with start_harness(plugins=[Echo()]) as ctx:
        session = await ctx.sessions.create("s")
        other = await ctx.sessions.create("other")
        session.append("note/ping", {})
        assert [event.type for event in session.events] == ["note/ping"]
        assert [event.data for event in other.events] == [{"from": "s"}]
        session.append("note/after", {})  # the refusal left the session usable
    assert len(errors) == 1
    assert "inside one of its session/event listeners" in str(errors[0])
    assert errors[0].event_type == "note/echo"


async def test_listeners_have_run_when_append_returns(start_harness: StartHarness) -> None:
    """Publication is synchronous and in log order; a failing listener is contained."""
    heard: list[tuple[str, int]] = []

    class Broken:
        @hookimpl(tryfirst=True)
        def dsh_session_event(self, event: SessionEvent) -> None:
            heard.append(("broken", event.seq))
            msg = "observer bug"
            raise RuntimeError(msg)

    class Fine:
        @hookimpl
        def dsh_session_event(self, event: SessionEvent) -> None:
            heard.append(("fine", event.seq))

    async with start_harness(plugins=[Broken(), Fine()]) as ctx:
        session = await ctx.sessions.create("s")
        session.append("note/a", {})
        assert heard == [("broken", 0), ("fine", 0)]
        session.append("note/b", {})
    assert heard == [("broken", 0), ("fine", 0), ("broken", 1), ("fine", 1)]


# ---------------------------------------------------------------------- surface and messages


async def test_model_visible_events_need_a_message_of_their_role(dsh_ctx: Context) -> None:
    """A model-visible event carries a valid message whose role matches its type."""
    session = await dsh_ctx.sessions.create("s")
    with pytest.raises(EventDataError, match=r"data\.message: missing"):
        session.append("user/message", {"text": "hi"})
    with pytest.raises(EventDataError, match=r"data\.message\.content"):
        session.append("user/message", {"message": {"role": "user", "id": "1", "source": {"kind": "user"}}})
    tool = ToolResultMessage("call-1", "out").to_json()
    with pytest.raises(EventDataError, match="carries a 'user' message, got 'tool'"):
        session.append("steering/message", {"message": tool})
    with pytest.raises(EventDataError, match="assistant/message"):
        session.append("assistant/message", user())
    assert len(session.events) == 0
    session.append("tool/result", {"turn": 1, "step": 1, "message": tool})
    assert session.derive_messages() == (ToolResultMessage.from_json(tool),)


async def test_every_model_visible_type_joins_the_surface(dsh_ctx: Context) -> None:
    """user, context and steering messages, assistant messages and tool results are surface entries."""
    session = await dsh_ctx.sessions.create("s")
    session.append("user/message", user("u"))
    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}})
    session.append("context/message", user("c", "context"))
    session.append("assistant/message", assistant("a"))
    session.append("tool/result", {"message": ToolResultMessage("id", "t").to_json()})
    session.append("steering/message", user("s", "steering"))
    assert [m.text for m in session.derive_messages()] == ["u", "c", "a", "t", "s"]
    assert session.surface == (0, 2, 3, 4, 5)


async def test_interrupted_assistant_message_is_part_of_the_surface(dsh_ctx: Context) -> None:
    """An interrupted assistant message is derived like any other; an empty one projects to nothing."""
    session = await dsh_ctx.sessions.create("s")
    session.append("user/message", user("go"))
    partial = AssistantMessage((Reasoning("thinking"), Text("half an ans")))
    session.append(
        "assistant/message", {"turn": 1, "step": 1, "message": partial.to_json(), "interrupted": True}
    )
    session.append("assistant/message", assistant(""))
    empty = AssistantMessage(())
    session.append("assistant/message", {"turn": 1, "step": 2, "message": empty.to_json()})
    assert session.derive_messages()[1] == partial
    assert len(session.derive_messages()) == 3  # "" is one Text block; () has no content at all
    assert len(session.surface) == 4


async def test_surface_replace_folds_a_span(dsh_ctx: Context) -> None:
    """A replace puts the event in place of a contiguous span; it is stored in data['surface']."""
    session = await dsh_ctx.sessions.create("s")
    for text in "abcd":
        session.append("user/message", user(text))
    event = session.append("user/message", user("summary", "compaction"), SurfaceOp.replace(1, 3))
    assert event.data["surface"] == {"op": "replace", "start": 1, "end": 3}
    assert event.surface == SurfaceOp.replace(1, 3)
    assert [m.text for m in session.derive_messages()] == ["a", "summary", "d"]
    assert session.surface == (0, 4, 3)
    session.append("user/message", {**user("e"), "surface": {"op": "replace", "start": 3, "end": 3}})
    assert [m.text for m in session.derive_messages()] == ["a", "summary", "d", "e"]
    session.append("user/message", user("tail"), SurfaceOp.append())
    assert session.events[-1].data.get("surface") is None


async def test_surface_replace_of_a_missing_span_is_refused(dsh_ctx: Context) -> None:
    """A replace citing entries the surface does not have is refused at append."""
    session = await dsh_ctx.sessions.create("s")
    session.append("user/message", user("a"))
    with pytest.raises(EventDataError, match="do not exist") as info:
        session.append("user/message", user("b"), SurfaceOp.replace(0, 2))
    assert info.value.event_type == "user/message"
    assert len(session.events) == 1
    assert [m.text for m in session.derive_messages()] == ["a"]


async def test_surface_ops_only_on_model_visible_events(dsh_ctx: Context) -> None:
    """A surface op on any other event is refused, as an argument or inside data."""
    session = await dsh_ctx.sessions.create("s")
    with pytest.raises(EventDataError, match="model-visible"):
        session.append("turn/start", {"turn": 1}, SurfaceOp.append())
    with pytest.raises(EventDataError, match="surface"):
        session.append("note/x", {"surface": {"op": "append"}})
    with pytest.raises(TypeError, match="SurfaceOp"):
        session.append("user/message", user(), {"op": "append"})
    with pytest.raises(EventDataError, match="given twice"):
        session.append("user/message", {**user(), "surface": {"op": "append"}}, SurfaceOp.replace(0, 0))
    with pytest.raises(EventDataError, match="surface"):
        session.append("user/message", {**user(), "surface": {"op": "swap"}})
    assert len(session.events) == 0


async def test_derive_messages_snapshots(dsh_ctx: Context) -> None:
    """derive_messages() returns one cached snapshot until something changes; old ones never change."""
    session = await dsh_ctx.sessions.create("s")
    assert session.derive_messages() == ()
    session.append("user/message", user("a"))
    first = session.derive_messages()
    assert session.derive_messages() is first
    session.append("note/x", {})
    assert session.derive_messages() is first
    session.append("user/message", user("b"))
    second = session.derive_messages()
    session.append("user/message", user("c"), SurfaceOp.replace(0, 2))
    third = session.derive_messages()
    assert [m.text for m in first] == ["a"]
    assert [m.text for m in second] == ["a", "b"]
    assert [m.text for m in third] == ["c"]
    assert second == tuple(second)
    assert second == list(second)
    assert hash(second) == hash(tuple(second))
    prefix = (UserMessage("prefix"),)
    assert prefix + second == (prefix[0], *second)
    assert isinstance(second + prefix, tuple)
    assert second[-1].text == "b"
    assert [m.text for m in second[1:]] == ["b"]
    assert second[::-1] == (second[1], second[0])
    with pytest.raises(IndexError):
        second[2]
    assert "Messages" in repr(second)


# ---------------------------------------------------------------------- turns


async def test_turn_bookkeeping(dsh_ctx: Context) -> None:
    """open_turn and last_turn follow turn/start and turn/end; numbering is checked."""
    session = await dsh_ctx.sessions.create("s")
    assert (session.open_turn, session.last_turn) == (None, 0)
    session.append("turn/start", {"turn": 1})
    assert (session.open_turn, session.last_turn) == (1, 1)
    with pytest.raises(EventDataError, match="while turn 1 is open"):
        session.append("turn/start", {"turn": 2})
    with pytest.raises(EventDataError, match="the open turn is 1"):
        session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert (session.open_turn, session.last_turn) == (None, 1)
    with pytest.raises(EventDataError, match="no turn is open"):
        session.append("turn/end", {"turn": 1})
    with pytest.raises(EventDataError, match="only grow"):
        session.append("turn/start", {"turn": 1})
    for bad in ({}, {"turn": 0}, {"turn": "2"}, {"turn": True}):
        with pytest.raises(EventDataError, match="turn number"):
            session.append("turn/start", bad)
    session.append("turn/start", {"turn": 5})
    assert (session.open_turn, session.last_turn) == (5, 5)
    assert len(session.events) == 3


# ---------------------------------------------------------------------- flush


async def test_flush_runs_listeners_in_parallel(start_harness: StartHarness) -> None:
    """session/flush listeners run concurrently: each waits for the other to have started."""
    started: list[str] = []
    both = anyio.Event()

    class Flusher:
        def __init__(self, name: str) -> None:
            self.name = name

        @hookimpl
        async def dsh_session_flush(self, session: Session) -> None:
            started.append(self.name)
            if len(started) == 2:
                both.set()
            await both.wait()

    async with start_harness(plugins=[Flusher("a"), Flusher("b")]) as ctx:
        session = await ctx.sessions.create("s")
        with anyio.fail_after(5):
            await ctx.sessions.flush(session)
    assert sorted(started) == ["a", "b"]


async def test_flush_reraises_the_first_failure(start_harness: StartHarness) -> None:
    """A failing flush listener fails flush(); the other listeners are cancelled."""
    cancelled: list[bool] = []

    class Broken:
        @hookimpl
        async def dsh_session_flush(self) -> None:
            await anyio.wait_all_tasks_blocked()
            msg = "disk full"
            raise OSError(msg)

    class Patient:
        @hookimpl
        async def dsh_session_flush(self) -> None:
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.append(True)
                raise

    async with start_harness(plugins=[Broken(), Patient()]) as ctx:
        session = await ctx.sessions.create("s")
        with anyio.fail_after(5), pytest.raises(OSError, match="disk full"):
            await ctx.sessions.flush(session)
    assert cancelled == [True]


async def test_flush_refuses_a_session_that_is_not_live(dsh_ctx: Context) -> None:
    """Only a live session of this store can be flushed."""
    with pytest.raises(ValueError, match="not live"):
        await dsh_ctx.sessions.flush(dsh_ctx.sessions.prepare("private"))
    with pytest.raises(TypeError, match="Session"):
        await dsh_ctx.sessions.flush("s")


# ---------------------------------------------------------------------- fork


async def _one_turn(session: Session, turn: int, text: str) -> None:
    session.append("turn/start", {"turn": turn})
    session.append("user/message", user(text))
    session.append("assistant/message", assistant(f"re: {text}"))
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


async def test_fork_copies_a_balanced_prefix(recorded: tuple[Context, Recorder]) -> None:
    """fork() seeds a live child with events[0..upto_seq] and records its lineage."""
    ctx, recorder = recorded
    source = await ctx.sessions.create("src", meta=SessionMeta(cwd="/repo"))
    await _one_turn(source, 1, "first")
    await _one_turn(source, 2, "second")
    child = await ctx.sessions.fork(source, 3, "child")
    assert ctx.sessions.get("child") is child
    assert list(child.events) == list(source.events[:4])
    assert child.meta == SessionMeta(cwd="/repo", parent_id="src", seed_length=4)
    assert [m.text for m in child.derive_messages()] == ["first", "re: first"]
    assert child.last_turn == 1
    child.append("turn/start", {"turn": 2})
    assert len(source.events) == 8
    assert ("created", "child", 4) in recorder.log


async def test_fork_inside_an_open_turn_is_refused(dsh_ctx: Context) -> None:
    """Forking at a seq inside a turn (turn/start copied, turn/end not) is refused."""
    source = await dsh_ctx.sessions.create("src")
    await _one_turn(source, 1, "done")
    source.append("turn/start", {"turn": 2})
    source.append("user/message", user("running"))
    for upto in (4, 5):
        with pytest.raises(ValueError, match="turn 2 is open") as info:
            await dsh_ctx.sessions.fork(source, upto, f"child{upto}")
        assert "seq 4" in str(info.value)
    assert dsh_ctx.sessions.get("child4") is None
    child = await dsh_ctx.sessions.fork(source, 3, "child")
    assert child.open_turn is None


async def test_fork_keeps_replaced_surfaces(dsh_ctx: Context) -> None:
    """A fork derives the same messages as its source at the fork point."""
    source = await dsh_ctx.sessions.create("src")
    for text in "abc":
        source.append("user/message", user(text))
    source.append("user/message", user("sum", "compaction"), SurfaceOp.replace(0, 2))
    child = await dsh_ctx.sessions.fork(source, 3, "child")
    assert child.derive_messages() == source.derive_messages()


@pytest.mark.parametrize("upto", [-1, 3, True, "1"])
async def test_fork_refuses_a_seq_outside_the_log(dsh_ctx: Context, upto: Any) -> None:
    """upto_seq must be an index of the source log."""
    source = await dsh_ctx.sessions.create("src")
    for _ in range(3):
        source.append("note/x", {})
    with pytest.raises(ValueError, match=r"seqs 0\.\.2"):
        await dsh_ctx.sessions.fork(source, upto, "child")


async def test_fork_refuses_a_taken_child_id(dsh_ctx: Context) -> None:
    """The child id goes through enter(): a taken id is a DuplicateRegistrationError."""
    source = await dsh_ctx.sessions.create("src")
    source.append("note/x", {})
    with pytest.raises(DuplicateRegistrationError):
        await dsh_ctx.sessions.fork(source, 0, "src")


# ---------------------------------------------------------------------- resume checks once


def _stored_log(session: Session) -> list[SessionEvent]:
    """The session's events as a loader reads them back: new objects, checked by nothing yet."""
    return [SessionEvent.from_json(event.to_json()) for event in session.events]


async def _lived(dsh_ctx: Context) -> Session:
    session = dsh_ctx.sessions.prepare("lived")
    session.append("turn/start", {"turn": 1})
    session.append("user/message", {"message": UserMessage("hi").to_json()})
    session.append("assistant/message", {"turn": 1, "step": 1, "message": AssistantMessage("hello").to_json()})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.append("turn/start", {"turn": 2})
    return session


async def test_prepare_after_check_log_checks_no_event_twice(
    dsh_ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prepare seeded with the events check_log just passed checks only the events added after them."""
    from dsh_core.session_log import check_log

    lived = await _lived(dsh_ctx)
    stored = _stored_log(lived)
    checked = check_log("resumed", lived.meta, stored)  # the loader's check (the log ends inside turn 2)
    assert (checked.events, checked.open_turn) == (tuple(stored), 2)
    repair = SessionEvent("turn/end", len(stored), time.time(), {"turn": 2, "reason": {"kind": "interrupted"}})
    admitted: list[str] = []
    admit = Session._admit

    def counting(self: Session, event: SessionEvent, *, validate: bool) -> SessionEvent:
        admitted.append(event.type)
        return admit(self, event, validate=validate)

    monkeypatch.setattr(Session, "_admit", counting)
    resumed = dsh_ctx.sessions.prepare("resumed", seed=[*stored, repair], checked=checked)
    assert admitted == ["turn/end"]  # only crash repair's event
    admitted.clear()
    dsh_ctx.sessions.prepare("again", seed=[*stored, repair])  # no checked log given: nothing is kept aside
    assert len(admitted) == len(stored) + 1
    monkeypatch.undo()
    checked = dsh_ctx.sessions.prepare("checked", seed=[*_stored_log(lived), repair])
    assert resumed.derive_messages() == checked.derive_messages() == lived.derive_messages()
    assert (resumed.open_turn, resumed.last_turn, resumed.surface) == (None, 2, checked.surface)
    assert [event.to_json() for event in resumed.events] == [event.to_json() for event in checked.events]


async def test_prepare_checks_a_seed_that_is_not_the_checked_log(
    dsh_ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other event objects than those check_log passed are checked in full, and refused when wrong."""
    from dsh_core.session_log import check_log

    lived = await _lived(dsh_ctx)
    stored = _stored_log(lived)[:4]
    checked = check_log("resumed", lived.meta, stored)
    admitted: list[str] = []
    admit = Session._admit

    def counting(self: Session, event: SessionEvent, *, validate: bool) -> SessionEvent:
        admitted.append(event.type)
        return admit(self, event, validate=validate)

    monkeypatch.setattr(Session, "_admit", counting)
    dsh_ctx.sessions.prepare("resumed", seed=_stored_log(lived)[:4], checked=checked)
    assert len(admitted) == 4
    admitted.clear()
    dsh_ctx.sessions.prepare("other", seed=stored, checked=checked)  # checked for another id
    assert len(admitted) == 4
    monkeypatch.undo()
    bad = check_log("bad", lived.meta, stored)
    wrong = [*stored[:3], SessionEvent("turn/end", 3, 0.0, {"turn": 5, "reason": {"kind": "completed"}})]
    with pytest.raises(EventDataError, match="turn 5 cannot end"):
        dsh_ctx.sessions.prepare("bad", seed=wrong, checked=bad)


async def test_a_listener_registered_after_quiet_appends_hears_the_next_ones(dsh_ctx: Context) -> None:
    """Appends with nobody listening publish nothing; a listener registered then hears every later
    append, and none once it is gone."""
    session = await dsh_ctx.sessions.create("quiet")
    session.append("note/a", {"n": 1})
    heard: list[int] = []

    class Listener:
        @hookimpl
        def dsh_session_event(self, session: Session, event: SessionEvent) -> None:
            heard.append(event.seq)

    remove = dsh_ctx.register_plugin(Listener())
    session.append("note/a", {"n": 2})
    session.append("turn/start", {"turn": 1})
    remove()
    session.append("turn/end", {"turn": 1})
    assert heard == [1, 2]
    assert len(session.events) == 4
