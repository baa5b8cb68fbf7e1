"""The vocabulary: content blocks, messages, chunks, requests, decisions and session events."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core.llm import (
    Failure,
    Finish,
    LlmCallConfig,
    LlmRequest,
    ModelInfo,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
    chunk_from_json,
    chunk_to_json,
)
from dsh_core.session_log import SessionEvent, SurfaceOp
from dsh_core.vocabulary import (
    USER_SOURCE,
    Accept,
    Allow,
    Ask,
    AssistantMessage,
    Block,
    ContinuationDecision,
    ContinuationStop,
    Deny,
    EventDataError,
    FrozenDict,
    Image,
    Reasoning,
    Reject,
    Retry,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VocabularyError,
    as_content,
    block_from_json,
    decision_from_json,
    dumps_json,
    message_from_json,
)

from . import strategies as s


def _through_text(data: Mapping[str, Any]) -> Any:
    """What a reader of the log gets back: the JSON written as text and parsed again."""
    return json.loads(dumps_json(data))


def _assert_plain_json(value: object) -> None:
    """to_json gives plain, mutable JSON: dicts, lists and scalars only."""
    assert type(value) in (dict, list, str, int, float, bool, type(None)), type(value)
    if type(value) is dict:
        for key, item in value.items():
            assert type(key) is str
            _assert_plain_json(item)
    elif type(value) is list:
        for item in value:
            _assert_plain_json(item)


# Every value class with its strategy and its reader; the round-trip tests run over all of them.
ROUND_TRIPS: list[tuple[str, st.SearchStrategy[Any], Callable[..., Any]]] = [
    ("Text", s.texts, Text.from_json),
    ("Reasoning", s.reasonings, Reasoning.from_json),
    ("ToolCall", s.tool_calls, ToolCall.from_json),
    ("Image", s.images, Image.from_json),
    ("block", s.blocks, block_from_json),
    ("UserMessage", s.user_messages, UserMessage.from_json),
    ("AssistantMessage", s.assistant_messages, AssistantMessage.from_json),
    ("ToolResultMessage", s.tool_result_messages, ToolResultMessage.from_json),
    ("message", s.messages, message_from_json),
    ("TextDelta", s.text_deltas, TextDelta.from_json),
    ("ReasoningDelta", s.reasoning_deltas, ReasoningDelta.from_json),
    ("ToolCallDelta", s.tool_call_deltas, ToolCallDelta.from_json),
    ("Usage", s.usages, Usage.from_json),
    ("Finish", s.finishes, Finish.from_json),
    ("chunk", s.chunks, chunk_from_json),
    ("Failure", s.failures, Failure.from_json),
    ("LlmCallConfig", s.call_configs, LlmCallConfig.from_json),
    ("LlmRequest", s.requests, LlmRequest.from_json),
    ("ModelInfo", s.model_infos, ModelInfo.from_json),
    ("decision", s.decisions, decision_from_json),
    ("SurfaceOp", s.surface_ops(), SurfaceOp.from_json),
    ("SessionEvent", s.session_events(), SessionEvent.from_json),
]


@pytest.mark.parametrize(("name", "values", "read"), ROUND_TRIPS, ids=[r[0] for r in ROUND_TRIPS])
@given(data=st.data())
def test_json_round_trip_is_lossless(
    name: str, values: st.SearchStrategy[Any], read: Callable[..., Any], data: st.DataObject
) -> None:
    """to_json, written as text and read back with from_json, gives an equal value."""
    value = data.draw(values)
    as_json = value.to_json()
    _assert_plain_json(as_json)
    restored = read(_through_text(as_json))
    assert restored == value
    assert type(restored) is type(value)
    assert restored.to_json() == as_json


@pytest.mark.parametrize(("name", "values", "read"), ROUND_TRIPS, ids=[r[0] for r in ROUND_TRIPS])
@given(data=st.data())
def test_from_json_reads_frozen_json_too(
    name: str, values: st.SearchStrategy[Any], read: Callable[..., Any], data: st.DataObject
) -> None:
    """from_json accepts the frozen form a session event holds (FrozenDict and tuples)."""
    value = data.draw(values)
    assert read(FrozenDict(value.to_json())) == value


@pytest.mark.parametrize(("name", "values", "read"), ROUND_TRIPS, ids=[r[0] for r in ROUND_TRIPS])
@given(data=st.data())
def test_values_are_frozen_and_evolvable(
    name: str, values: st.SearchStrategy[Any], read: Callable[..., Any], data: st.DataObject
) -> None:
    """Every value class is a frozen attrs class: assignment fails, evolve makes an equal copy."""
    value = data.draw(values)
    first = attrs.fields(type(value))[0].name
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(value, first, getattr(value, first))
    assert attrs.evolve(value) == value
    hash(value)


class TestMessages:
    def test_user_message_defaults(self) -> None:
        """UserMessage(content=...) alone is valid: source {'kind': 'user'} and a fresh uuid4 id."""
        message = UserMessage(content=(Text("hi"),))
        assert message.source == {"kind": "user"}
        assert uuid.UUID(hex=message.id).version == 4
        assert UserMessage("hi").id != UserMessage("hi").id

    def test_str_content_becomes_one_text_block(self) -> None:
        """A plain str is one Text block; a list becomes a tuple."""
        assert UserMessage("hi").content == (Text("hi"),)
        assert AssistantMessage([Text("a"), ToolCall("c1", "read", "{}")]).content == (
            Text("a"),
            ToolCall("c1", "read", "{}"),
        )
        assert ToolResultMessage("c1", "done").content == (Text("done"),)
        assert as_content("x") == (Text("x"),)
        assert as_content([Reasoning("r")]) == (Reasoning("r"),)

    def test_json_shapes(self) -> None:
        """The JSON shapes of SPEC §7: role, id, content blocks with a type."""
        user = UserMessage(
            [Text("hi"), Image("image/png", "AAAA")], {"kind": "plugin", "plugin": "todo"}, "u1"
        )
        assert user.to_json() == {
            "role": "user",
            "id": "u1",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "media_type": "image/png", "data": "AAAA"},
            ],
            "source": {"kind": "plugin", "plugin": "todo"},
        }
        assistant = AssistantMessage(
            [Reasoning("r", "sig"), ToolCall("c1", "read", '{"a":1}')], "p", "m", "a1"
        )
        assert assistant.to_json() == {
            "role": "assistant",
            "id": "a1",
            "content": [
                {"type": "reasoning", "text": "r", "signature": "sig"},
                {"type": "tool-call", "id": "c1", "name": "read", "arguments": '{"a":1}'},
            ],
            "provider": "p",
            "model": "m",
        }
        assert ToolResultMessage("c1", "ok", True, "t1").to_json() == {
            "role": "tool",
            "id": "t1",
            "call_id": "c1",
            "content": [{"type": "text", "text": "ok"}],
            "is_error": True,
        }

    def test_reasoning_signature_may_be_absent_in_json(self) -> None:
        """A reasoning block without a signature key reads as signature=None."""
        assert Reasoning.from_json({"type": "reasoning", "text": "r"}) == Reasoning("r")

    def test_text_and_tool_calls_helpers(self) -> None:
        """text joins the text blocks; tool_calls lists the calls in order."""
        calls = (ToolCall("1", "a", "{}"), ToolCall("2", "b", "{}"))
        message = AssistantMessage((Text("x"), Reasoning("hidden"), calls[0], Text("y"), calls[1]))
        assert message.text == "xy"
        assert message.tool_calls == calls

    def test_source_is_frozen_json(self) -> None:
        """The source is frozen, so a caller's dict can change without changing the message."""
        source: dict[str, Any] = {"kind": "context", "extra": [1]}
        message = UserMessage("hi", source)
        source["extra"].append(2)
        assert type(message.source) is FrozenDict
        assert message.source == {"kind": "context", "extra": (1,)}
        assert UserMessage("hi").source is USER_SOURCE

    @pytest.mark.parametrize(
        ("source", "field", "match"),
        [
            ({"kind": "robot"}, "source.kind", "'robot' is not a message source kind"),
            ({}, "source.kind", "missing; expected one of compaction, context"),
            ({"kind": "plugin"}, "source.plugin", "a plugin source names its plugin"),
            ({"kind": "plugin", "plugin": ""}, "source.plugin", "a plugin source names its plugin"),
        ],
    )
    def test_bad_source_kind_is_refused(self, source: dict[str, Any], field: str, match: str) -> None:
        """An unknown or incomplete source is a VocabularyError (a ValueError) naming the field."""
        with pytest.raises(VocabularyError, match=match) as caught:
            UserMessage("hi", source)
        assert caught.value.field == field

    @pytest.mark.parametrize(
        ("build", "match"),
        [
            (lambda: Text(1), "Text.text must be a str, got int"),  # type: ignore[arg-type]
            (lambda: Reasoning("r", 5), "Reasoning.signature must be a str or None, got int"),  # type: ignore[arg-type]
            (lambda: ToolCall("id", "name", {"a": 1}), "ToolCall.arguments must be a str, got dict"),  # type: ignore[arg-type]
            (lambda: UserMessage(5), "UserMessage.content must be a str or a sequence"),  # type: ignore[arg-type]
            (
                lambda: UserMessage(["hi"]),  # type: ignore[list-item]
                r"UserMessage.content\[0\] must be a Image or Text block, got str; wrap",
            ),
            (lambda: UserMessage([ToolCall("i", "n", "{}")]), "must be a Image or Text block, got ToolCall"),  # type: ignore[list-item]
            (
                lambda: AssistantMessage([Image("image/png", "")]),  # type: ignore[list-item]
                "must be a Reasoning or Text or ToolCall block",
            ),
            (
                lambda: ToolResultMessage("c", [Reasoning("r")]),  # type: ignore[list-item]
                "must be a Image or Text block, got Reasoning",
            ),
            (lambda: UserMessage("hi", "user"), "UserMessage.source must be a mapping"),
            (lambda: UserMessage("hi", id=7), "UserMessage.id must be a str, got int"),  # type: ignore[arg-type]
            (lambda: ToolResultMessage("c", "x", is_error=1), "ToolResultMessage.is_error must be a bool"),  # type: ignore[arg-type]
            (lambda: AssistantMessage("x", provider=1), "AssistantMessage.provider must be a str or None"),  # type: ignore[arg-type]
        ],
    )
    def test_wrong_python_types_raise_type_error(self, build: Callable[[], object], match: str) -> None:
        """Constructors refuse values of the wrong type with a TypeError naming class and field."""
        with pytest.raises(TypeError, match=match):
            build()

    def test_non_json_source_is_refused(self) -> None:
        """A source holding something that is not JSON is refused, naming the path."""
        with pytest.raises(ValueError, match=r"UserMessage.source: source.blob: bytes is not JSON"):
            UserMessage("hi", {"kind": "context", "blob": b"x"})


