"""Token pressure: how big the next request is, estimated and calibrated by the model's own counts.

The estimate is deliberately simple — about four characters a token (``chars/4``), plus a small
overhead per message and per tool call, and a flat charge per image — because it only has to be
good between two reports of the model itself. Every ``assistant/message`` may carry the ``Usage``
of its call: ``input_tokens + output_tokens`` is the exact size of everything up to and including
that reply. The calibrated pressure is that exact count, plus the estimate of what the surface
gained since, plus any growth of the header (system prompt, tools, prefix). ``LogFacts`` reads those
facts from the log incrementally, so measuring before every step costs O(new events + surface).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from dsh_core import Message, SessionEvent
from dsh_core.llm import LlmCallConfig, LlmRequest, Usage
from dsh_core.session_log import AssistantMessageEvent, RequestHeaderDeltaEvent, RequestHeaderEvent

__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "TOOL_CALL_OVERHEAD",
    "Calibration",
    "Header",
    "LogFacts",
    "Pressure",
    "message_json_tokens",
    "message_tokens",
    "request_tokens",
    "text_tokens",
    "tools_tokens",
]

#: The estimate's exchange rate: characters per token.
CHARS_PER_TOKEN: Final = 4
#: Tokens a message costs besides its content (role, separators).
MESSAGE_OVERHEAD: Final = 4
#: Tokens a tool call costs besides its name and arguments (id, framing).
TOOL_CALL_OVERHEAD: Final = 8
#: A flat charge per image: providers bill an image by its pixels, not by its base64 length.
IMAGE_TOKENS: Final = 1600
#: A calibration ratio (reported / estimated) outside these bounds is taken for a bad report.
RATIO_BOUNDS: Final = (0.5, 4.0)


def text_tokens(text: str) -> int:
    """The estimated tokens of ``text``: its characters divided by ``CHARS_PER_TOKEN``, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def message_json_tokens(message: Mapping[str, Any]) -> int:
    """The estimated tokens of one message in its JSON form (as a session event carries it)."""
    chars = 0
    tokens = MESSAGE_OVERHEAD
    for block in message.get("content", ()):
        kind = block.get("type")
        if kind == "text" or kind == "reasoning":
            chars += len(block.get("text", ""))
        elif kind == "tool-call":
            chars += len(block.get("name", "")) + len(block.get("arguments", ""))
            tokens += TOOL_CALL_OVERHEAD
        elif kind == "image":
            tokens += IMAGE_TOKENS
    return tokens + -(-chars // CHARS_PER_TOKEN)


def message_tokens(message: Message) -> int:
    """The estimated tokens of one message."""
    return message_json_tokens(message.to_json())


def tools_tokens(tools: Sequence[Mapping[str, Any]]) -> int:
    """The estimated tokens of the tool schemas: their compact JSON text."""
    if not tools:
        return 0
    return text_tokens(json.dumps(list(tools), separators=(",", ":"), ensure_ascii=False))


def request_tokens(request: LlmRequest) -> int:
    """The estimated input tokens of a whole request: system prompt, tools and messages."""
    return (
        text_tokens(request.system or "")
        + tools_tokens(request.tools)
        + sum(message_tokens(message) for message in request.messages)
    )


# ---------------------------------------------------------------------- what the log says


@attrs.frozen
class Header:
    """What a request carries besides the history, as the latest ``request/header`` fold says."""

    config: LlmCallConfig | None
    system: str
    tools: tuple[Mapping[str, Any], ...]
    #: the session prefix, as message JSON
    prefix: tuple[Mapping[str, Any], ...]

    @property
    def model(self) -> str | None:
        """The ``provider/model`` of the last logged request, if any."""
        return None if self.config is None else f"{self.config.provider}/{self.config.model}"

    def tokens(self, prefix_tokens: int | None = None) -> int:
        """Estimated tokens of system prompt + tools + prefix (``prefix_tokens`` replaces the logged prefix)."""
        if prefix_tokens is None:
            prefix_tokens = sum(message_json_tokens(message) for message in self.prefix)
        return text_tokens(self.system) + tools_tokens(self.tools) + prefix_tokens


@attrs.frozen
class Calibration:
    """The last ``Usage`` the model reported in this session, and what it measured."""

    #: the seq of the ``assistant/message`` that carries it
    seq: int
    #: ``input_tokens + output_tokens``: the exact size of the history up to and including ``seq``
    exact: int
    #: the estimated header tokens in force for that request
    header_tokens: int


class LogFacts:
    """The facts pressure needs, folded from one session's log as it grows (call ``update()``).

    It keeps the current header fold, the last reported ``Usage`` and the seq of the last surface
    replace (a replace after the usage makes its count stale: the history it measured is gone).
    """

    __slots__ = ("_header_tokens", "_scanned", "calibration", "header", "last_replace")

    def __init__(self) -> None:
        self._scanned = 0
        self._header_tokens = 0
        self.header: Header | None = None
        self.calibration: Calibration | None = None
        self.last_replace = -1

    def update(self, events: Sequence[SessionEvent]) -> None:
        """Fold the events appended since the last call."""
        end = len(events)
        if self._scanned < end:
            self._fold(events[self._scanned : end])
            self._scanned = end

    def _fold(self, events: Iterable[SessionEvent]) -> None:
        for event in events:
            kind = event.type
            data = event.data
            if kind == AssistantMessageEvent.type:
                usage = data.get("usage")
                if isinstance(usage, Mapping):
                    try:
                        report = Usage.from_json(usage)
                    except ValueError:
                        continue  # a usage we cannot read calibrates nothing
                    exact = report.input_tokens + report.output_tokens
                    self.calibration = Calibration(event.seq, exact, self._header_tokens)
            elif kind == RequestHeaderEvent.type or kind == RequestHeaderDeltaEvent.type:
                self.header = _fold_header(self.header if kind.endswith("-delta") else None, data)
                self._header_tokens = self.header.tokens()
            surface = data.get("surface")
            if isinstance(surface, Mapping) and surface.get("op") == "replace":
                self.last_replace = event.seq


def _fold_header(previous: Header | None, data: Mapping[str, Any]) -> Header:
    config = previous.config if previous is not None else None
    raw_config = data.get("config")
    if isinstance(raw_config, Mapping):
        try:
            config = LlmCallConfig.from_json(raw_config)
        except ValueError:
            config = None
    system = data.get("system", previous.system if previous is not None else "")
    tools = data.get("tools", previous.tools if previous is not None else ())
    prefix = data.get("prefix", previous.prefix if previous is not None else ())
    return Header(
        config=config,
        system=system if isinstance(system, str) else "",
        tools=tuple(tool for tool in tools if isinstance(tool, Mapping)),
        prefix=tuple(message for message in prefix if isinstance(message, Mapping)),
    )


# ---------------------------------------------------------------------- pressure


@attrs.frozen
class Pressure:
    """How full the next request is, against the model's window.

    ``tokens`` is the best estimate (calibrated when the model reported a usage since the last
    compaction); ``estimated`` the plain ``chars/4`` estimate of the same request; ``ratio`` is
    ``tokens / estimated``, the exchange rate used to convert other estimates.
    """

    tokens: int
    estimated: int
    header_tokens: int
    ratio: float
    calibrated: bool
    context_window: int
    threshold: int

    @property
    def over(self) -> bool:
        """Whether the request is above the compaction threshold."""
        return self.tokens > self.threshold

    @property
    def fill(self) -> float:
        """``tokens`` as a share of the context window."""
        return self.tokens / self.context_window


def measure(
    *,
    header_tokens: int,
    entries: Sequence[tuple[int, int]],
    facts: LogFacts,
    fallback_ratio: float,
    context_window: int,
    threshold: int,
) -> Pressure:
    """The pressure of a request made of a header and the surface ``entries`` (``(seq, tokens)`` each).

    Calibrated when the last reported usage is newer than the last surface replace: that exact
    count, plus the estimate of the entries appended after it, plus the header's growth since.
    Otherwise the estimate times ``fallback_ratio`` (the ratio last observed for this session).
    """
    surface = sum(tokens for _, tokens in entries)
    estimated = header_tokens + surface
    calibration = facts.calibration
    if calibration is not None and calibration.seq > facts.last_replace and estimated > 0:
        after = sum(tokens for seq, tokens in entries if seq > calibration.seq)
        tokens = calibration.exact + after + (header_tokens - calibration.header_tokens)
        ratio = tokens / estimated
        low, high = RATIO_BOUNDS
        if low <= ratio <= high:
            return Pressure(tokens, estimated, header_tokens, ratio, True, context_window, threshold)
    ratio = fallback_ratio
    tokens = math.ceil(estimated * ratio)
    return Pressure(tokens, estimated, header_tokens, ratio, False, context_window, threshold)
