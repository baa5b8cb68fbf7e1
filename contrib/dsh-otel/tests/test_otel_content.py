"""Content capture: off by default (no prompt, completion, tool argument or result anywhere); on, the GenAI messages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from dsh_core import Reasoning, Text, tool
from dsh_core.testing import Reply, ScriptedModel

from .otel_kit import MODEL, Telemetry, running

pytestmark = pytest.mark.anyio

SECRETS = ("PROMPT-SECRET", "THOUGHT-SECRET", "ARG-SECRET", "RESULT-SECRET", "FAILED-SECRET", "ANSWER-SECRET")


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return "RESULT-SECRET for " + key


@tool
def refuse(key: str) -> str:
    """Always fails, saying why in its message."""
    raise ValueError("FAILED-SECRET")


def _script() -> ScriptedModel:
    return ScriptedModel(
        [
            Reply(
                Reasoning("THOUGHT-SECRET"),
                ScriptedModel.call("lookup", {"key": "ARG-SECRET"}),
                ScriptedModel.call("refuse", {"key": "ARG-SECRET"}),
            ),
            ScriptedModel.text("ANSWER-SECRET"),
        ]
    )


def _strings(span: ReadableSpan) -> Iterator[str]:
    """Every text a span carries: name, status, attributes, events and their attributes, links, resource."""
    yield span.name
    yield span.status.description or ""

    def values(attributes: Any) -> Iterator[str]:
        for key, value in dict(attributes or {}).items():
            yield str(key)
            yield str(value)

    yield from values(span.attributes)
    for event in span.events:
        yield event.name
        yield from values(event.attributes)
    for link in span.links:
        yield from values(link.attributes)
    yield from values(span.resource.attributes)


async def _run(telemetry: Telemetry, *, capture: bool | None) -> None:
    config = {} if capture is None else {"plugins": {"otel": {"capture_content": capture}}}
    async with running(telemetry, _script(), config=config) as (ctx, _):
        ctx.tools.register(lookup)
        ctx.tools.register(refuse)
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            outcome = await handle.agent.run([Text("PROMPT-SECRET")])
    assert outcome.text == "ANSWER-SECRET"


async def test_no_content_appears_by_default(telemetry: Telemetry) -> None:
    """capture_content unset: no secret from the prompt, reasoning, arguments, results or the answer in any span."""
    await _run(telemetry, capture=None)
    spans = telemetry.finished()
    assert len(spans) == 5  # the turn, two requests, two tool calls
    for span in spans:
        for text in _strings(span):
            leaked = [secret for secret in SECRETS if secret in text]
            assert not leaked, f"{span.name}: {leaked} in {text!r}"
    for metric in ("gen_ai.client.token.usage", "gen_ai.client.operation.duration"):
        for point in telemetry.points(metric):
            assert not any(secret in str(point.attributes) for secret in SECRETS)


async def test_capture_records_the_conventions_messages(telemetry: Telemetry) -> None:
    """capture_content = true: input/output messages, system instructions, tool arguments and results."""
    await _run(telemetry, capture=True)
    first, second = sorted(telemetry.named("chat deepseek-v4-flash"), key=lambda span: span.start_time or 0)
    first_attributes = dict(first.attributes or {})
    assert json.loads(str(first_attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "PROMPT-SECRET"}]}
    ]
    assert json.loads(str(first_attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "THOUGHT-SECRET"},
                {"type": "tool_call", "id": "call_1", "name": "lookup", "arguments": {"key": "ARG-SECRET"}},
                {"type": "tool_call", "id": "call_2", "name": "refuse", "arguments": {"key": "ARG-SECRET"}},
            ],
            "finish_reason": "tool_call",
        }
    ]
    instructions = json.loads(str(first_attributes["gen_ai.system_instructions"]))
    assert instructions[0]["type"] == "text"
    assert instructions[0]["content"]
    history = json.loads(str(dict(second.attributes or {})["gen_ai.input.messages"]))
    assert [message["role"] for message in history] == ["user", "assistant", "tool", "tool"]
    assert history[2]["parts"] == [
        {"type": "tool_call_response", "id": "call_1", "response": "RESULT-SECRET for ARG-SECRET"}
    ]
    lookup_span = dict(telemetry.one("execute_tool lookup").attributes or {})
    assert json.loads(str(lookup_span["gen_ai.tool.call.arguments"])) == {"key": "ARG-SECRET"}
    assert lookup_span["gen_ai.tool.call.result"] == "RESULT-SECRET for ARG-SECRET"
    assert "FAILED-SECRET" in str(
        dict(telemetry.one("execute_tool refuse").attributes or {})["gen_ai.tool.call.result"]
    )
    turn = dict(telemetry.one("invoke_agent agent-1").attributes or {})
    assert json.loads(str(turn["gen_ai.input.messages"]))[0]["parts"] == [
        {"type": "text", "content": "PROMPT-SECRET"}
    ]
    assert json.loads(str(turn["gen_ai.output.messages"]))[0]["parts"] == [
        {"type": "text", "content": "ANSWER-SECRET"}
    ]


async def test_capture_keeps_arguments_that_are_not_json_as_text(telemetry: Telemetry) -> None:
    """Arguments the model got wrong are recorded as the raw text it sent."""
    model = ScriptedModel([ScriptedModel.tool_call("lookup", "{not json"), ScriptedModel.text("ok")])
    async with running(telemetry, model, config={"plugins": {"otel": {"capture_content": True}}}) as (ctx, _):
        ctx.tools.register(lookup)
        async with await ctx.agents.create("agent-1", agent_options=MODEL) as handle:
            await handle.agent.run("go")
    span = telemetry.one("execute_tool lookup")
    assert dict(span.attributes or {})["gen_ai.tool.call.arguments"] == "{not json"
    assert dict(span.attributes or {})["error.type"] == "INVALID_ARGS"