def _message() -> dict[str, Any]:
    return {
        "role": "user",
        "id": "u1",
        "content": [{"type": "text", "text": "a"}],
        "source": {"kind": "user"},
    }


MALFORMED: list[tuple[Callable[..., Any], Any, str, str]] = [
    # the example of the brief, word for word
    (
        message_from_json,
        {**_message(), "content": [{"type": "text", "text": "a"}, {"type": "txt", "text": "b"}]},
        "message.content[1].type",
        "message.content[1].type: unknown block type 'txt'; expected one of text, reasoning, tool-call, image",
    ),
    (message_from_json, [], "message", "message: expected a JSON object, got an array"),
    (message_from_json, {**_message(), "role": "system"}, "message.role", "unknown role 'system'"),
    (message_from_json, {"id": "x"}, "message.role", "message.role: missing; expected one of user"),
    (message_from_json, {**_message(), "id": 5}, "message.id", "expected a string, got a number"),
    (
        message_from_json,
        {**_message(), "extra": 1},
        "message.extra",
        "unknown field; expected only content, id",
    ),
    (message_from_json, {**_message(), "content": "hi"}, "message.content", "expected an array of blocks"),
    (
        message_from_json,
        {**_message(), "content": [5]},
        "message.content[0]",
        "expected a JSON object, got a number",
    ),
    (
        message_from_json,
        {**_message(), "content": [{"type": "tool-call", "id": "i", "name": "n", "arguments": "{}"}]},
        "message.content[0].type",
        "a user message cannot hold a tool-call block; expected image or text",
    ),
    (
        message_from_json,
        {**_message(), "content": [{"type": "text", "text": "a"}, {"type": "text"}]},
        "message.content[1].text",
        "message.content[1].text: missing",
    ),
    (
        message_from_json,
        {**_message(), "content": [{"type": "text", "text": "a", "bold": True}]},
        "message.content[0].bold",
        "unknown field",
    ),
    (
        message_from_json,
        {**_message(), "source": {"kind": "x"}},
        "message.source.kind",
        "'x' is not a message",
    ),
    (message_from_json, {**_message(), "source": None}, "message.source", "expected a JSON object, got null"),
    (
        message_from_json,
        {"role": "tool", "id": "t", "call_id": "c", "content": [], "is_error": "no"},
        "message.is_error",
        "expected a boolean, got a string",
    ),
    (
        message_from_json,
        {"role": "assistant", "id": "a", "content": [], "provider": 1, "model": None},
        "message.provider",
        "expected a string or null",
    ),
    (
        message_from_json,
        {
            "role": "assistant",
            "id": "a",
            "content": [{"type": "reasoning", "text": "r", "signature": 1}],
            "provider": None,
            "model": None,
        },
        "message.content[0].signature",
        "expected a string or null",
    ),
    (block_from_json, {"text": "a"}, "block.type", "block.type: missing; expected one of"),
    (Text.from_json, {"type": "image", "text": "a"}, "block.type", "expected 'text', got 'image'"),
    (
        ToolCall.from_json,
        {"type": "tool-call", "id": "i", "name": None, "arguments": ""},
        "block.name",
        "block.name: missing",
    ),
    (chunk_from_json, {"type": "delta"}, "chunk.type", "unknown chunk type 'delta'"),
    (
        chunk_from_json,
        {"type": "text-delta", "index": -1, "text": ""},
        "chunk.index",
        "expected an integer >= 0",
    ),
    (chunk_from_json, {"type": "text-delta", "index": True, "text": ""}, "chunk.index", "got a boolean"),
    (chunk_from_json, {"type": "text-delta", "index": 1.0, "text": ""}, "chunk.index", "expected an integer"),
    (
        chunk_from_json,
        {"type": "finish", "reason": "done"},
        "chunk.reason",
        "'done' is not valid; expected one of",
    ),
    (chunk_from_json, {"type": "finish", "reason": "error"}, "chunk.error", "needs error=Failure"),
    (
        chunk_from_json,
        {"type": "finish", "reason": "error", "error": {"message": "m", "code": "OOPS"}},
        "chunk.error.code",
        "'OOPS' is not valid",
    ),
    (chunk_from_json, {"type": "usage", "input_tokens": 1}, "chunk.output_tokens", "missing"),
    (
        ToolCallDelta.from_json,
        {"type": "tool-call-delta", "index": 0, "arguments": 5},
        "chunk.arguments",
        "expected a string",
    ),
    (LlmCallConfig.from_json, {"provider": "p", "model": "m", "max_tokens": 0}, "config.max_tokens", ">= 1"),
    (
        LlmCallConfig.from_json,
        {"provider": "p", "model": "m", "temperature": "hot"},
        "config.temperature",
        "number",
    ),
    (
        LlmRequest.from_json,
        {"provider": "p", "model": "m", "messages": [{"role": "user"}]},
        "request.messages[0].id",
        "missing",
    ),
    (
        LlmRequest.from_json,
        {"provider": "p", "model": "m", "messages": [], "tools": [{"name": "t", "description": "d"}]},
        "request.tools[0].parameters",
        "expected a JSON Schema object",
    ),
    (ModelInfo.from_json, {"context_window": 0, "max_output_tokens": 1}, "model_info.context_window", ">= 1"),
    (decision_from_json, {"kind": "maybe"}, "decision.kind", "unknown decision kind 'maybe'"),
    (decision_from_json, {"kind": "retry", "delay": -1}, "decision.delay", "expected a finite number >= 0.0"),
    (
        decision_from_json,
        {"kind": "allow", "additional_context": "x"},
        "decision.additional_context",
        "strings",
    ),
    (
        decision_from_json,
        {"kind": "accept", "content": [{"type": "reasoning", "text": "r"}]},
        "decision.content[0].type",
        "only text and image",
    ),
    (
        SurfaceOp.from_json,
        {"op": "replace", "start": 3, "end": 2},
        "surface.end",
        "ends at or after its start",
    ),
    (SurfaceOp.from_json, {"op": "append", "start": 1}, "surface.start", "unknown field"),
    (SessionEvent.from_json, {"type": "", "seq": 0, "time": 0, "data": {}}, "event.type", "non-empty"),
    (SessionEvent.from_json, {"type": "a/b", "seq": -1, "time": 0, "data": {}}, "event.seq", ">= 0"),
    (SessionEvent.from_json, {"type": "a/b", "seq": 0, "time": "now", "data": {}}, "event.time", "a number"),
    (SessionEvent.from_json, {"type": "a/b", "seq": 0, "time": 0, "data": []}, "event.data", "JSON object"),
    (SessionEvent.from_json, {"type": "a/b", "seq": 0, "time": 0}, "event.data", "got null"),
    (
        SessionEvent.from_json,
        {"type": "a/b", "seq": 0, "time": 0, "data": {"x": [1, b"raw"]}},
        "event.data.x[1]",
        "bytes is not JSON",
    ),
    (
        SessionEvent.from_json,
        {"type": "turn/start", "seq": 0, "time": 0, "data": {"surface": {"op": "append"}}},
        "event.data.surface",
        "only model-visible events",
    ),
    (
        SessionEvent.from_json,
        {"type": "user/message", "seq": 0, "time": 0, "data": {"surface": {"op": "move"}}},
        "event.data.surface.op",
        "'move' is not valid",
    ),
]


