"""The request bodies the adapter sends: messages, tools, limits, and DeepSeek's thinking mode."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import pytest
from dsh_harness_openai.testing import LlmServer, chunk

from dsh_core import (
    AssistantMessage,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

#: the ``chat`` fixture: ``await chat("provider/model", messages, **request_fields)`` -> the chunks
Chat: TypeAlias = Callable[..., Awaitable[list[Any]]]

pytestmark = pytest.mark.anyio

TOOL = {
    "name": "read",
    "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}


@pytest.fixture
def answer(llm_server: LlmServer) -> Callable[..., None]:
    """Queue a one-word answer for every request the test makes."""

    def queue(times: int = 1) -> None:
        for _ in range(times):
            llm_server.stream(chunk(content="ok"), chunk(finish="stop"))

    queue()
    return queue


def tool_turn(provider: str = "deepseek", reasoning: str | None = "I should read it.") -> list[Message]:
    """user → assistant (reasoning, text, two tool calls) → two tool results → assistant → user."""
    blocks = [Reasoning(reasoning)] if reasoning is not None else []
    return [
        UserMessage((Text("Read a and b."),)),
        AssistantMessage(
            (*blocks, Text("Reading."), ToolCall("c1", "read", '{"path": "a"}'), ToolCall("c2", "read", "")),
            provider=provider,
            model="deepseek-v4-flash",
        ),
        ToolResultMessage("c1", (Text("A"),)),
        ToolResultMessage("c2", (Text("B"),), is_error=True),
        AssistantMessage(
            (Reasoning("Both read."), Text("A and B.")), provider=provider, model="deepseek-v4-flash"
        ),
        UserMessage((Text("Thanks."),)),
    ]


async def test_body_shape(llm_server: LlmServer, chat: Chat, answer: Callable[..., None]) -> None:
    """System first, then the conversation; tools as functions; streaming with usage; the key as Bearer."""
    await chat("deepseek/deepseek-v4-flash", tool_turn(), system="Be brief.", tools=[TOOL], max_tokens=2000)
    request = llm_server.requests[-1]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-deepseek-test"
    body = request.body
    assert body["model"] == "deepseek-v4-flash"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 2000
    assert body["tools"] == [{"type": "function", "function": TOOL}]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read a and b."},
        {
            "role": "assistant",
            "content": "Reading.",
            "reasoning_content": "I should read it.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a"}'}},
                {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "tool", "tool_call_id": "c2", "content": "B"},
        {"role": "assistant", "content": "A and B."},
        {"role": "user", "content": "Thanks."},
    ]


async def test_deepseek_sends_reasoning_back_only_for_tool_call_messages(
    llm_server: LlmServer, chat: Chat, answer: Callable[..., None]
) -> None:
    """reasoning_content rides on the tool-call message ("" when it had none) and nowhere else."""
    history = tool_turn(reasoning=None)
    history.insert(0, AssistantMessage((Reasoning("old thoughts"), Text("Hello.")), provider="deepseek"))
    await chat("deepseek/deepseek-v4-flash", history)
    assistants = [m for m in llm_server.body["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in assistants] == [None, "", None]
    assert "reasoning_content" not in assistants[0]
    assert "reasoning_content" not in assistants[2]


async def test_no_reasoning_is_sent_back_with_thinking_off(
    llm_server: LlmServer, chat: Chat, answer: Callable[..., None]
) -> None:
    """With thinking off (deepseek-chat) the tool-call messages carry no reasoning_content at all."""
    await chat("deepseek/deepseek-chat", tool_turn())
    assert all("reasoning_content" not in m for m in llm_server.body["messages"])


async def test_reasoning_of_another_provider_is_not_sent(
    llm_server: LlmServer, chat: Chat, answer: Callable[..., None]
) -> None:
    """A tool-call message another provider produced carries an empty reasoning_content to DeepSeek."""
    await chat("deepseek/deepseek-v4-flash", tool_turn(provider="local"))
    assistants = [m for m in llm_server.body["messages"] if m["role"] == "assistant"]
    assert assistants[0]["reasoning_content"] == ""


async def test_thinking_is_on_by_default_and_drops_temperature(
    llm_server: LlmServer, chat: Chat, answer: Callable[..., None]
) -> None:
    """No effort: thinking enabled, no reasoning_effort, and temperature (ignored by thinking) not sent."""
    await chat("deepseek/deepseek-v4-pro", temperature=0.3)
    body = llm_server.body
    assert body["thinking"] == {"type": "enabled"}
    assert "reasoning_effort" not in body
    assert "temperature" not in body


async def test_an_effort_is_passed_on_with_thinking(
    llm_server: LlmServer, chat: Chat, answer: Callable[..., None]
) -> None:
    """reasoning_effort="max" turns thinking on and is sent as is."""
    await chat("deepseek/deepseek-v4-pro", reasoning_effort="max", temperature=0.3)
    body = llm_server.body
    assert (body["thinking"], body["reasoning_effort"]) == ({"type": "enabled"}, "max")
    assert "temperature" not in body


@pytest.mark.parametrize("effort", ["none", "off", "Disabled"])
async def test_effort_none_turns_thinking_off_and_keeps_temperature(
    llm_server: LlmServer, chat: Chat, answer: Callable[..., None], effort: str
) -> None:
    """An effort of none/off/disabled disables thinking; then temperature is sent."""
    await chat("deepseek/deepseek-v4-flash", reasoning_effort=effort, temperature=0.3)
    body = llm_server.body
    assert body["thinking"] == {"type": "disabled"}
    assert "reasoning_effort" not in body
    assert body["temperature"] == 0.3


@pytest.mark.parametrize(
    ("alias", "thinking"), [("deepseek-chat", "disabled"), ("deepseek-reasoner", "enabled")]
)
async def test_retired_aliases_map_to_flash(
    llm_server: LlmServer, chat: Chat, answer: Callable[..., None], alias: str, thinking: str
) -> None:
    """deepseek-chat is flash without thinking, deepseek-reasoner flash with it."""
    await chat(f"deepseek/{alias}", temperature=0.5)
    body = llm_server.body
    assert body["model"] == "deepseek-v4-flash"
    assert body["thinking"] == {"type": thinking}
    assert ("temperature" in body) is (thinking == "disabled")


async def test_max_tokens_is_clamped_to_a_known_model_limit(
    llm_server: LlmServer, chat: Chat, answer: Callable[..., None]
) -> None:
    """Asking a known model for more than it can produce asks for its maximum instead."""
    await chat("deepseek/deepseek-v4-flash", max_tokens=5_000_000)
    assert llm_server.body["max_tokens"] == 384_000


async def test_an_unknown_model_is_sent_as_asked(
    llm_server: LlmServer, chat: Chat, answer: Callable[..., None]
) -> None:
    """A model the configuration does not know is still streamed, max_tokens untouched."""
    chunks = await chat("deepseek/deepseek-v9-preview", max_tokens=5_000_000)
    assert chunks[-1].reason == "stop"
    assert (llm_server.body["model"], llm_server.body["max_tokens"]) == ("deepseek-v9-preview", 5_000_000)


async def test_openai_dialect(llm_server: LlmServer, chat: Chat, answer: Callable[..., None]) -> None:
    """openai: max_completion_tokens, effort and temperature as given, no thinking, no reasoning sent back."""
    await chat(
        "openai/gpt-5", tool_turn(provider="openai"), max_tokens=100, reasoning_effort="low", temperature=1.0
    )
    request = llm_server.requests[-1]
    body = request.body
    assert request.headers["authorization"] == "Bearer sk-openai-test"
    assert body["max_completion_tokens"] == 100
    assert "max_tokens" not in body
    assert (body["reasoning_effort"], body["temperature"]) == ("low", 1.0)
    assert "thinking" not in body
    assert all("reasoning_content" not in m for m in body["messages"])


async def test_compatible_dialect(llm_server: LlmServer, chat: Chat, answer: Callable[..., None]) -> None:
    """A local server: no Authorization header, max_tokens, reasoning sent back only where there is some."""
    answer()
    await chat("local/small", tool_turn(provider="local"), max_tokens=100, temperature=0.2)
    request = llm_server.requests[-1]
    assert "authorization" not in request.headers
    body = request.body
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("small", 100, 0.2)
    assert "thinking" not in body
    assert [m.get("reasoning_content") for m in body["messages"] if m["role"] == "assistant"] == [
        "I should read it.",
        None,
    ]
    await chat("local/small", tool_turn(provider="local", reasoning=None))
    assert all("reasoning_content" not in m for m in llm_server.body["messages"])


async def test_images_in_user_messages_and_tool_results(
    llm_server: LlmServer, chat: Chat, answer: Callable[..., None]
) -> None:
    """User images become image_url parts; tool images follow the run of tool results in a user message."""
    png = Image("image/png", "iVBORw0KGgo=")
    history = [
        UserMessage((Text("What is this?"), png)),
        AssistantMessage((ToolCall("c1", "shot", "{}"), ToolCall("c2", "shot", "{}")), provider="local"),
        ToolResultMessage("c1", (Text("shot 1"), png)),
        ToolResultMessage("c2", (png,)),
        AssistantMessage((Text("Two screenshots."),), provider="local"),
    ]
    await chat("local/small", history)
    url = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    assert llm_server.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}, url]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shot", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "shot", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "shot 1"},
        {"role": "tool", "tool_call_id": "c2", "content": ""},
        {
            "role": "user",
            "content": [{"type": "text", "text": "The images the tool calls above returned:"}, url, url],
        },
        {"role": "assistant", "content": "Two screenshots."},
    ]
