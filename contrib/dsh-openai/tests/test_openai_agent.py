"""End to end: an agent with tools runs a multi-step DeepSeek thinking-mode turn against the local server."""

from __future__ import annotations

from typing import Any

import pytest
from dsh_harness_openai.testing import LlmServer, chunk

from dsh_core import AgentOptions, Context, tool

pytestmark = pytest.mark.anyio


@tool
def clock() -> str:
    """The current time."""
    return "12:00"


@tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: where
    """
    return f"sunny in {city}"


def call(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


async def test_thinking_mode_turn_sends_reasoning_back(llm_server: LlmServer, llm_ctx: Context) -> None:
    """Every later request carries the reasoning of the tool-call steps; the final answer's reasoning is dropped."""
    d = chunk
    usage = {
        "choices": [],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "prompt_cache_hit_tokens": 32},
    }
    llm_server.stream(
        d(reasoning_content="I need the time."),
        d(tool_calls=[call(0, "t1", "clock", "{}")]),
        d(finish="tool_calls"),
        usage,
    )
    llm_server.stream(
        d(reasoning_content="Now the weather."),
        d(
            tool_calls=[
                call(0, "w1", "weather", '{"city": "Paris"}'),
                call(1, "w2", "weather", '{"city": "Rome"}'),
            ]
        ),
        d(finish="tool_calls"),
        usage,
    )
    llm_server.stream(
        d(reasoning_content="Done."), d(content="Noon; sunny in Paris and Rome."), d(finish="stop"), usage
    )
    llm_server.stream(d(reasoning_content="Easy."), d(content="You're welcome."), d(finish="stop"), usage)

    llm_ctx.tools.register(clock)
    llm_ctx.tools.register(weather)
    options = AgentOptions(model="deepseek/deepseek-v4-flash")
    async with await llm_ctx.agents.create("e2e", agent_options=options) as handle:
        first = await handle.agent.run("Time and weather in Paris and Rome?")
        second = await handle.agent.run("Thanks!")

    assert first.reason == {"kind": "completed"}
    assert first.message.text == "Noon; sunny in Paris and Rome."
    assert second.message.text == "You're welcome."
    bodies = [r.body for r in llm_server.requests]
    assert len(bodies) == 4
    assert all(body["thinking"] == {"type": "enabled"} for body in bodies)
    assert {t["function"]["name"] for t in bodies[0]["tools"]} == {"clock", "weather"}

    def assistants(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [m for m in body["messages"] if m["role"] == "assistant"]

    assert [m.get("reasoning_content") for m in assistants(bodies[1])] == ["I need the time."]
    assert [m.get("reasoning_content") for m in assistants(bodies[2])] == [
        "I need the time.",
        "Now the weather.",
    ]
    # The next turn: the tool-call steps keep their reasoning; the answer's reasoning is dropped.
    assert [m.get("reasoning_content") for m in assistants(bodies[3])] == [
        "I need the time.",
        "Now the weather.",
        None,
    ]
    tool_messages = [m for m in bodies[2]["messages"] if m["role"] == "tool"]
    assert tool_messages == [
        {"role": "tool", "tool_call_id": "t1", "content": "12:00"},
        {"role": "tool", "tool_call_id": "w1", "content": "sunny in Paris"},
        {"role": "tool", "tool_call_id": "w2", "content": "sunny in Rome"},
    ]
    assert bodies[2]["messages"][0]["role"] == "system"
