"""Real recorded streams (``recordings/``) replayed over HTTP through the plugin's transport.

Each streamed response of each cassette is served as it was recorded by the loopback server and
read by the adapter as the plugin sets it up: over aiohttp's transport on asyncio, httpx's own on
trio. What the adapter yields is checked against a plain reading of the same events: the text,
the reasoning, the tool calls (names and whole arguments, per call) and how the answer ended.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from dsh_harness_openai.testing import LlmServer, Reply

from dsh_core.llm import Finish, ReasoningDelta, TextDelta, ToolCallDelta

from .conftest import Chat

pytestmark = pytest.mark.anyio

RECORDINGS = sorted((Path(__file__).parent / "recordings").glob("*.yaml"))


def streamed_bodies(path: Path) -> list[bytes]:
    """The event-stream bodies of a vcrpy cassette's responses, in order."""
    cassette = yaml.safe_load(path.read_text(encoding="utf-8"))
    bodies = []
    for interaction in cassette["interactions"]:
        response = interaction["response"]
        headers = {name.lower(): value for name, value in response["headers"].items()}
        if "text/event-stream" in " ".join(headers.get("content-type", [])):
            bodies.append(response["body"]["string"].encode())
    return bodies


def expected(body: bytes) -> dict[str, Any]:
    """What the events say, read plainly: text, reasoning, tool calls by index, tool-calls or stop."""
    text, reasoning, calls = [], [], {}
    for line in body.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for choice in json.loads(line[6:]).get("choices") or ():
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning_content") or delta.get("reasoning") or "")
            for call in delta.get("tool_calls") or ():
                name, arguments = calls.get(call.get("index", 0), ("", ""))
                function = call.get("function") or {}
                calls[call.get("index", 0)] = (
                    name or function.get("name", ""),
                    arguments + (function.get("arguments") or ""),
                )
    return {
        "text": "".join(text),
        "reasoning": "".join(reasoning),
        "calls": [calls[index] for index in sorted(calls)],
        "finish": "tool-calls" if calls else "stop",
    }


def read(chunks: list[Any]) -> dict[str, Any]:
    """The same, from the adapter's chunks."""
    calls: dict[int, tuple[str, str]] = {}
    for chunk in chunks:
        if isinstance(chunk, ToolCallDelta):
            name, arguments = calls.get(chunk.index, ("", ""))
            calls[chunk.index] = (name + (chunk.name or ""), arguments + chunk.arguments)
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    return {
        "text": "".join(c.text for c in chunks if isinstance(c, TextDelta)),
        "reasoning": "".join(c.text for c in chunks if isinstance(c, ReasoningDelta)),
        "calls": [calls[index] for index in sorted(calls)],
        "finish": finish.reason,
    }


def test_the_recordings_are_there() -> None:
    assert len(RECORDINGS) == 4
    assert all(streamed_bodies(path) for path in RECORDINGS)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda path: path.stem)
async def test_a_recorded_stream_reads_as_recorded(path: Path, llm_server: LlmServer, chat: Chat) -> None:
    bodies = streamed_bodies(path)
    llm_server.reply(*(Reply(body=body, content_type="text/event-stream; charset=utf-8") for body in bodies))
    for body in bodies:
        chunks = await chat("local/small")
        assert read(chunks) == expected(body)
    assert not llm_server.replies
