"""A long session: 300 tool steps in one turn on a small window, and no request ever exceeds it."""

from __future__ import annotations

import pytest
from dsh_compaction._estimate import request_tokens

from dsh_core import tool
from dsh_core.llm import LlmRequest, Usage
from dsh_core.testing import Reply, ScriptedModel

from .compaction_kit import (
    MODEL,
    Responder,
    check_pairs,
    compactions,
    independent_count,
    is_summary_request,
    running,
)

pytestmark = pytest.mark.anyio

WINDOW = 3000
STEPS = 300


@tool
def work(step: int) -> str:
    """Do one step of the work and report on it."""
    return f"result of step {step}: " + "data " * 80


class Tokenizer:
    """The model's own view: it counts a token per three characters (denser than the plugin's chars/4
    estimate, so only calibration by the reported usage keeps the plugin honest), reports that count
    as its usage, and refuses a request that does not fit its window."""

    def __init__(self) -> None:
        self.main = 0
        self.overflows: list[int] = []
        self.model = Responder(self.answer, context_window=WINDOW)

    def answer(self, request: LlmRequest) -> Reply:
        size = independent_count(request, chars_per_token=3)
        if size + (request.max_tokens or 0) > WINDOW:
            self.overflows.append(size)
            return ScriptedModel.failure("CONTEXT_WINDOW_EXCEEDED", f"{size} tokens do not fit {WINDOW}")
        if is_summary_request(request):
            text = "## Goals\nDo 300 steps of work.\n## Progress and decisions\n" + "Steps went well. " * 25
            return ScriptedModel.text(text, usage=Usage(size, len(text) // 3))
        self.main += 1
        if self.main <= STEPS:
            return ScriptedModel.tool_call("work", {"step": self.main}, usage=Usage(size, 10))
        return ScriptedModel.text("all done", usage=Usage(size, 3))


async def test_300_tool_steps_never_exceed_the_window() -> None:
    """Every request of a 300-step turn fits the window, by the plugin's estimate, by chars/4 and by the model."""
    tokenizer = Tokenizer()
    model = tokenizer.model
    async with running(model) as ctx:
        ctx.tools.register(work)
        async with await ctx.agents.create("long", agent_options=MODEL) as handle:
            outcome = await handle.agent.run("Do 300 steps of work, one tool call each.")
            events = handle.agent.session.events
            messages = list(handle.agent.session.derive_messages())
    assert outcome.kind == "completed"
    assert outcome.text == "all done"
    assert tokenizer.overflows == []
    assert tokenizer.main == STEPS + 1
    assert [event.type for event in events].count("tool/result") == STEPS  # the log keeps everything
    facts = compactions(events)
    assert len(facts) >= 10
    assert all(fact["reason"] == "threshold" for fact in facts)
    for request in model.requests:
        output = request.max_tokens or 0
        assert request_tokens(request) + output <= WINDOW
        assert independent_count(request) + output <= WINDOW
        if not is_summary_request(request):
            check_pairs(request.messages)
    check_pairs(messages)
