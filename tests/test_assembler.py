"""BlockAssembler: chunks of one model call in, the assistant message out."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core.llm import (
    BlockAssembler,
    Chunk,
    Failure,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from dsh_core.vocabulary import Reasoning, Text, ToolCall

from . import strategies as s


def _assemble(*chunks: Chunk) -> BlockAssembler:
    assembler = BlockAssembler("prov", "mod")
    for chunk in chunks:
        assembler.add(chunk)
    return assembler


def _pieces(text: str, cuts: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)] or [""]


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[Text | Reasoning | ToolCall], list[Chunk]]:
    """Blocks, and a stream that splits each into deltas and interleaves the blocks at random."""
    blocks = draw(st.lists(s.texts | s.reasonings | s.tool_calls, max_size=5))
    queues: list[list[Chunk]] = []
    for index, block in enumerate(blocks):
        if isinstance(block, ToolCall):
            parts = _pieces(block.arguments, draw(st.lists(st.integers(0, 100), max_size=4)))
            queue: list[Chunk] = [ToolCallDelta(index, block.id, block.name, parts[0])]
            queue += [ToolCallDelta(index, None, None, part) for part in parts[1:]]
        else:
            delta = TextDelta if isinstance(block, Text) else ReasoningDelta
            queue = [delta(index, part) for part in _pieces(block.text, draw(st.lists(st.integers(0, 100))))]
        queues.append(queue)
    stream: list[Chunk] = []
    started = 0  # blocks start in order; once started, their deltas interleave freely
    while any(queues):
        live = [i for i in range(started) if queues[i]]
        if started < len(queues) and (not live or draw(st.booleans())):
            live = [started]
            started += 1
        stream.append(queues[draw(st.sampled_from(live))].pop(0))
    return blocks, stream


class TestAssembly:
    @given(streams())
    def test_interleaved_deltas_rebuild_the_blocks(self, case: tuple[list[Any], list[Chunk]]) -> None:
        """However the blocks are split and interleaved, the message holds exactly those blocks."""
        blocks, stream = case
        # Reasoning deltas carry no signature, so none can come back.
        expected = [Reasoning(b.text) if isinstance(b, Reasoning) else b for b in blocks]
        assert list(_assemble(*stream).message().content) == expected

    def test_blocks_keep_the_order_of_first_appearance(self) -> None:
        """The block whose index shows up first comes first, whatever the index numbers are."""
        message = _assemble(
            ReasoningDelta(5, "think"),
            TextDelta(2, "Hel"),
            ReasoningDelta(5, "ing"),
            TextDelta(2, "lo"),
            Finish("stop"),
        ).message()
        assert message.content == (Reasoning("thinking"), Text("Hello"))
        assert (message.provider, message.model) == ("prov", "mod")

    def test_tool_call_id_and_name_first_non_none_wins(self) -> None:
        """A later id or name does not overwrite the first one; arguments concatenate."""
        message = _assemble(
            ToolCallDelta(0, None, None, '{"pa'),
            ToolCallDelta(0, "call_a", None, 'th":'),
            ToolCallDelta(0, "call_b", "read", ' "x"}'),
            ToolCallDelta(0, None, "write", ""),
            Finish("tool-calls"),
        ).message()
        assert message.content == (ToolCall("call_a", "read", '{"path": "x"}'),)

    def test_tool_call_without_id_or_name(self) -> None:
        """A call that never got an id is call-<index>; one without a name gets ''."""
        message = _assemble(ToolCallDelta(3, arguments="{}"), Finish("tool-calls")).message()
        assert message.content == (ToolCall("call-3", "", "{}"),)

    def test_max_tokens_drops_tool_calls(self) -> None:
        """On a max-tokens finish the (cut-off) tool calls are dropped; text stays."""
        message = _assemble(
            TextDelta(0, "Let me look."),
            ToolCallDelta(1, "c1", "read", '{"path": "a'),
            Finish("max-tokens"),
        ).message()
        assert message.content == (Text("Let me look."),)

    def test_tool_calls_are_kept_on_other_finishes(self) -> None:
        """Only max-tokens drops calls: other finishes, or none at all, keep them."""
        call = ToolCallDelta(0, "c1", "read", "{}")
        for ending in ([Finish("tool-calls")], [Finish("stop")], []):
            assert _assemble(call, *ending).message().tool_calls == (ToolCall("c1", "read", "{}"),)

    def test_interrupted_keeps_only_non_blank_text_and_reasoning(self) -> None:
        """A cancelled stream keeps its text and reasoning, never tool calls or blank blocks."""
        assembler = _assemble(
            ReasoningDelta(0, "hmm"),
            TextDelta(1, "  \n"),
            ToolCallDelta(2, "c1", "read", "{}"),
            TextDelta(3, "partial answ"),
        )
        assert assembler.interrupted().content == (Reasoning("hmm"), Text("partial answ"))
        assert _assemble(TextDelta(0, " ")).interrupted().content == ()

    def test_usage_and_finish_are_recorded(self) -> None:
        """The last Usage wins; the Finish is kept, with its error."""
        failure = Failure("overloaded", "SERVER", 529)
        assembler = _assemble(TextDelta(0, "a"), Usage(1, 1), Usage(5, 7), Finish("error", failure))
        assert assembler.usage == Usage(5, 7)
        assert assembler.finish == Finish("error", failure)
        empty = BlockAssembler()
        assert (empty.usage, empty.finish) == (None, None)
        assert empty.message().content == ()

    def test_message_id(self) -> None:
        """message(id=...) uses that id; otherwise each call gets a fresh one."""
        assembler = _assemble(TextDelta(0, "a"))
        assert assembler.message(id="m1").id == "m1"
        assert assembler.interrupted(id="m2").id == "m2"
        assert assembler.message().id != assembler.message().id


class TestMisuse:
    def test_an_index_cannot_change_kind(self) -> None:
        """A reasoning delta for an index that holds text is an adapter bug: ValueError."""
        assembler = _assemble(TextDelta(0, "a"))
        with pytest.raises(ValueError, match="chunk index 0 is a text block, but a ReasoningDelta came"):
            assembler.add(ReasoningDelta(0, "b"))
        with pytest.raises(ValueError, match="chunk index 0 is a text block, but a ToolCallDelta came"):
            assembler.add(ToolCallDelta(0, "c", "n", "{}"))

    def test_nothing_after_finish(self) -> None:
        """A chunk after the Finish is refused: the Finish must be last."""
        assembler = _assemble(Finish("stop"))
        with pytest.raises(ValueError, match="Usage after Finish"):
            assembler.add(Usage(1, 1))

    def test_only_chunks(self) -> None:
        """Anything but a chunk is a TypeError."""
        with pytest.raises(TypeError, match="takes stream chunks"):
            BlockAssembler().add(Text("a"))  # type: ignore[arg-type]
