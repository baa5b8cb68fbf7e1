"""The JSON codec: the vocabulary's JSON byte for byte, absent keys and nulls, the codec's options."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import attrs
import pytest

from dsh_core.llm import Failure, Finish, LlmCallConfig, LlmRequest, ModelInfo, TextDelta, Usage
from dsh_core.session_log import SessionEvent, SessionMeta, SurfaceOp, UserMessageEvent
from dsh_core.vocabulary import (
    Accept,
    Allow,
    Ask,
    AssistantMessage,
    Block,
    ContinuationDecision,
    ContinuationStop,
    Deny,
    Image,
    ObjectCodec,
    Reasoning,
    Reject,
    Retry,
    TaggedUnion,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VocabularyError,
    dumps_json,
    json_field,
    thaw_json,
)

GOLDEN = Path(__file__).resolve().parent / "golden" / "vocabulary.jsonl"

SCHEMA = {"name": "read", "description": "Read a file", "parameters": {"type": "object"}}
PICTURE = Image("image/png", "aGk=")
USER = UserMessage((Text("look"), PICTURE), {"kind": "plugin", "plugin": "todo", "note": [1]}, "u1")
REPLY = AssistantMessage((Reasoning("think"), Text("so"), ToolCall("c1", "read", "{}")), "p", "m", "a1")
RESULT = ToolResultMessage("c1", (Text("x"), PICTURE), True, "t1")

#: A value of every class whose JSON the session-log golden file does not show, as main wrote it
#: before the codec took these classes over (the file was made by main's to_json).
SAMPLES: list[Any] = [
    PICTURE,
    Reasoning("r"),
    USER,
    REPLY,
    RESULT,
    Allow(),
    Allow(("note", "more")),
    Block("no"),
    Deny("never"),
    Ask("maybe"),
    Accept(),
    Accept((Text("replaced"), PICTURE), ("after",)),
    Reject("try again"),
    Retry(),
    Retry(2.5),
    ContinuationDecision("continue", "more work"),
    ContinuationDecision("stop"),
    ContinuationStop("enough"),
    LlmRequest("p", "m", (USER, REPLY, RESULT), "be brief", (SCHEMA,), 100, 0.5, "high", "s1"),
    LlmRequest("p", "m", ()),
    ModelInfo(1000, 100),
    Finish("aborted"),
    Failure("slow", "RATE_LIMIT"),
    LlmCallConfig("p", "m"),
    SurfaceOp.append(),
    SurfaceOp.replace(1, 3),
    SessionEvent("user/message", 3, 12.5, {"message": USER.to_json(), "surface": {"op": "replace", "start": 0, "end": 2}}),
    SessionEvent("note/x", 0, 0, {"list": [1, 2.5, None, True], "nested": {"a": "b"}}),
    SessionMeta(cwd="/work", parent_id="p1", seed_length=3, extra={"k": [1]}),
]


def golden_lines() -> list[str]:
    return [dumps_json({"class": type(sample).__name__, "json": sample.to_json()}) for sample in SAMPLES]


def test_vocabulary_json_is_byte_for_byte_what_it_was() -> None:
    """Every converted class writes the JSON main wrote before the codec took it over (SPEC §7)."""
    assert GOLDEN.read_text(encoding="utf-8").splitlines() == golden_lines(), (
        f"the JSON of a vocabulary class changed; if that is intended, regenerate {GOLDEN.name}"
    )


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda sample: type(sample).__name__)
def test_each_sample_reads_back_equal(sample: Any) -> None:
    """from_json(to_json()) gives back an equal value for each golden sample."""
    assert type(sample).from_json(sample.to_json()) == sample


# ---------------------------------------------------------------------- absent keys and nulls


def test_an_absent_key_reads_as_the_default_and_a_null_by_the_type() -> None:
    """A key left out takes the field's default; an explicit null is refused where the type has no None."""
    message = USER.to_json()
    del message["source"]
    assert UserMessage.from_json(message).source == {"kind": "user"}
    with pytest.raises(VocabularyError) as caught:
        UserMessage.from_json({**message, "source": None})
    assert caught.value.field == "message.source"
    data = {"message": USER.to_json()}
    assert UserMessageEvent.from_data(data).surface == SurfaceOp.append()
    with pytest.raises(VocabularyError) as caught:
        UserMessageEvent.from_data({**data, "surface": None})
    assert caught.value.field == "data.surface"
    # ... and a null is read as None where the type admits it
    assert UserMessageEvent.from_data({**data, "queued_id": None}).queued_id is None


