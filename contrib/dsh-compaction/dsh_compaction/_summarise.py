"""The summarisation call: one ``ctx.llm.stream`` request that turns a span of history into a summary.

The request carries a summarisation system prompt, the span's messages as they are (the
conversation to summarise) and a final instruction; the tool schemas go along only when the span
holds tool calls, because some providers refuse tool calls in a history without them. Only the
reply's text is kept. When the span is larger than the summarising model can read, its longest
texts are shortened in the request (never in the log) until it fits.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Final

import anyio.lowlevel
import attrs

from dsh_core import (
    AssistantMessage,
    CancelSignal,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from dsh_core.llm import BlockAssembler, Chunk, Failure, FinishReason, LlmRequest, Usage

from ._estimate import message_tokens, text_tokens, tools_tokens

__all__ = [
    "SUMMARY_INSTRUCTION",
    "SUMMARY_PROMPT",
    "Summary",
    "SummaryFailedError",
    "fit_messages",
    "summarise",
    "summary_message",
]

SUMMARY_PROMPT: Final = """\
You compact the history of a conversation between a user and an AI agent that works with tools. \
The agent will continue the work from your summary plus the most recent messages, which it keeps; \
everything you leave out is lost to it.

Write a faithful, structured summary of the conversation you are given, with these Markdown \
sections, in this order:

## Goals
What the user asked for, with every constraint and preference; the user's own words where they matter.

## Progress and decisions
What has been done, what was decided and why, and approaches that failed (so they are not retried).

## Files and resources
Every file, path, URL, command and identifier that was read, created or changed, and what happened to it.

## Open tasks
What remains to be done, and the very next step.

## Key facts
Exact values the agent will need again: names, numbers, error messages, short snippets, verbatim.

Rules: never invent or guess; keep identifiers, paths and numbers exact; when something changed, \
give its latest state; if the conversation begins with an earlier summary, fold it into yours; \
write in the language of the conversation. Answer with the summary only, and do not call any tools."""

SUMMARY_INSTRUCTION: Final = (
    "Summarise the conversation above as your instructions say. Answer with the summary only."
)

#: The framing of the summary in the history, so the model reads it for what it is.
_FRAME: Final = (
    "<conversation-summary>\n"
    "The earlier part of this conversation was compacted into this summary:\n\n{summary}\n"
    "</conversation-summary>"
)

#: The shortest a text is cut to when a span must be shortened to fit the summarising model.
_MIN_KEEP: Final = 200


class SummaryFailedError(Exception):
    """The summarisation call failed; ``failure`` says how. Nothing was appended."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"{failure.code}: {failure.message}")
        self.failure = failure


@attrs.frozen
class Summary:
    """The text of a summary, and what the call cost."""

    text: str
    usage: Usage | None
    finish: FinishReason


def summary_message(text: str) -> UserMessage:
    """The ``user/message`` that stands for the summarised span (source ``{"kind": "compaction"}``)."""
    return UserMessage(content=_FRAME.format(summary=text), source={"kind": "compaction"})


def build_request(
    messages: Sequence[Message],
    *,
    provider: str,
    model: str,
    tools: Sequence[Mapping[str, Any]],
    max_tokens: int,
    budget: int,
    session_id: str | None,
    signal: CancelSignal | None,
) -> LlmRequest:
    """The summarisation request for ``messages``, shortened to about ``budget`` estimated input tokens."""
    calls = any(type(message) is AssistantMessage and message.tool_calls for message in messages)
    carried = tuple(tools) if calls else ()
    overhead = text_tokens(SUMMARY_PROMPT) + text_tokens(SUMMARY_INSTRUCTION) + tools_tokens(carried)
    fitted = fit_messages(messages, budget - overhead)
    return LlmRequest(
        provider=provider,
        model=model,
        messages=(*fitted, UserMessage(content=SUMMARY_INSTRUCTION)),
        system=SUMMARY_PROMPT,
        tools=carried,
        max_tokens=max_tokens,
        session_id=session_id,
        signal=signal,
    )


