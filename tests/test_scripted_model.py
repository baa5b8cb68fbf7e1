"""ScriptedModel: replies in order, the requests it saw, and every way a reply can end."""

from __future__ import annotations

import json

import anyio
import pytest

from dsh_core.llm import (
    BlockAssembler,
    Chunk,
    Failure,
    Finish,
    LlmAdapter,
    LlmRequest,
    ModelInfo,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from dsh_core.testing import Reply, ScriptedModel
from dsh_core.vocabulary import Reasoning, Text, ToolCall, UserMessage

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _request(text: str = "hi") -> LlmRequest:
    return LlmRequest("scripted", "test", [UserMessage(text)])


async def _collect(model: ScriptedModel, request: LlmRequest | None = None) -> list[Chunk]:
    return [chunk async for chunk in model.stream(request or _request())]


async def _collect_into(model: ScriptedModel, seen: list[Chunk]) -> None:
    """Like _collect, keeping what came before an exception."""
    async for chunk in model.stream(_request()):
        seen.append(chunk)


async def test_replies_play_in_order_and_requests_are_recorded() -> None:
    """Each stream() call plays the next reply; every request is kept in order."""
    model = ScriptedModel(["first", ScriptedModel.text("second")])
    one, two = _request("a"), _request("b")
    assert await _collect(model, one) == [TextDelta(0, "first"), Finish("stop")]
    assert await _collect(model, two) == [TextDelta(0, "second"), Finish("stop")]
    assert model.requests == [one, two]
    assert (model.played, model.remaining) == (2, 0)
    model.assert_consumed()


async def test_text_is_split_into_the_asked_number_of_chunks() -> None:
    """chunks=3 gives three text deltas that join to the text, then usage and finish."""
    usage = Usage(10, 3)
    chunks = await _collect(ScriptedModel([ScriptedModel.text("Hello world", chunks=3, usage=usage)]))
    deltas = [c for c in chunks if isinstance(c, TextDelta)]
    assert len(deltas) == 3
    assert "".join(d.text for d in deltas) == "Hello world"
    assert chunks[-2:] == [usage, Finish("stop")]


async def test_short_text_gives_fewer_chunks_and_empty_text_one() -> None:
    """A text shorter than chunks= is split per character; an empty text is one empty delta."""
    model = ScriptedModel([ScriptedModel.text("ab", chunks=5), ScriptedModel.text("", chunks=5)])
    assert await _collect(model) == [TextDelta(0, "a"), TextDelta(0, "b"), Finish("stop")]
    assert await _collect(model) == [TextDelta(0, ""), Finish("stop")]


async def test_tool_calls_get_predictable_ids_and_finish_tool_calls() -> None:
    """Unnamed calls are call_1, call_2, ... across replies; explicit ids are kept."""
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("read", {"path": "a.py"}, text="Reading.", chunks=2),
            Reply(ScriptedModel.call("ls"), ScriptedModel.call("cat", '{"f": 1}', id="mine")),
        ]
    )
    first = BlockAssembler()
    for chunk in await _collect(model):
        first.add(chunk)
    assert first.finish == Finish("tool-calls")
    assert first.message().content == (Text("Reading."), ToolCall("call_1", "read", '{"path":"a.py"}'))
    second = await _collect(model)
    calls = [c for c in second if isinstance(c, ToolCallDelta) and c.id is not None]
    assert [(c.id, c.name) for c in calls] == [("call_2", "ls"), ("mine", "cat")]
    assert (
        json.loads("".join(c.arguments for c in second if isinstance(c, ToolCallDelta) and c.index == 0))
        == {}
    )


async def test_a_reply_assembles_back_to_its_blocks() -> None:
    """What a Reply streams assembles into the blocks it was built from."""
    blocks = (Reasoning("Let me think."), Text("Here: "), ToolCall("c9", "run", '{"cmd": "ls -la"}'))
    assembler = BlockAssembler()
    for chunk in await _collect(ScriptedModel([Reply(*blocks, chunks=4)])):
        assembler.add(chunk)
    assert assembler.message().content == blocks
    assert assembler.finish == Finish("tool-calls")


async def test_reasoning_reply() -> None:
    """reasoning(thought, answer) streams a reasoning block, then the answer."""
    chunks = await _collect(ScriptedModel([ScriptedModel.reasoning("hmm", "yes")]))
    assert chunks == [ReasoningDelta(0, "hmm"), TextDelta(1, "yes"), Finish("stop")]


async def test_finish_reason_can_be_forced() -> None:
    """finish= overrides the inferred reason (e.g. a max-tokens cut-off)."""
    chunks = await _collect(ScriptedModel([Reply("cut", finish="max-tokens")]))
    assert chunks[-1] == Finish("max-tokens")