@pytest.mark.parametrize(("read", "data", "field", "match"), MALFORMED)
def test_malformed_json_names_the_field(read: Callable[..., Any], data: Any, field: str, match: str) -> None:
    """Malformed JSON raises VocabularyError whose field is the path and whose message names it."""
    with pytest.raises(VocabularyError) as caught:
        read(data)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert match in str(caught.value)


@given(s.messages, st.data())
def test_any_broken_message_field_is_named(message: Any, data: st.DataObject) -> None:
    """Drop or retype one field of a valid message's JSON: the error names exactly that field."""
    as_json = message.to_json()
    key = data.draw(st.sampled_from(sorted(as_json)))
    optional = key in {"provider", "model", "source", "is_error"}  # absent reads as the default
    if optional or data.draw(st.booleans()):
        as_json[key] = {"wrong": True}  # an object is the wrong type for every field
    else:
        del as_json[key]
    with pytest.raises(VocabularyError) as caught:
        message_from_json(as_json)
    assert caught.value.field.startswith(f"message.{key}")


@given(s.assistant_messages.filter(lambda m: len(m.content) > 0), st.data())
def test_a_broken_block_is_named_by_its_index(message: AssistantMessage, data: st.DataObject) -> None:
    """Corrupt one block of the content: the error path names that block's index."""
    as_json = message.to_json()
    index = data.draw(st.integers(0, len(as_json["content"]) - 1))
    as_json["content"][index] = {**as_json["content"][index], "type": "sound"}
    with pytest.raises(VocabularyError) as caught:
        message_from_json(as_json)
    assert caught.value.field == f"message.content[{index}].type"


