"""derive_messages() against a naive full fold of the log, on random logs of appends and replaces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core import EventDataError
from dsh_core.host import Dispatcher, new_plugin_manager
from dsh_core.services.sessions import Session, SessionStore
from dsh_core.session_log import SURFACE_EVENT_TYPES, SessionEvent, SurfaceOp
from dsh_core.vocabulary import (
    AssistantMessage,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_from_json,
)

USER_TYPES = ("user/message", "context/message", "steering/message")
words = st.text(alphabet="abcxyz ", max_size=6)


def naive_fold(events: Sequence[SessionEvent]) -> list[Message]:
    """The definition of derive_messages(): fold every surface op from the start, then project."""
    surface: list[SessionEvent] = []
    for event in events:
        if event.type not in SURFACE_EVENT_TYPES:
            continue
        op: Any = event.data.get("surface", {"op": "append"})
        if op["op"] == "append":
            surface.append(event)
        else:
            surface[op["start"] : op["end"]] = [event]
    messages = [message_from_json(event.data["message"]) for event in surface]  # type: ignore[arg-type]
    return [m for m in messages if not (isinstance(m, AssistantMessage) and not m.content)]


def new_session() -> Session:
    # Never entered: nothing is published, so the store needs no running harness.
    return SessionStore(Dispatcher(new_plugin_manager())).prepare("s")


@st.composite
def visible_event(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A model-visible event type with a message of the right role (assistant content may be empty)."""
    event_type = draw(st.sampled_from(sorted(SURFACE_EVENT_TYPES)))
    message: Message
    if event_type in USER_TYPES:
        message = UserMessage(draw(words))
    elif event_type == "tool/result":
        message = ToolResultMessage(draw(words), draw(words), draw(st.booleans()))
    else:
        blocks = st.one_of(
            words.map(Text),
            words.map(Reasoning),
            st.builds(ToolCall, words, words, st.just("{}")),
        )
        message = AssistantMessage(tuple(draw(st.lists(blocks, max_size=2))))
    return event_type, {"message": message.to_json()}


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_derive_messages_equals_a_naive_fold(data: st.DataObject) -> None:
    """At random points of a random log, derive_messages() equals the naive fold, and every
    snapshot handed out earlier still equals the fold of the log as it was then."""
    session = new_session()
    snapshots: list[tuple[Sequence[Message], list[Message]]] = []
    for _ in range(data.draw(st.integers(0, 40), label="steps")):
        action = data.draw(st.sampled_from(["append", "append", "replace", "other", "derive", "bad replace"]))
        size = len(session.surface)
        if action == "append":
            session.append(*data.draw(visible_event()))
        elif action == "replace":
            start = data.draw(st.integers(0, size))
            end = data.draw(st.integers(start, size))
            event_type, payload = data.draw(visible_event())
            session.append(event_type, payload, SurfaceOp.replace(start, end))
        elif action == "other":
            session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}})
        elif action == "bad replace":
            start = data.draw(st.integers(0, size))
            length = len(session.events)
            with pytest.raises(EventDataError, match="do not exist"):
                session.append(
                    "user/message",
                    {"message": UserMessage("x").to_json()},
                    SurfaceOp.replace(start, size + 1),
                )
            assert len(session.events) == length
        else:
            derived = session.derive_messages()
            expected = naive_fold(session.events)
            assert list(derived) == expected
            snapshots.append((derived, expected))
    assert list(session.derive_messages()) == naive_fold(session.events)
    for snapshot, expected in snapshots:
        assert list(snapshot) == expected
        assert len(snapshot) == len(expected)


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_a_seeded_copy_derives_the_same(data: st.DataObject) -> None:
    """A session seeded with another's log (as fork and resume do) derives the same messages."""
    session = new_session()
    for _ in range(data.draw(st.integers(0, 20))):
        size = len(session.surface)
        event_type, payload = data.draw(visible_event())
        if size and data.draw(st.booleans()):
            start = data.draw(st.integers(0, size - 1))
            session.append(event_type, payload, SurfaceOp.replace(start, data.draw(st.integers(start, size))))
        else:
            session.append(event_type, payload)
    copy = SessionStore(Dispatcher(new_plugin_manager())).prepare("copy", seed=session.events)
    assert copy.derive_messages() == session.derive_messages()
    assert copy.surface == session.surface
