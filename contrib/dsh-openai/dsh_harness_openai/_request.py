"""One ``LlmRequest`` as the JSON body of a streaming ``POST /chat/completions``.

Messages: the system prompt first (``role: system``); a user message as a string, or as parts when
it holds images (``image_url`` with a data URL); an assistant message as its text plus
``tool_calls`` (``type: function``, arguments as the raw JSON text); a tool result as
``role: tool`` with ``tool_call_id``. Images a tool returned travel in one user message right after
the run of tool results (the ``tool`` role takes text only).

Reasoning sent back (``reasoning_content``) depends on the dialect. ``deepseek``, while thinking
is on: every assistant message that made tool calls carries it, ``""`` when there was none,
because DeepSeek's thinking mode answers 400 without it; reasoning of messages without tool calls
is dropped, as DeepSeek ignores it; with thinking off nothing is sent back. ``compatible``:
tool-call messages carry the reasoning their provider produced. ``openai``: never. Reasoning
produced by another provider is never sent.

DeepSeek thinking (dialect ``deepseek``): ``reasoning_effort`` ``None`` means the model's default
(thinking on, except for the retired alias ``deepseek-chat``); ``"none"``, ``"off"`` or
``"disabled"`` turn thinking off; any other effort turns it on and is passed on as is. The
``thinking`` switch is always sent, so the adapter knows which mode answers, and ``temperature`` —
which thinking mode ignores — is sent only with thinking off.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs

from dsh_core import AssistantMessage, Image, Reasoning, Text, ToolCall, ToolResultMessage, UserMessage
from dsh_core.llm import LlmRequest, ModelInfo

from ._config import ProviderSettings

__all__ = ["DEEPSEEK_ALIASES", "THINKING_OFF", "WireCall", "build_body", "convert_messages", "plan_call"]

#: DeepSeek's retired model names: the model that now serves them, and whether thinking is on.
DEEPSEEK_ALIASES: Final[Mapping[str, tuple[str, bool]]] = MappingProxyType(
    {"deepseek-chat": ("deepseek-v4-flash", False), "deepseek-reasoner": ("deepseek-v4-flash", True)}
)
#: Efforts that mean "no thinking" for the ``deepseek`` dialect.
THINKING_OFF: Final = frozenset({"none", "off", "disabled"})


@attrs.frozen
class WireCall:
    """What a request becomes on the wire, besides its messages."""

    #: the model name sent to the provider (an alias resolved)
    model: str
    #: the limits of that model, when the configuration knows it
    info: ModelInfo | None
    #: DeepSeek's thinking switch; ``None`` for dialects that have none
    thinking: bool | None
    #: the ``reasoning_effort`` sent, if any
    effort: str | None


def resolve_model(settings: ProviderSettings, model: str) -> tuple[str, bool | None]:
    """The model name to send, and the thinking default an alias implies (``None`` if no alias)."""
    if settings.dialect == "deepseek":
        alias = DEEPSEEK_ALIASES.get(model)
        if alias is not None:
            return alias
    return model, None


def plan_call(settings: ProviderSettings, request: LlmRequest) -> WireCall:
    """Resolve the model, the thinking mode and the effort of ``request``."""
    model, alias_thinking = resolve_model(settings, request.model)
    info = settings.models.get(model)
    effort = request.reasoning_effort
    if settings.dialect != "deepseek":
        return WireCall(model, info, None, effort)
    if effort is None:
        return WireCall(model, info, True if alias_thinking is None else alias_thinking, None)
    if effort.lower() in THINKING_OFF:
        return WireCall(model, info, False, None)
    return WireCall(model, info, True, effort)


def _data_url(image: Image) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{image.media_type};base64,{image.data}"}}


def _user_content(blocks: tuple[Text | Image, ...]) -> str | list[dict[str, Any]]:
    if all(isinstance(block, Text) for block in blocks):
        return "".join([block.text for block in blocks if isinstance(block, Text)])
    return [{"type": "text", "text": b.text} if isinstance(b, Text) else _data_url(b) for b in blocks]


def _assistant(
    message: AssistantMessage, request: LlmRequest, settings: ProviderSettings, call: WireCall
) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message.content:
        if type(block) is Text:
            texts.append(block.text)
        elif type(block) is Reasoning:
            reasoning.append(block.text)
        elif type(block) is ToolCall:
            function = {"name": block.name, "arguments": block.arguments or "{}"}
            calls.append({"id": block.id, "type": "function", "function": function})
    text = "".join(texts)
    out: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if not calls:
        return out
    out["tool_calls"] = calls
    ours = message.provider is None or message.provider == request.provider
    thought = "".join(reasoning) if ours else ""
    if call.thinking or (settings.dialect == "compatible" and thought):
        out["reasoning_content"] = thought
    return out


def convert_messages(request: LlmRequest, settings: ProviderSettings, call: WireCall) -> list[dict[str, Any]]:
    """The ``messages`` array for ``request`` (see the module docstring for the rules)."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    images: list[dict[str, Any]] = []  # returned by the current run of tool results
    for message in request.messages:
        if type(message) is ToolResultMessage:
            text = "".join([block.text for block in message.content if type(block) is Text])
            out.append({"role": "tool", "tool_call_id": message.call_id, "content": text})
            images.extend(_data_url(block) for block in message.content if type(block) is Image)
            continue
        if images:
            out.append(_tool_images(images))
            images = []
        if type(message) is UserMessage:
            out.append({"role": "user", "content": _user_content(message.content)})
        elif type(message) is AssistantMessage:
            out.append(_assistant(message, request, settings, call))
    if images:
        out.append(_tool_images(images))
    return out


def _tool_images(images: list[dict[str, Any]]) -> dict[str, Any]:
    header = {"type": "text", "text": "The images the tool calls above returned:"}
    return {"role": "user", "content": [header, *images]}


def build_body(request: LlmRequest, settings: ProviderSettings, call: WireCall) -> dict[str, Any]:
    """The JSON body of the streaming request."""
    body: dict[str, Any] = {
        "model": call.model,
        "messages": convert_messages(request, settings, call),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t["description"],
                    "parameters": t["parameters"],
                },
            }
            for t in request.tools
        ]
    max_tokens = request.max_tokens
    if max_tokens is not None:
        if call.info is not None:  # more than the model can produce is a 400; ask for all it can
            max_tokens = min(max_tokens, call.info.max_output_tokens)
        body["max_completion_tokens" if settings.dialect == "openai" else "max_tokens"] = max_tokens
    if call.thinking is not None:
        body["thinking"] = {"type": "enabled" if call.thinking else "disabled"}
    if call.effort is not None:
        body["reasoning_effort"] = call.effort
    if request.temperature is not None and not call.thinking:
        body["temperature"] = request.temperature
    return body