class TestChunks:
    def test_chunk_json_shapes(self) -> None:
        """Each chunk's JSON carries its type tag."""
        assert chunk_to_json(TextDelta(0, "a")) == {"type": "text-delta", "index": 0, "text": "a"}
        assert ReasoningDelta(1, "r").to_json()["type"] == "reasoning-delta"
        assert ToolCallDelta(2).to_json() == {
            "type": "tool-call-delta",
            "index": 2,
            "id": None,
            "name": None,
            "arguments": "",
        }
        assert Usage(1, 2).to_json()["type"] == "usage"
        assert Finish("stop").to_json() == {"type": "finish", "reason": "stop", "error": None}

    def test_missing_optional_fields_read_as_defaults(self) -> None:
        """A tool-call delta without id/name/arguments, and a usage without details, still read."""
        assert ToolCallDelta.from_json({"type": "tool-call-delta", "index": 0}) == ToolCallDelta(0)
        assert Usage.from_json({"type": "usage", "input_tokens": 3, "output_tokens": 4}) == Usage(3, 4)

    def test_finish_error_rules(self) -> None:
        """error is required for reason 'error', optional for 'aborted', refused otherwise."""
        failure = Failure("boom", "SERVER", 503)
        assert Finish("error", failure).error == failure
        assert Finish("aborted").error is None
        with pytest.raises(ValueError, match="needs error=Failure"):
            Finish("error")
        with pytest.raises(ValueError, match="carries no error"):
            Finish("stop", failure)
        with pytest.raises(ValueError, match="must be one of aborted, error"):
            Finish("done")  # type: ignore[arg-type]

    def test_failure_checks_code_and_numbers(self) -> None:
        """Failure refuses unknown codes, non-positive statuses and negative retry delays."""
        assert Failure("m", "RATE_LIMIT", 429, 2).retry_after == 2.0
        with pytest.raises(ValueError, match="must be one of ABORTED"):
            Failure("m", "TEAPOT")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="must be > 0"):
            Failure("m", "SERVER", 0)
        with pytest.raises(ValueError, match=">= 0"):
            Failure("m", "SERVER", None, -1.0)

    def test_indices_and_counts_are_non_negative_ints(self) -> None:
        """A negative index is a ValueError; a bool or float index a TypeError."""
        with pytest.raises(ValueError, match=r"TextDelta.index must be an int >= 0, got -1"):
            TextDelta(-1, "a")
        with pytest.raises(TypeError, match="got bool"):
            TextDelta(True, "a")
        with pytest.raises(TypeError, match="got float"):
            Usage(1.0, 2)  # type: ignore[arg-type]

    def test_usages_add_up(self) -> None:
        """a + b adds usages field by field."""
        assert Usage(1, 2, 3, 4, 5) + Usage(10, 20, 30, 40, 50) == Usage(11, 22, 33, 44, 55)