async def test_failure_reply_ends_with_an_error_finish() -> None:
    """failure() streams any prefix, then Finish('error') with the Failure; ABORTED finishes aborted."""
    model = ScriptedModel(
        [
            ScriptedModel.failure("RATE_LIMIT", "slow down", "partial", status=429, retry_after=2),
            ScriptedModel.failure(Failure("stopped", "ABORTED")),
        ]
    )
    assert await _collect(model) == [
        TextDelta(0, "partial"),
        Finish("error", Failure("slow down", "RATE_LIMIT", 429, 2.0)),
    ]
    assert await _collect(model) == [Finish("aborted", Failure("stopped", "ABORTED"))]


async def test_raises_at_once_or_after_chunks() -> None:
    """raises(exc) raises at the first iteration; with blocks, after streaming them."""
    model = ScriptedModel(
        [ScriptedModel.raises(ConnectionError("down")), ScriptedModel.raises(OSError("x"), "ab", chunks=2)]
    )
    with pytest.raises(ConnectionError, match="down"):
        await _collect(model)
    seen: list[Chunk] = []
    with pytest.raises(OSError, match="x"):
        await _collect_into(model, seen)
    assert seen == [TextDelta(0, "a"), TextDelta(0, "b")]


async def test_hang_waits_until_cancelled() -> None:
    """hang() streams its prefix, then blocks until the consumer's scope is cancelled."""
    model = ScriptedModel([ScriptedModel.hang("partial")])
    seen: list[Chunk] = []
    with anyio.CancelScope() as scope:
        async for chunk in model.stream(_request()):
            seen.append(chunk)
            scope.cancel()  # the next step of the stream waits forever: only cancellation ends it
    assert scope.cancelled_caught
    assert seen == [TextDelta(0, "partial")]


async def test_no_finish_just_ends() -> None:
    """no_finish() ends the stream without a Finish chunk."""
    assert await _collect(ScriptedModel([ScriptedModel.no_finish("a")])) == [TextDelta(0, "a")]


async def test_raw_chunks_are_played_exactly() -> None:
    """chunks(...) plays the given chunks and adds nothing."""
    raw: list[Chunk] = [TextDelta(1, "x"), ReasoningDelta(1, "clash")]
    assert await _collect(ScriptedModel([ScriptedModel.chunks(*raw)])) == raw


async def test_checkpoints_let_a_cancel_land_mid_stream() -> None:
    """With checkpoints=True a cancel stops the stream at the next chunk; without, it runs to the end."""
    for checkpoints, expected in ((True, 1), (False, 4)):
        model = ScriptedModel([ScriptedModel.text("abc", chunks=3)], checkpoints=checkpoints)
        seen: list[Chunk] = []
        with anyio.CancelScope() as scope:
            async for chunk in model.stream(_request()):
                seen.append(chunk)
                scope.cancel()
        assert len(seen) == expected


async def test_exhausted_script_yields_an_error_finish_and_fails_assert_consumed() -> None:
    """Past the end of the script, stream() finishes with an UNKNOWN error, and the overrun is counted."""
    model = ScriptedModel(["only"])
    await _collect(model)
    chunks = await _collect(model)
    assert len(chunks) == 1
    assert isinstance(chunks[0], Finish)
    assert chunks[0].reason == "error"
    assert chunks[0].error is not None
    assert chunks[0].error.code == "UNKNOWN"
    assert "script exhausted after 1 replies" in chunks[0].error.message
    assert model.overruns == 1
    with pytest.raises(AssertionError, match="1 requests came after the script ran out"):
        model.assert_consumed()


async def test_assert_consumed_names_the_replies_left() -> None:
    """Replies never requested make assert_consumed fail, saying how many are left."""
    model = ScriptedModel(["a", "b", "c"])
    await _collect(model)
    assert model.remaining == 2
    with pytest.raises(AssertionError, match="2 scripted replies were never requested"):
        model.assert_consumed()


async def test_replies_can_be_added_later() -> None:
    """add() appends to the script."""
    model = ScriptedModel()
    model.add("late", ScriptedModel.text("later"))
    assert model.remaining == 2
    assert (await _collect(model))[0] == TextDelta(0, "late")


async def test_it_is_an_llm_adapter_with_model_info() -> None:
    """It satisfies the LlmAdapter protocol; model_info comes from the constructor."""
    model = ScriptedModel(provider="fake", context_window=1000, max_output_tokens=100)
    assert isinstance(model, LlmAdapter)
    assert model.provider == "fake"
    assert model.model_info("anything") == ModelInfo(1000, 100)


def test_bad_script_entries_are_refused() -> None:
    """A script entry must be a Reply or a str; chunks= must be a positive int."""
    with pytest.raises(TypeError, match="a script entry is a Reply"):
        ScriptedModel([42])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="chunks must be an int >= 1"):
        ScriptedModel.text("x", chunks=0)
    with pytest.raises(ValueError, match="exactly when then='raise'"):
        Reply.of_chunks(then="raise")
