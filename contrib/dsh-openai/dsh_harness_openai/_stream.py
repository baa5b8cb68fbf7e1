"""One streamed chat completion read event by event: SSE ``data`` in, dsh stream chunks out.

Block indexes: every block gets its own chunk index, numbered from 0 in order of first appearance.
A run of reasoning is one block and a run of text another; a text delta after some other block
opens a new text block (so the order the model produced things in is kept), and each tool call —
keyed by the provider's ``tool_calls[*].index`` — is one block, whatever the interleaving of the
argument fragments. The first delta of a tool call carries its ``id`` and ``name``; later ones carry
only more ``arguments``.

The finish reason, the usage and ``[DONE]`` can come in any order, so ``Usage`` and ``Finish`` are
produced once, by ``close()``, when the response has ended.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

from dsh_core.llm import Chunk, Failure, Finish, ReasoningDelta, TextDelta, ToolCallDelta, Usage

from ._errors import ProviderFailure, failure_from_error_object

__all__ = ["StreamParser", "usage_from_json"]

_Ending: TypeAlias = Literal["stop", "tool-calls", "max-tokens"]
_FINISH_REASONS: Final[dict[str, _Ending]] = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",  # the legacy name
    "length": "max-tokens",
}
_TEXT: Final = 1
_REASONING: Final = 2


def _count(value: object) -> int:
    return value if type(value) is int and value >= 0 else 0


def usage_from_json(usage: Mapping[str, Any]) -> Usage:
    """A ``Usage`` from a chat completion's ``usage`` object.

    Cache hits are DeepSeek's ``prompt_cache_hit_tokens`` or OpenAI's
    ``prompt_tokens_details.cached_tokens``; reasoning is ``completion_tokens_details.reasoning_tokens``.
    A missing or malformed count is 0.
    """
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    cached = usage.get("prompt_cache_hit_tokens")
    if cached is None and isinstance(prompt_details, Mapping):
        cached = prompt_details.get("cached_tokens")
    reasoning = completion_details.get("reasoning_tokens") if isinstance(completion_details, Mapping) else 0
    return Usage(
        _count(usage.get("prompt_tokens")),
        _count(usage.get("completion_tokens")),
        cache_read_tokens=_count(cached),
        reasoning_tokens=_count(reasoning),
    )


class StreamParser:
    """Turns the ``data`` of each server-sent event of one response into chunks.

    ``feed`` returns the deltas an event carries and raises ``ProviderFailure`` for malformed JSON
    or an error object; ``done`` turns true at ``[DONE]``; ``close`` returns the final ``Usage``
    (if one came) and ``Finish``, or raises ``ProviderFailure`` when the stream was cut short.
    """

    __slots__ = (
        "_blocks",
        "_by_id",
        "_calls",
        "_finish_reason",
        "_last_call",
        "_open",
        "_open_kind",
        "_provider",
        "_streamed",
        "_usage",
        "done",
    )

    def __init__(self, provider: str) -> None:
        self._provider = provider
        self._blocks = 0
        self._open = -1  # the text or reasoning block the last delta went to
        self._open_kind = 0
        self._calls: dict[object, list[Any]] = {}  # provider key -> [chunk index, id sent, name sent]
        self._by_id: dict[str, object] = {}
        self._last_call: object = None
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self._streamed = False
        self.done = False

    def feed(self, data: str) -> list[Chunk]:
        """The chunks in one event's ``data`` (``[DONE]`` sets ``done`` and gives none)."""
        if data == "[DONE]":
            self.done = True
            return []
        if not data:
            return []
        try:
            event = json.loads(data)
        except ValueError:
            shown = data if len(data) <= 200 else data[:200] + "…"
            msg = f"{self._provider} sent malformed JSON in its event stream: {shown!r}"
            raise ProviderFailure(Failure(msg, "TRANSPORT")) from None
        if type(event) is not dict:
            msg = f"{self._provider} sent an event that is not a JSON object: {data[:200]!r}"
            raise ProviderFailure(Failure(msg, "TRANSPORT"))
        return self.feed_object(event)

    def feed_object(self, event: Mapping[str, Any]) -> list[Chunk]:
        """The chunks in one parsed event (a chunk object, or a whole non-streamed completion)."""
        if event.get("error"):
            raise ProviderFailure(failure_from_error_object(self._provider, event))
        usage = event.get("usage")
        if isinstance(usage, Mapping):
            self._usage = usage_from_json(usage)
        out: list[Chunk] = []
        for choice in event.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue  # one completion per request: extra choices (n > 1) are not ours
            delta = choice.get("delta")
            if delta is None:
                delta = choice.get("message")  # a server that answered without streaming
            if isinstance(delta, Mapping):
                self._delta(delta, out)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self._finish_reason = reason
        return out

    def _delta(self, delta: Mapping[str, Any], out: list[Chunk]) -> None:
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")  # vLLM and OpenRouter's name for it
        if type(reasoning) is str and reasoning:
            out.append(ReasoningDelta(self._block(_REASONING), reasoning))
        content = delta.get("content")
        if type(content) is str and content:
            out.append(TextDelta(self._block(_TEXT), content))
        calls = delta.get("tool_calls")
        if calls:
            for call in calls:
                if isinstance(call, Mapping):
                    out.append(self._tool_call(call))

    def _block(self, kind: int) -> int:
        self._streamed = True
        if self._open_kind != kind:
            self._open = self._blocks
            self._open_kind = kind
            self._blocks += 1
        return self._open

    def _tool_call(self, call: Mapping[str, Any]) -> ToolCallDelta:
        self._streamed = True
        self._open_kind = 0  # text after a tool call starts a new block
        function = call.get("function")
        if not isinstance(function, Mapping):
            function = {}
        call_id = call.get("id") if type(call.get("id")) is str and call.get("id") else None
        name = function.get("name") if type(function.get("name")) is str and function.get("name") else None
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif type(arguments) is not str:  # a server that sends the arguments as an object
            arguments = json.dumps(arguments)
        key: object = call.get("index")
        if type(key) is not int:  # no index: the call this id names, else the last one, else a new one
            key = self._by_id.get(call_id) if call_id else self._last_call
            if key is None:
                key = ("unindexed", len(self._calls))
        self._last_call = key
        state = self._calls.get(key)
        if state is None:
            state = self._calls[key] = [self._blocks, False, False]
            self._blocks += 1
        if call_id is not None:
            self._by_id.setdefault(call_id, key)
        send_id = call_id if call_id is not None and not state[1] else None
        send_name = name if name is not None and not state[2] else None
        state[1] = state[1] or send_id is not None
        state[2] = state[2] or send_name is not None
        return ToolCallDelta(state[0], send_id, send_name, arguments)

    def close(self) -> list[Chunk]:
        """The final ``Usage`` (if the provider sent one) and the ``Finish``.

        :raises ProviderFailure: ``TRANSPORT`` when the stream ended with neither ``[DONE]`` nor a
            finish reason (it was cut short).
        """
        if not self.done and self._finish_reason is None:
            msg = f"{self._provider} ended its event stream before the model finished (no finish_reason, no [DONE])"
            raise ProviderFailure(Failure(msg, "TRANSPORT"))
        out: list[Chunk] = [] if self._usage is None else [self._usage]
        out.append(self._finish())
        return out

    def _finish(self) -> Finish:
        reason = self._finish_reason
        has_calls = bool(self._calls)
        if reason == "content_filter":
            msg = f"{self._provider}'s content filter stopped the response"
            return Finish("error", Failure(msg, "BAD_REQUEST"))
        if reason == "insufficient_system_resource":  # DeepSeek: the server gave up mid-answer
            msg = f"{self._provider} interrupted the response: insufficient system resources"
            return Finish("error", Failure(msg, "SERVER"))
        if reason != "length" and not self._streamed:
            msg = f"{self._provider} answered with no text, reasoning or tool call (finish_reason {reason!r})"
            return Finish("error", Failure(msg, "EMPTY_RESPONSE"))
        mapped: _Ending = _FINISH_REASONS.get(reason or "", "stop")
        if mapped == "stop" and has_calls:  # some servers say "stop" after tool calls
            mapped = "tool-calls"
        return Finish(mapped)