async def summarise(
    stream: Callable[[LlmRequest], AsyncGenerator[Chunk, None]], request: LlmRequest
) -> Summary:
    """Make the one summarisation call through ``stream`` (``ctx.llm.stream``) and read its text.

    :raises SummaryFailedError: the call ended in an error, or gave no text.
    Cancellation propagates: when the request's signal is cancelled, the ``aborted`` finish is
    turned back into the cancellation of the calling scope.
    """
    assembler = BlockAssembler(provider=request.provider, model=request.model)
    async with aclosing(stream(request)) as chunks:
        async for chunk in chunks:
            assembler.add(chunk)
    finish = assembler.finish
    if finish is None or finish.reason in ("error", "aborted"):
        if request.signal is not None and request.signal.cancelled:
            await anyio.lowlevel.checkpoint()  # the scope the signal cancels delivers the cancellation here
        failure = (finish.error if finish is not None else None) or Failure(
            "the summarisation stream ended without a finish", "EMPTY_RESPONSE"
        )
        raise SummaryFailedError(failure)
    text = assembler.message().text.strip()
    if not text:
        message = f"the summarisation reply (finish {finish.reason!r}) holds no text"
        raise SummaryFailedError(Failure(message, "EMPTY_RESPONSE"))
    return Summary(text, assembler.usage, finish.reason)


# ---------------------------------------------------------------------- shortening


def fit_messages(messages: Sequence[Message], budget: int) -> tuple[Message, ...]:
    """``messages`` shortened to about ``budget`` estimated tokens, for the summarising model only.

    Reasoning goes first (a summary needs what was done, not how it was thought); then images
    become a placeholder; then every text longer than a common limit keeps its head and its end
    around a note of what was cut, the limit chosen so the whole fits (a limit found by bisection,
    never below ``_MIN_KEEP`` characters, so a span that still does not fit is sent shortened as
    far as that goes). Tool-call arguments longer than the limit become a JSON string of their
    head, so they stay valid JSON.
    """
    total = sum(message_tokens(message) for message in messages)
    if total <= budget:
        return tuple(messages)
    stripped = tuple(_strip(message) for message in messages)
    if sum(message_tokens(message) for message in stripped) <= budget:
        return stripped
    longest = max((_longest_text(message) for message in stripped), default=0)
    low, high = _MIN_KEEP, max(longest, _MIN_KEEP)
    while low < high:  # the largest limit under which everything fits
        middle = (low + high + 1) // 2
        if sum(message_tokens(_shorten(m, middle)) for m in stripped) <= budget:
            low = middle
        else:
            high = middle - 1
    return tuple(_shorten(message, low) for message in stripped)


def _with_content(message: Message, blocks: Sequence[Text | Image | Reasoning | ToolCall]) -> Message:
    """``message`` with other content (same id, source, provider, ...)."""
    if isinstance(message, AssistantMessage):
        kept = tuple(block for block in blocks if not isinstance(block, Image))
        return AssistantMessage(kept, message.provider, message.model, message.id)
    plain = tuple(block for block in blocks if isinstance(block, Text | Image))
    if isinstance(message, ToolResultMessage):
        return ToolResultMessage(message.call_id, plain, message.is_error, message.id)
    return UserMessage(plain, message.source, message.id)


def _strip(message: Message) -> Message:
    if isinstance(message, AssistantMessage):
        if any(isinstance(block, Reasoning) for block in message.content):
            return _with_content(message, [b for b in message.content if not isinstance(b, Reasoning)])
        return message
    if any(isinstance(block, Image) for block in message.content):
        return _with_content(
            message, [Text("[image omitted]") if isinstance(b, Image) else b for b in message.content]
        )
    return message


def _longest_text(message: Message) -> int:
    sizes = [len(block.text) for block in message.content if type(block) is Text]
    sizes += [len(block.arguments) for block in message.content if type(block) is ToolCall]
    return max(sizes, default=0)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - tail :]}"


def _shorten(message: Message, limit: int) -> Message:
    blocks: list[Text | Image | Reasoning | ToolCall] = []
    for block in message.content:
        if isinstance(block, Text):
            blocks.append(Text(_cut(block.text, limit)))
        elif isinstance(block, ToolCall) and len(block.arguments) > limit:
            blocks.append(ToolCall(block.id, block.name, json.dumps(_cut(block.arguments, limit))))
        else:
            blocks.append(block)
    return _with_content(message, blocks)
