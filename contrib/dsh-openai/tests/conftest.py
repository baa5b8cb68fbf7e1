"""Fixtures: a loopback OpenAI-compatible server (``testing.LlmServer``) and a harness using it."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeAlias

import pytest
from dsh_harness_openai import OpenAIPlugin
from dsh_harness_openai.testing import LlmServer

from dsh_core import Context, Harness, Text, UserMessage
from dsh_core.llm import Chunk, LlmRequest

DEEPSEEK_KEY = "sk-deepseek-test"
OPENAI_KEY = "sk-openai-test"

#: ``await chat("provider/model", messages="hi", **request_fields)`` -> every chunk of one request
Chat: TypeAlias = Callable[..., Awaitable[list[Chunk]]]


@pytest.fixture
def llm_server() -> Iterator[LlmServer]:
    """A loopback server replaying queued replies; stopped after the test."""
    with LlmServer() as server:
        yield server


@pytest.fixture
def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def openai_config(llm_server: LlmServer) -> dict[str, Any]:
    """``[plugins.openai]``: the built-in providers and a keyless ``local`` one, all on the test server."""
    return {
        "timeout": 5.0,
        "providers": {
            "deepseek": {"base_url": llm_server.base_url},
            "openai": {"base_url": llm_server.base_url},
            "local": {
                "base_url": llm_server.base_url,
                "models": {"small": {"context_window": 8192, "max_output_tokens": 1024}},
            },
        },
    }


@pytest.fixture
async def llm_ctx(openai_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Context]:
    """A running Harness with the ``openai`` plugin configured by ``openai_config``; API keys set."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", DEEPSEEK_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    config = {"plugins": {"openai": openai_config}}
    async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        yield ctx


@pytest.fixture
def chat(llm_ctx: Context) -> Chat:
    """``await chat("provider/model", messages="hi", **request_fields)``: every chunk of one request."""

    async def run(
        model: str = "deepseek/deepseek-v4-flash", messages: Any = "hi", **fields: Any
    ) -> list[Chunk]:
        provider, _, name = model.partition("/")
        if isinstance(messages, str):
            messages = [UserMessage((Text(messages),))]
        request = LlmRequest(provider, name, messages, **fields)
        return [chunk async for chunk in llm_ctx.llm.stream(request)]

    return run
