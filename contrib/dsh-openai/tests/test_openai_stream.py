"""Streamed answers read from a real loopback server: deltas, block indexes, usage, finish reasons."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import pytest
from dsh_harness_openai._stream import StreamParser, usage_from_json
from dsh_harness_openai.testing import LlmServer, Reply, chunk

from dsh_core.llm import Failure, Finish, ReasoningDelta, TextDelta, ToolCallDelta, Usage

#: the ``chat`` fixture: ``await chat("provider/model", messages, **request_fields)`` -> the chunks
Chat: TypeAlias = Callable[..., Awaitable[list[Any]]]

pytestmark = pytest.mark.anyio


async def test_text_streams_as_deltas_of_one_block(llm_server: LlmServer, chat: Chat) -> None:
    """Content deltas become TextDeltas of block 0, then the usage and a `stop` finish."""
    d = chunk
    llm_server.stream(
        d(role="assistant", content=""),
        d(content="Hel"),
        d(content="lo"),
        d(finish="stop"),
        {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 2}},
    )
    chunks = await chat()
    assert chunks == [TextDelta(0, "Hel"), TextDelta(0, "lo"), Usage(12, 2), Finish("stop")]


async def test_reasoning_and_text_get_their_own_indexes(llm_server: LlmServer, chat: Chat) -> None:
    """reasoning_content is block 0 and the answer block 1, in the order they appeared."""
    d = chunk
    llm_server.stream(
        d(reasoning_content="Let me ", content=None),
        d(reasoning_content="think.", content=None),
        d(content="42", reasoning_content=None),
        d(finish="stop"),
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 5,
                "completion_tokens": 9,
                "completion_tokens_details": {"reasoning_tokens": 7},
            },
        },
    )
    chunks = await chat()
    assert chunks == [
        ReasoningDelta(0, "Let me "),
        ReasoningDelta(0, "think."),
        TextDelta(1, "42"),
        Usage(5, 9, reasoning_tokens=7),
        Finish("stop"),
    ]


async def test_several_tool_calls_are_assembled_by_their_index(llm_server: LlmServer, chat: Chat) -> None:
    """Interleaved fragments of two calls map to two blocks; id and name come once, on first sight."""
    d = chunk

    def call(index: int, arguments: str, id: str | None = None, name: str | None = None) -> dict[str, Any]:
        fragment: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
        if id is not None:
            fragment.update(id=id, type="function")
            fragment["function"]["name"] = name
        return fragment

    llm_server.stream(
        d(content="Checking both."),
        d(tool_calls=[call(0, "", id="call_a", name="read")]),
        d(tool_calls=[call(1, '{"pa', id="call_b", name="grep")]),
        d(tool_calls=[call(0, '{"path": "a.txt"}')]),
        d(tool_calls=[call(1, 'ttern": "x"}')]),
        d(finish="tool_calls"),
    )
    chunks = await chat()
    assert chunks == [
        TextDelta(0, "Checking both."),
        ToolCallDelta(1, "call_a", "read", ""),
        ToolCallDelta(2, "call_b", "grep", '{"pa'),
        ToolCallDelta(1, None, None, '{"path": "a.txt"}'),
        ToolCallDelta(2, None, None, 'ttern": "x"}'),
        Finish("tool-calls"),
    ]


async def test_text_after_a_tool_call_opens_a_new_block(llm_server: LlmServer, chat: Chat) -> None:
    """Blocks keep the model's order: text, call, text are three blocks, not two."""
    d = chunk
    llm_server.stream(
        d(content="a"),
        d(tool_calls=[{"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}]),
        d(content="b"),
        d(finish="tool_calls"),
    )
    chunks = await chat()
    assert [type(c).__name__ for c in chunks[:3]] == ["TextDelta", "ToolCallDelta", "TextDelta"]
    assert [c.index for c in chunks[:3]] == [0, 1, 2]


async def test_deepseek_cache_hits_count_as_cache_reads(llm_server: LlmServer, chat: Chat) -> None:
    """prompt_cache_hit_tokens (DeepSeek) becomes cache_read_tokens."""
    d = chunk
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 3,
        "prompt_cache_hit_tokens": 64,
        "prompt_cache_miss_tokens": 36,
    }
    llm_server.stream(d(content="ok", finish="stop"), {"choices": [], "usage": usage})
    chunks = await chat()
    assert chunks[-2:] == [Usage(100, 3, cache_read_tokens=64), Finish("stop")]


def test_openai_cached_tokens_count_as_cache_reads() -> None:
    """prompt_tokens_details.cached_tokens (OpenAI) becomes cache_read_tokens; odd values count 0."""
    usage = {
        "prompt_tokens": 2000,
        "completion_tokens": 300,
        "prompt_tokens_details": {"cached_tokens": 1920},
        "completion_tokens_details": {"reasoning_tokens": "many"},
    }
    assert usage_from_json(usage) == Usage(2000, 300, cache_read_tokens=1920, reasoning_tokens=0)


async def test_usage_arriving_with_the_finish_chunk_is_kept(llm_server: LlmServer, chat: Chat) -> None:
    """A server that puts usage on the finishing chunk (no separate usage chunk) still reports it."""
    llm_server.stream(
        {
            "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        }
    )
    assert (await chat())[-2:] == [Usage(1, 1), Finish("stop")]


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("stop", Finish("stop")),
        ("tool_calls", Finish("tool-calls")),
        ("length", Finish("max-tokens")),
        ("something_new", Finish("stop")),
    ],
)
async def test_finish_reasons_are_mapped(
    llm_server: LlmServer, chat: Chat, reason: str, expected: Finish
) -> None:
    """stop, tool_calls and length map to stop, tool-calls and max-tokens; unknown reasons to stop."""
    llm_server.stream(chunk(content="x"), chunk(finish=reason))
    assert (await chat())[-1] == expected


@pytest.mark.parametrize(
    ("reason", "code"), [("content_filter", "BAD_REQUEST"), ("insufficient_system_resource", "SERVER")]
)
async def test_failing_finish_reasons_end_in_error(
    llm_server: LlmServer, chat: Chat, reason: str, code: str
) -> None:
    """content_filter and DeepSeek's insufficient_system_resource end the stream with a Failure."""
    llm_server.stream(chunk(content="x"), chunk(finish=reason))
    finish = (await chat())[-1]
    assert finish.reason == "error"
    assert finish.error.code == code


async def test_stop_after_tool_calls_means_tool_calls(llm_server: LlmServer, chat: Chat) -> None:
    """A server that says `stop` after streaming tool calls finishes `tool-calls`."""
    d = chunk
    llm_server.stream(
        d(tool_calls=[{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]),
        d(finish="stop"),
    )
    assert (await chat())[-1] == Finish("tool-calls")


async def test_nothing_streamed_is_an_empty_response(llm_server: LlmServer, chat: Chat) -> None:
    """A stream with no text, reasoning or tool call ends with EMPTY_RESPONSE."""
    llm_server.stream(chunk(content=""), chunk(finish="stop"))
    (finish,) = await chat()
    assert finish.reason == "error"
    assert finish.error.code == "EMPTY_RESPONSE"


async def test_a_stream_without_done_but_with_a_finish_reason_is_complete(
    llm_server: LlmServer, chat: Chat
) -> None:
    """The finish reason says the answer is whole, even if [DONE] never comes."""
    llm_server.stream(chunk(content="x"), chunk(finish="stop"), done=False)
    assert await chat() == [TextDelta(0, "x"), Finish("stop")]


async def test_a_stream_ending_with_neither_done_nor_finish_is_a_transport_failure(
    llm_server: LlmServer, chat: Chat
) -> None:
    """A body that ends mid-answer, properly framed but unfinished, is TRANSPORT; the deltas stay."""
    llm_server.stream(chunk(content="half an ans"), done=False)
    chunks = await chat()
    assert chunks[0] == TextDelta(0, "half an ans")
    assert chunks[-1].reason == "error"
    assert chunks[-1].error.code == "TRANSPORT"


async def test_a_malformed_json_line_is_a_transport_failure(llm_server: LlmServer, chat: Chat) -> None:
    """An event whose data is not JSON ends the stream TRANSPORT, quoting the bad data."""
    llm_server.stream(chunk(content="ok"), '{"choices": [tru')
    finish = (await chat())[-1]
    assert finish.error.code == "TRANSPORT"
    assert '{"choices": [tru' in finish.error.message


async def test_an_error_object_inside_the_stream_ends_it(llm_server: LlmServer, chat: Chat) -> None:
    """An error object mid-stream becomes the failure; an HTTP-like code in it is read as a status."""
    llm_server.stream(chunk(content="x"), {"error": {"message": "upstream overloaded", "code": 502}})
    finish = (await chat())[-1]
    assert finish == Finish(
        "error", Failure("deepseek answered HTTP 502: upstream overloaded", "SERVER", 502)
    )


async def test_a_200_carrying_an_error_body_is_a_failure(llm_server: LlmServer, chat: Chat) -> None:
    """A 200 JSON body holding an error object is read as that error, not as an answer."""
    body = b'{"error": {"message": "Rate limit reached for requests", "type": "rate_limit_error"}}'
    llm_server.reply(Reply(200, body, content_type="application/json"))
    (finish,) = await chat()
    assert finish.reason == "error"
    assert finish.error.code == "RATE_LIMIT"
    assert "Rate limit reached" in finish.error.message


async def test_a_whole_completion_instead_of_a_stream_is_still_read(
    llm_server: LlmServer, chat: Chat
) -> None:
    """A server that ignores stream: true and returns one completion still yields its blocks."""
    completion = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "done",
                    "tool_calls": [
                        {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
    }
    llm_server.reply(Reply(200, json.dumps(completion).encode(), content_type="application/json"))
    assert await chat() == [
        TextDelta(0, "done"),
        ToolCallDelta(1, "c9", "f", "{}"),
        Usage(3, 4),
        Finish("tool-calls"),
    ]


def test_the_parser_ignores_other_choices_and_keep_alive_data() -> None:
    """Choices other than index 0 (n > 1) and empty data are skipped."""
    parser = StreamParser("p")
    assert parser.feed("") == []
    assert parser.feed('{"choices": [{"index": 1, "delta": {"content": "other"}}]}') == []
    assert parser.feed('{"choices": [{"index": 0, "delta": {"content": "mine"}}]}') == [TextDelta(0, "mine")]


def test_tool_calls_without_an_index_follow_their_id() -> None:
    """Servers that omit tool_calls[].index still get one block per call id."""
    parser = StreamParser("p")
    first = parser.feed_object(
        {"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]}}]}
    )
    more = parser.feed_object({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": "}"}}]}}]})
    second = parser.feed_object(
        {
            "choices": [
                {"delta": {"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": {"x": 1}}}]}}
            ]
        }
    )
    assert first + more + second == [
        ToolCallDelta(0, "a", "f", "{"),
        ToolCallDelta(0, None, None, "}"),
        ToolCallDelta(1, "b", "g", '{"x": 1}'),
    ]