class _Signal:
    cancelled = False


class TestRequests:
    def test_signal_is_left_out_of_equality_and_json(self) -> None:
        """Two requests that differ only in their signal are equal; the JSON has no signal."""
        first = LlmRequest("p", "m", [UserMessage("hi", id="u")], signal=_Signal())
        second = LlmRequest("p", "m", [UserMessage("hi", id="u")])
        assert first == second
        assert "signal" not in first.to_json()
        assert LlmRequest.from_json(first.to_json(), signal=first.signal).signal is first.signal

    def test_request_freezes_its_tools_and_carries_its_config(self) -> None:
        """Tool schemas become FrozenDicts; config is the call config of the request."""
        schema = {"name": "read", "description": "Read a file", "parameters": {"type": "object"}}
        request = LlmRequest("p", "m", (), tools=[schema], max_tokens=100, temperature=1)
        assert type(request.tools[0]) is FrozenDict
        assert request.tools == (schema,)
        assert request.temperature == 1.0
        assert request.config == LlmCallConfig("p", "m", 100, 1.0)

    @pytest.mark.parametrize(
        ("build", "error", "match"),
        [
            (lambda: LlmRequest("p", "m", "hi"), TypeError, "LlmRequest.messages must be a sequence"),
            (lambda: LlmRequest("p", "m", [Text("hi")]), TypeError, r"messages\[0\] must be a UserMessage"),
            (lambda: LlmRequest("p", "m", [], tools=[{"name": "t"}]), ValueError, r"tools\[0\].description"),
            (lambda: LlmRequest("p", "m", [], tools=["t"]), TypeError, r"tools\[0\] must be a mapping"),
            (
                lambda: LlmRequest("p", "m", [], signal=object()),  # type: ignore[arg-type]
                TypeError,
                "must have a 'cancelled' attribute",
            ),
            (lambda: LlmRequest("p", "m", [], max_tokens=0), ValueError, "max_tokens must be > 0"),
            (lambda: LlmCallConfig("p", "m", temperature=True), TypeError, "expected a number or None"),
            (lambda: LlmCallConfig("p", "m", temperature=float("nan")), ValueError, "finite"),
            (lambda: ModelInfo(0, 10), ValueError, "context_window must be > 0"),
        ],
    )
    def test_bad_values_are_refused(
        self, build: Callable[[], object], error: type[Exception], match: str
    ) -> None:
        """Wrong types are TypeErrors, wrong values ValueErrors, each naming the field."""
        with pytest.raises(error, match=match):
            build()


