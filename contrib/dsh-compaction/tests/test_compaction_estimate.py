"""Token pressure: the chars/4 estimate, the log facts, and calibration by the model's reported usage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_compaction._estimate import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    LogFacts,
    measure,
    message_tokens,
    request_tokens,
    text_tokens,
    tools_tokens,
)

from dsh_core import AssistantMessage, Image, SessionEvent, Text, ToolCall, UserMessage
from dsh_core.llm import LlmCallConfig, LlmRequest, Usage


def log(*items: tuple[str, Mapping[str, Any]]) -> list[SessionEvent]:
    return [SessionEvent(kind, seq, 0.0, data) for seq, (kind, data) in enumerate(items)]


def header(system: str = "s" * 40, **extra: Any) -> tuple[str, Mapping[str, Any]]:
    config = LlmCallConfig("scripted", "test").to_json()
    return ("request/header", {"config": config, "system": system, "tools": [], "prefix": [], **extra})


def said(text: str, usage: Usage | None = None) -> tuple[str, Mapping[str, Any]]:
    data: dict[str, Any] = {"turn": 1, "step": 1, "message": AssistantMessage(content=text).to_json()}
    if usage is not None:
        data["usage"] = usage.to_json()
    return ("assistant/message", data)


def test_text_and_messages() -> None:
    """About four characters a token, rounded up, plus fixed overheads per message, call and image."""
    assert text_tokens("") == 0
    assert text_tokens("abcd") == 1
    assert text_tokens("abcde") == 2
    assert message_tokens(UserMessage(content="x" * 40)) == MESSAGE_OVERHEAD + 10
    calling = AssistantMessage(content=(ToolCall("id", "read", "{}" + "a" * 34),))
    assert message_tokens(calling) == MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD + 10
    picture = UserMessage(content=(Text("look"), Image("image/png", "A" * 100_000)))
    assert message_tokens(picture) == MESSAGE_OVERHEAD + IMAGE_TOKENS + 1


def test_request_tokens_counts_system_tools_and_messages() -> None:
    """A request's estimate is its system prompt, its tool schemas and its messages."""
    schema = {"name": "read", "description": "Read.", "parameters": {"type": "object"}}
    request = LlmRequest("p", "m", [UserMessage(content="x" * 8)], system="s" * 8, tools=[schema])
    assert request_tokens(request) == 2 + tools_tokens(request.tools) + MESSAGE_OVERHEAD + 2
    assert tools_tokens(request.tools) > 0


def test_log_facts_fold_headers_usage_and_replaces() -> None:
    """The header fold follows deltas; the last usage is kept with the header in force; replaces are seen."""
    facts = LogFacts()
    events = log(header(), said("hello", Usage(100, 20)))
    facts.update(events)
    assert facts.header is not None
    assert facts.header.model == "scripted/test"
    assert facts.calibration is not None
    assert (facts.calibration.seq, facts.calibration.exact) == (1, 120)
    assert facts.calibration.header_tokens == 10
    summary = UserMessage(content="sum", source={"kind": "compaction"})
    events += [
        SessionEvent("request/header-delta", 2, 0.0, {"system": "s" * 80}),
        SessionEvent(
            "user/message",
            3,
            0.0,
            {"message": summary.to_json(), "surface": {"op": "replace", "start": 0, "end": 1}},
        ),
    ]
    facts.update(events)
    assert facts.header is not None
    assert facts.header.system == "s" * 80
    assert facts.header.model == "scripted/test"  # kept from the full header
    assert facts.last_replace == 3


def test_measure_is_calibrated_by_the_last_usage() -> None:
    """Exact count of what was sent + estimate of what came after + header growth."""
    facts = LogFacts()
    facts.update(log(header(), said("hello", Usage(100, 20))))
    entries = [(1, 6), (2, 50)]  # the reply (measured exactly) and a later tool result
    pressure = measure(
        header_tokens=15, entries=entries, facts=facts, fallback_ratio=1.0, context_window=1000, threshold=800
    )
    assert pressure.calibrated
    assert pressure.tokens == 120 + 50 + (15 - 10)
    assert pressure.estimated == 15 + 56
    assert pressure.ratio == pressure.tokens / pressure.estimated
    assert not pressure.over


def test_measure_falls_back_after_a_replace() -> None:
    """A compaction after the last usage makes it stale: the estimate times the last known ratio is used."""
    facts = LogFacts()
    facts.update(log(header(), said("hello", Usage(300, 20))))
    facts.last_replace = 5
    pressure = measure(
        header_tokens=10,
        entries=[(5, 90)],
        facts=facts,
        fallback_ratio=2.0,
        context_window=200,
        threshold=160,
    )
    assert not pressure.calibrated
    assert pressure.tokens == 200
    assert pressure.over


def test_implausible_usage_is_ignored() -> None:
    """A usage far from the estimate (a provider reporting zeros, say) does not calibrate."""
    facts = LogFacts()
    facts.update(log(header(), said("x" * 4000, Usage(0, 1))))
    pressure = measure(
        header_tokens=10,
        entries=[(1, 1004)],
        facts=facts,
        fallback_ratio=1.0,
        context_window=2000,
        threshold=1600,
    )
    assert not pressure.calibrated
    assert pressure.tokens == 1014