def test_a_message_id_is_required_in_json() -> None:
    """The constructor makes an id, but a message read from JSON must carry its own."""
    message = REPLY.to_json()
    del message["id"]
    with pytest.raises(VocabularyError, match=r"^message.id: missing$"):
        AssistantMessage.from_json(message)


def test_a_retry_says_its_delay() -> None:
    """A retry decision's JSON must carry its delay, as before the codec."""
    with pytest.raises(VocabularyError, match=r"^decision.delay: missing$"):
        Retry.from_json({"kind": "retry"})


def test_a_bad_item_is_named_by_its_index() -> None:
    """An item of an array is named by its index, though paths are built only for an error."""
    data = {"kind": "allow", "additional_context": ["a", "b", 3]}
    with pytest.raises(VocabularyError) as caught:
        Allow.from_json(data)
    assert caught.value.field == "decision.additional_context[2]"


def test_a_surface_op_keeps_its_rules_when_read() -> None:
    """An append has no span, a replace needs both ends: the reader names the field."""
    with pytest.raises(VocabularyError, match=r"^surface.start: missing"):
        SurfaceOp.from_json({"op": "replace", "end": 2})
    with pytest.raises(VocabularyError, match=r"^surface.op: missing"):
        SurfaceOp.from_json({})
    assert SurfaceOp.from_json({"op": "append"}) == SurfaceOp.append()


def test_an_event_read_is_built_like_a_constructed_one() -> None:
    """SessionEvent.from_json builds the event without its constructor; it equals one built by it."""
    event = SessionEvent("tool/result", 7, 1.5, {"turn": 1, "message": RESULT.to_json()})
    read = SessionEvent.from_json(event.to_json())
    assert read == event
    assert read.payload == event.payload
    assert type(read.time) is float
    assert SessionEvent.from_json({"type": "a/b", "seq": 0, "time": 3, "data": {}}).time == 3.0


# ---------------------------------------------------------------------- the codec's options


@attrs.frozen
class _Dog:
    name: str
    size: Literal["s", "l"] = "s"
    tricks: tuple[str, ...] = ()


@attrs.frozen
class _Cat:
    lives: int
    owner: str | None = None


_DOG = ObjectCodec(_Dog, tag=("pet", "dog"), keys=("tricks", "name", "size"), fields={"size": json_field(omit_default=True)})


def _one_owner(path: str, lives: int, owner: str | None) -> None:
    if owner is not None and lives < 9:
        raise VocabularyError(f"{path}.owner: a cat with an owner has all nine lives", field=f"{path}.owner")


_CAT = ObjectCodec(_Cat, tag=("pet", "cat"), fields={"lives": json_field(minimum=1)}, check=_one_owner)
_PETS = TaggedUnion("pet", "pet", (_Dog, _Cat))


def test_keys_follow_the_order_given_and_omitted_defaults_stay_out() -> None:
    """keys= orders the JSON (tag first); omit_default leaves a default out."""
    assert list(_DOG.encode_plain(_Dog("rex", tricks=("sit",)))) == ["pet", "tricks", "name"]
    assert _DOG.encode_plain(_Dog("rex", "l")) == {"pet": "dog", "tricks": [], "name": "rex", "size": "l"}
    assert _DOG.read({"pet": "dog", "name": "rex"}, "pet") == _Dog("rex")