class TestDecisions:
    def test_defaults(self) -> None:
        """The default decisions are empty: Allow(), Accept(), Retry() with no delay."""
        assert Allow().additional_context == ()
        assert Accept().content is None
        assert Retry().delay == 0.0
        assert ContinuationDecision("continue").reason is None

    def test_one_str_of_context_is_one_entry(self) -> None:
        """additional_context='note' is one entry, not four characters."""
        assert Allow("note").additional_context == ("note",)
        assert Accept(additional_context=["a", "b"]).additional_context == ("a", "b")

    def test_accept_content_becomes_blocks(self) -> None:
        """Accept(content='x') replaces the result with one Text block."""
        assert Accept("x").content == (Text("x"),)

    @pytest.mark.parametrize(
        ("build", "error", "match"),
        [
            (lambda: Retry(-1), ValueError, "finite number of seconds >= 0"),
            (lambda: Retry("soon"), TypeError, "number of seconds"),
            (lambda: ContinuationDecision("pause"), ValueError, "'continue' or 'stop'"),  # type: ignore[arg-type]
            (lambda: Allow([1]), TypeError, r"additional_context\[0\] must be a str"),
            (lambda: Accept([Reasoning("r")]), TypeError, "must be a Image or Text block"),
            (lambda: Block(None), TypeError, "Block.reason must be a str"),  # type: ignore[arg-type]
            (lambda: Deny(1), TypeError, "Deny.reason must be a str"),  # type: ignore[arg-type]
            (lambda: Ask(1), TypeError, "Ask.reason must be a str"),  # type: ignore[arg-type]
            (lambda: Reject(1), TypeError, "Reject.feedback must be a str"),  # type: ignore[arg-type]
            (lambda: ContinuationStop(1), TypeError, "ContinuationStop.reason must be a str"),  # type: ignore[arg-type]
        ],
    )
    def test_bad_values_are_refused(
        self, build: Callable[[], object], error: type[Exception], match: str
    ) -> None:
        """Decisions check their fields like every other value."""
        with pytest.raises(error, match=match):
            build()


