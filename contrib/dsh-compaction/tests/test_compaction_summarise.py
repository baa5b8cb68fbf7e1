"""The summarisation call: its request, shortening a span that is too big, and reading the reply."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from dsh_compaction._estimate import message_tokens
from dsh_compaction._summarise import (
    SUMMARY_INSTRUCTION,
    SUMMARY_PROMPT,
    SummaryFailedError,
    build_request,
    fit_messages,
    summarise,
    summary_message,
)

from dsh_core import (
    AssistantMessage,
    CancelSignal,
    Harness,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from dsh_core.llm import LlmRequest, Usage
from dsh_core.testing import ScriptedModel

pytestmark = pytest.mark.anyio

SCHEMA = {"name": "read", "description": "Read a file.", "parameters": {"type": "object"}}


def request_for(
    messages: Sequence[Message], budget: int = 10_000, signal: CancelSignal | None = None
) -> LlmRequest:
    return build_request(
        messages,
        provider="scripted",
        model="m",
        tools=[SCHEMA],
        max_tokens=100,
        budget=budget,
        session_id="s",
        signal=signal,
    )


def test_request_carries_prompt_span_and_instruction() -> None:
    """System prompt, the span as the conversation, then the instruction; no tools without calls."""
    span: list[Message] = [UserMessage(content="fix the bug"), AssistantMessage(content="done")]
    request = request_for(span)
    assert request.system == SUMMARY_PROMPT
    assert list(request.messages[:2]) == span
    assert request.messages[-1].text == SUMMARY_INSTRUCTION
    assert request.tools == ()
    assert request.max_tokens == 100
    assert request.session_id == "s"


def test_request_carries_tools_when_the_span_has_calls() -> None:
    """A history with tool calls is sent with the tool schemas (some providers require them)."""
    span: list[Message] = [
        UserMessage(content="read a"),
        AssistantMessage(content=(ToolCall("c1", "read", "{}"),)),
        ToolResultMessage(call_id="c1", content="a"),
    ]
    assert [tool["name"] for tool in request_for(span).tools] == ["read"]


def test_fit_leaves_a_span_that_fits_alone() -> None:
    """A span within the budget is sent as it is."""
    span = (UserMessage(content="x" * 100), AssistantMessage(content=(Reasoning("think"), Text("y"))))
    assert fit_messages(span, 1000) == span


def test_fit_shortens_the_longest_texts() -> None:
    """Reasoning goes, images become a note, long texts keep head and end, arguments stay JSON."""
    huge = "A" * 20_000 + "THE END"
    span: list[Message] = [
        UserMessage(content=(Text("see"), Image("image/png", "AAAA"))),
        AssistantMessage(
            content=(Reasoning("r" * 5000), ToolCall("c1", "write", json.dumps({"text": huge})))
        ),
        ToolResultMessage(call_id="c1", content=huge, id="result-id"),
        AssistantMessage(content="short answer"),
    ]
    fitted = fit_messages(span, 2000)
    assert sum(message_tokens(message) for message in fitted) <= 2000
    assert fitted[0].content[1] == Text("[image omitted]")
    call = fitted[1].content[0]
    assert isinstance(call, ToolCall)
    assert call.id == "c1"
    json.loads(call.arguments)  # still JSON
    result = fitted[2]
    assert isinstance(result, ToolResultMessage)
    assert result.call_id == "c1"
    assert result.id == "result-id"
    assert "characters omitted" in result.text
    assert result.text.endswith("THE END")
    assert fitted[3] == span[3]


async def test_summarise_reads_the_text_and_usage() -> None:
    """The reply's text (stripped) and the usage of the call."""
    model = ScriptedModel([ScriptedModel.text("  ## Goals\nfix it  ", usage=Usage(50, 10))])
    async with Harness(autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        summary = await summarise(ctx.llm.stream, request_for([UserMessage(content="hi")]))
    assert summary.text == "## Goals\nfix it"
    assert summary.usage == Usage(50, 10)
    assert summary.finish == "stop"


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (ScriptedModel.failure("SERVER", "overloaded"), "SERVER"),
        (ScriptedModel.raises(RuntimeError("adapter bug")), "UNKNOWN"),
        (ScriptedModel.tool_call("read"), "EMPTY_RESPONSE"),
        (ScriptedModel.text("   "), "EMPTY_RESPONSE"),
    ],
)
async def test_summarise_failures(reply: object, code: str) -> None:
    """An error finish, a raising adapter, or a reply without text is a SummaryFailedError."""
    model = ScriptedModel([reply])  # type: ignore[list-item]
    async with Harness(autoload=False) as ctx:
        ctx.llm.register_adapter("scripted", model)
        with pytest.raises(SummaryFailedError) as caught:
            await summarise(ctx.llm.stream, request_for([UserMessage(content="hi")]))
    assert caught.value.failure.code == code


def test_summary_message_is_a_compaction_user_message() -> None:
    """The summary is a user message with source kind ``compaction``, framed as a summary."""
    message = summary_message("## Goals\nfix it")
    assert message.source == {"kind": "compaction"}
    assert message.text.startswith("<conversation-summary>")
    assert "## Goals\nfix it" in message.text
