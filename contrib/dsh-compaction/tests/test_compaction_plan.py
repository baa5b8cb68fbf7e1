"""Choosing the span: cut points keep tool calls with their results, keep the tail, prefer exchanges."""

from __future__ import annotations

from dsh_compaction._plan import Entry, Span, choose_span, cuts, entry_of
from hypothesis import given
from hypothesis import strategies as st

from dsh_core import AssistantMessage, SessionEvent, Text, ToolCall, ToolResultMessage, UserMessage


def prompt(seq: int, tokens: int = 10) -> Entry:
    return Entry(seq, "user", tokens, prompt=True)


def reply(seq: int, tokens: int = 10, *calls: str) -> Entry:
    return Entry(seq, "assistant", tokens, calls=calls)


def result(seq: int, call: str, tokens: int = 10) -> Entry:
    return Entry(seq, "tool", tokens, answers=call)


def tool_turn(first_seq: int, steps: int, result_tokens: int = 10) -> list[Entry]:
    """A prompt, ``steps`` tool steps (one call each), then an answer."""
    entries = [prompt(first_seq)]
    for step in range(steps):
        call = f"c{first_seq}-{step}"
        entries += [
            reply(first_seq + 1 + 2 * step, 10, call),
            result(first_seq + 2 + 2 * step, call, result_tokens),
        ]
    entries.append(reply(first_seq + 1 + 2 * steps))
    return entries


class TestCuts:
    def test_never_before_a_tool_result(self) -> None:
        """A cut never lands on a tool result: the tail never starts with one."""
        entries = tool_turn(0, 3)
        found = cuts(entries)
        assert all(entries[cut].role != "tool" for cut in found)
        assert found == [1, 3, 5, 7]

    def test_parallel_calls_stay_with_all_their_results(self) -> None:
        """An assistant message with two calls is cut off only after both results."""
        entries = [
            prompt(0),
            reply(1, 10, "a", "b"),
            result(2, "a"),
            Entry(3, "user", 5),  # context that arrived between the results
            result(4, "b"),
            reply(5),
        ]
        assert cuts(entries) == [1, 5]

    def test_calls_without_any_result_do_not_block(self) -> None:
        """A call that has no result anywhere (a damaged log) does not forbid every later cut."""
        entries = [prompt(0), reply(1, 10, "lost"), prompt(2), reply(3)]
        assert cuts(entries) == [1, 2, 3]


class TestChooseSpan:
    def test_keeps_at_least_keep_tokens(self) -> None:
        """The cut is the last one whose tail still holds ``keep`` tokens."""
        entries = tool_turn(0, 5)  # 12 entries of 10 tokens
        span = choose_span(entries, keep=35, room=1000)
        assert span == Span(0, 7, 70, 50, False)

    def test_prefers_a_whole_exchange_when_it_fits(self) -> None:
        """With room enough, the cut moves back to the start of the last exchange that keeps ``keep``."""
        entries = tool_turn(0, 2) + tool_turn(6, 2)  # two exchanges of 6 entries
        span = choose_span(entries, keep=15, room=1000)
        assert span is not None
        assert span.end == 6
        assert span.at_exchange
        tight = choose_span(entries, keep=15, room=40)
        assert tight is not None
        assert tight.end == 9
        assert not tight.at_exchange

    def test_nothing_older_than_the_tail(self) -> None:
        """When the whole surface is within ``keep``, nothing is summarised."""
        assert choose_span(tool_turn(0, 2), keep=1000, room=1000) is None

    def test_an_earlier_summary_alone_is_not_summarised_again(self) -> None:
        """A span made only of an earlier summary is not worth a call; with more, the summary is folded in."""
        earlier = Entry(0, "user", 50, summary=True)
        assert choose_span([earlier, reply(1), prompt(2)], keep=0, room=1000, mode="largest") is not None
        assert choose_span([earlier, prompt(1)], keep=0, room=1000, mode="largest") is None

    def test_min_tokens(self) -> None:
        """A span not larger than ``min_tokens`` is not worth the model call."""
        entries = tool_turn(0, 2)
        assert choose_span(entries, keep=10, room=1000, min_tokens=100) is None

    def test_fit_gives_up_keep_to_get_under_the_threshold(self) -> None:
        """``fit`` cuts into the kept tail when keeping it cannot come under the threshold."""
        entries = tool_turn(0, 5)
        assert choose_span(entries, keep=60, room=30, mode="keep") == Span(0, 5, 50, 70, False)
        fitted = choose_span(entries, keep=60, room=30, mode="fit")
        assert fitted is not None
        assert fitted.tail_tokens <= 30
        assert fitted.end == 9  # the first cut whose tail fits

    def test_largest_and_manual(self) -> None:
        """``largest`` keeps only the last unit; ``keep-or-largest`` honours ``keep`` when it can."""
        entries = tool_turn(0, 3)  # cuts at 1, 3, 5, 7
        assert choose_span(entries, keep=25, room=1000, mode="largest") == Span(0, 7, 70, 10, False)
        assert choose_span(entries, keep=25, room=1000, mode="keep-or-largest") == Span(0, 5, 50, 30, False)
        assert choose_span(entries, keep=500, room=1000, mode="keep-or-largest") == Span(0, 7, 70, 10, False)