class TestSessionEvents:
    def test_data_is_deep_frozen(self) -> None:
        """The event holds a frozen copy of its data; the caller's dict stays theirs."""
        data: dict[str, Any] = {"turn": 1, "items": [1]}
        event = SessionEvent("turn/start", 0, 12.5, data)
        data["items"].append(2)
        assert type(event.data) is FrozenDict
        assert event.data == {"turn": 1, "items": (1,)}
        assert event.to_json() == {
            "type": "turn/start",
            "seq": 0,
            "time": 12.5,
            "data": {"turn": 1, "items": [1]},
        }

    def test_frozen_data_is_kept_as_is(self) -> None:
        """Already-frozen data is not copied again."""
        data = FrozenDict(turn=1)
        assert SessionEvent("turn/start", 0, 0, data).data is data

    def test_non_json_data_names_the_event_type(self) -> None:
        """bytes, NaN, objects or cycles in data raise EventDataError naming the type and the path."""
        with pytest.raises(
            EventDataError, match=r"^tool/call: data.arguments\[2\]: bytes is not JSON"
        ) as caught:
            SessionEvent("tool/call", 3, 0, {"arguments": [1, 2, b"x"]})
        assert caught.value.event_type == "tool/call"
        loop: list[Any] = []
        loop.append(loop)
        with pytest.raises(EventDataError, match="cycle"):
            SessionEvent("x/y", 0, 0, {"loop": loop})
        with pytest.raises(EventDataError, match="float nan"):
            SessionEvent("x/y", 0, 0, {"n": float("nan")})

    @pytest.mark.parametrize(
        ("build", "error", "match"),
        [
            (lambda: SessionEvent("", 0, 0, {}), ValueError, "non-empty str"),
            (lambda: SessionEvent(1, 0, 0, {}), TypeError, "non-empty str"),  # type: ignore[arg-type]
            (lambda: SessionEvent("a/b", -1, 0, {}), ValueError, "seq must be an int >= 0"),
            (lambda: SessionEvent("a/b", 0, "now", {}), TypeError, "time must be a number"),
            (lambda: SessionEvent("a/b", 0, float("inf"), {}), ValueError, "finite seconds"),
            (lambda: SessionEvent("a/b", 0, 0, [1]), EventDataError, "a/b: data: expected a JSON object"),
            (
                lambda: SessionEvent("turn/start", 0, 0, {"surface": {"op": "append"}}),
                EventDataError,
                "only model-visible events",
            ),
            (
                lambda: SessionEvent("user/message", 0, 0, {"surface": {"op": "replace", "start": 2}}),
                EventDataError,
                "data.surface.end: missing",
            ),
        ],
    )
    def test_bad_fields_are_refused(
        self, build: Callable[[], object], error: type[Exception], match: str
    ) -> None:
        """Each field is checked; data problems are EventDataErrors naming the event type."""
        with pytest.raises(error, match=match):
            build()

    def test_surface_of_events(self) -> None:
        """Model-visible events append by default or carry a replace; others have no surface."""
        assert SessionEvent("turn/start", 0, 0, {}).surface is None
        assert SessionEvent("user/message", 0, 0, {}).surface == SurfaceOp.append()
        replace = {"op": "replace", "start": 1, "end": 4}
        op = SessionEvent("user/message", 0, 0, {"surface": replace}).surface
        assert op == SurfaceOp.replace(1, 4)
        assert op is not None
        assert op.removed == 3
        assert op.to_json() == replace

    def test_surface_op_checks_its_span(self) -> None:
        """append takes no bounds; replace needs 0 <= start <= end."""
        assert SurfaceOp.replace(2, 2).removed == 0
        with pytest.raises(ValueError, match="needs 0 <= start <= end"):
            SurfaceOp.replace(3, 1)
        with pytest.raises(ValueError, match="takes no start or end"):
            SurfaceOp("append", 0, 1)
        with pytest.raises(ValueError, match="int >= 0"):
            SurfaceOp.replace(-1, 1)


def test_message_json_may_leave_out_what_the_constructor_defaults() -> None:
    """A user message without source reads as {kind: user}; a tool result without is_error as false."""
    user = message_from_json({"role": "user", "id": "u1", "content": [{"type": "text", "text": "hi"}]})
    assert user == UserMessage(content="hi", id="u1")
    result = message_from_json({"role": "tool", "id": "t1", "call_id": "c1", "content": []})
    assert result == ToolResultMessage(call_id="c1", content=(), id="t1")