def test_a_tagged_union_reads_each_member_and_names_what_is_wrong() -> None:
    """The tag picks the member; an unknown or missing tag, or one not allowed, is named."""
    assert _PETS.read({"pet": "cat", "lives": 9, "owner": "ann"}, "pet") == _Cat(9, "ann")
    with pytest.raises(VocabularyError, match=r"^pet.pet: unknown pet 'cow'; expected one of dog, cat$"):
        _PETS.read({"pet": "cow"}, "pet")
    with pytest.raises(VocabularyError, match=r"^pet.pet: missing; expected one of dog, cat$"):
        _PETS.read({}, "pet")
    dogs_only = _PETS.reader(only=("dog",), refuse_other=lambda tag: f"no {tag}s here")
    with pytest.raises(VocabularyError, match=r"^pet.pet: no cats here$"):
        dogs_only({"pet": "cat", "lives": 9}, "pet")


def test_a_rule_across_fields_runs_after_the_fields() -> None:
    """check= sees the values read and names its own field; each field is checked first."""
    with pytest.raises(VocabularyError, match=r"^pet.owner: a cat with an owner"):
        _CAT.read({"pet": "cat", "lives": 3, "owner": "ann"}, "pet")
    with pytest.raises(VocabularyError, match=r"^pet.lives: expected an integer >= 1, got 0$"):
        _CAT.read({"pet": "cat", "lives": 0}, "pet")


def test_usage_and_chunks_keep_their_tags() -> None:
    """Chunks read through the union and write their tag first."""
    assert next(iter(Usage(1, 2).to_json())) == "type"
    assert TextDelta.from_json({"type": "text-delta", "index": 0, "text": "a"}) == TextDelta(0, "a")


@attrs.frozen
class _Step:
    step: int


def _say_step(value: object, path: str) -> int:
    raise VocabularyError(f"{path}: not a step: {value!r}", field=path)


_STEP = ObjectCodec(_Step, fields={"step": json_field(minimum=1, refuse=_say_step)})


def test_refuse_words_the_error_of_a_field_checked_inline() -> None:
    """refuse= is called only for a value the type refuses; one it takes passes as is."""
    assert _STEP.read({"step": 3}, "data") == _Step(3)
    for wrong in (0, True, "1", None):
        with pytest.raises(VocabularyError, match=r"^data.step: not a step: "):
            _STEP.read({"step": wrong}, "data")
    with pytest.raises(TypeError, match="refuse= is for a str, bool, int or Literal field"):
        ObjectCodec(_Weight, fields={"kilos": json_field(refuse=_say_step)})


@attrs.frozen
class _Weight:
    kilos: float


@attrs.frozen
class _Note:
    text: str | None
    tags: tuple[str, ...] = ()


_NOTE = ObjectCodec(_Note)


def test_an_unknown_key_is_refused_whatever_else_is_absent() -> None:
    """Keys are counted, not listed, on the fast path; an unknown one is still named."""
    assert _NOTE.read({}, "note") == _Note(None)
    with pytest.raises(VocabularyError, match=r"^note.colour: unknown field; expected only tags, text$"):
        _NOTE.read({"colour": "red"}, "note")
    with pytest.raises(VocabularyError, match=r"^note.colour: unknown field"):
        _NOTE.read({"text": "a", "colour": "red"}, "note")
    with pytest.raises(VocabularyError, match=r"^message.colour: unknown field"):
        UserMessage.from_json({**USER.to_json(), "colour": "red"})


@attrs.frozen
class _Home:
    pets: tuple[_Dog | _Cat, ...] = attrs.field(metadata=json_field(read=_PETS.read))


def test_a_union_of_classes_without_to_json_is_encoded_by_their_codecs() -> None:
    """Members that have only a codec (no to_json of their own) are encoded by it, frozen or plain."""
    codec = ObjectCodec(_Home)
    home = _Home((_Dog("rex"), _Cat(9)))
    as_json = {"pets": [{"pet": "dog", "tricks": [], "name": "rex"}, {"pet": "cat", "lives": 9, "owner": None}]}
    assert codec.encode_plain(home) == as_json
    assert thaw_json(codec.encode(home)) == as_json
    assert codec.read(as_json, "home") == home