@st.composite
def surfaces(draw: st.DrawFn) -> list[Entry]:
    """Random surfaces as the loop makes them: prompts, replies with 0-3 calls and their results, context."""
    entries: list[Entry] = []
    seq = 0
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["prompt", "reply", "context"]))
        if kind == "prompt":
            entries.append(Entry(seq, "user", draw(st.integers(0, 50)), prompt=True))
        elif kind == "context":
            entries.append(Entry(seq, "user", draw(st.integers(0, 50))))
        else:
            calls = tuple(f"c{seq}-{n}" for n in range(draw(st.integers(0, 3))))
            entries.append(Entry(seq, "assistant", draw(st.integers(0, 50)), calls=calls))
            for call in calls:
                seq += 1
                entries.append(Entry(seq, "tool", draw(st.integers(1, 80)), answers=call))
        seq += 1
    return entries


@given(
    surfaces(),
    st.integers(0, 200),
    st.integers(0, 300),
    st.sampled_from(["keep", "fit", "keep-or-largest", "largest"]),
)
def test_no_span_separates_a_call_from_its_result(
    entries: list[Entry], keep: int, room: int, mode: str
) -> None:
    """Whatever the sizes and the mode, the span holds whole call/result groups and the tail starts clean."""
    span = choose_span(entries, keep=keep, room=room, mode=mode)  # type: ignore[arg-type]
    if span is None:
        return
    assert span.start == 0
    assert 0 < span.end < len(entries)
    inside = entries[: span.end]
    outside = entries[span.end :]
    assert outside[0].role != "tool"
    calls = {call for entry in inside for call in entry.calls}
    assert not any(entry.answers in calls for entry in outside)
    answered = {entry.answers for entry in inside}
    assert not any(call in answered for entry in outside for call in entry.calls)
    if mode == "keep":
        assert sum(entry.tokens for entry in outside) >= keep


def test_entry_of_reads_logged_messages() -> None:
    """The planning view of logged messages: role, calls, answered call, prompt and summary flags."""
    user = UserMessage(content="hi")
    summary = UserMessage(content="sum", source={"kind": "compaction"})
    calling = AssistantMessage(content=(Text("x"), ToolCall("c1", "read", "{}")))
    empty = AssistantMessage(content=())
    answer = ToolResultMessage(call_id="c1", content="done")
    events = [
        SessionEvent("user/message", 0, 0.0, {"message": user.to_json()}),
        SessionEvent("user/message", 1, 0.0, {"message": summary.to_json()}),
        SessionEvent("assistant/message", 2, 0.0, {"message": calling.to_json()}),
        SessionEvent("assistant/message", 3, 0.0, {"message": empty.to_json()}),
        SessionEvent("tool/result", 4, 0.0, {"message": answer.to_json()}),
    ]
    first, second, third, fourth, fifth = (entry_of(event) for event in events)
    assert first.prompt
    assert not first.summary
    assert second.summary
    assert not second.prompt
    assert third.calls == ("c1",)
    assert third.tokens > 0
    assert fourth.tokens == 0  # an empty reply is never sent
    assert fifth.answers == "c1"
