"""The OpenAI adapter passes dsh's adapter conformance check against the loopback server."""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Mapping
from typing import Any, Final

import anyio.to_thread
import httpx
import pytest
from dsh_harness_openai import OpenAIAdapter
from dsh_harness_openai._transport import make_transport, on_asyncio
from dsh_harness_openai.testing import PATIENCE, LlmServer, Reply, chunk, sse

from dsh_core.llm import FailureCode, ModelInfo
from dsh_core.testing import ConformanceScript, check_llm_adapter

pytestmark = pytest.mark.anyio


class LlmServerScript:
    """The ``ConformanceScript`` of ``check_llm_adapter`` for an ``LlmServer``.

    Answers are streamed in several events, as providers do; failures are HTTP error statuses.
    """

    #: the status that each failure code stands for (``dsh_harness_openai._errors``)
    STATUSES: Final[dict[str, int]] = {
        "RATE_LIMIT": 429,
        "AUTH": 401,
        "TIMEOUT": 408,
        "BAD_REQUEST": 400,
        "SERVER": 500,
    }

    def __init__(self, server: LlmServer, *, pieces: int = 3) -> None:
        self.server = server
        self.pieces = pieces

    def _split(self, text: str) -> list[str]:
        count = max(1, min(self.pieces, len(text)))
        return [text[len(text) * i // count : len(text) * (i + 1) // count] for i in range(count)]

    def expect_text(self, text: str) -> None:
        parts = [chunk(content=part) for part in self._split(text)]
        usage = {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 7}}
        self.server.stream(chunk(role="assistant", content=""), *parts, chunk(finish="stop"), usage)

    def expect_tool_call(self, name: str, arguments: Mapping[str, Any]) -> None:
        first, *rest = self._split(json.dumps(arguments))
        opening = {"index": 0, "id": "call_conformance", "type": "function"}
        self.server.stream(
            chunk(tool_calls=[{**opening, "function": {"name": name, "arguments": first}}]),
            *(chunk(tool_calls=[{"index": 0, "function": {"arguments": part}}]) for part in rest),
            chunk(finish="tool_calls"),
        )

    def expect_failure(self, code: FailureCode) -> None:
        status = self.STATUSES.get(code)
        if status is None:
            msg = f"LlmServerScript cannot produce {code!r}; it can: {', '.join(self.STATUSES)}"
            raise ValueError(msg)
        self.server.error(status, "scripted failure")

    def expect_hang(self, text: str) -> None:
        self.server.disconnected.clear()
        parts = [sse(chunk(content=part), done=False) for part in self._split(text)]
        self.server.reply(Reply(body=parts, hold_open=True))

    async def hung_up(self) -> None:
        """Wait (in a thread, at most ``PATIENCE``) until the server saw the client hang up."""
        if not await anyio.to_thread.run_sync(self.server.disconnected.wait, PATIENCE):
            msg = f"the server did not see the client hang up within {PATIENCE}s of the cancellation"
            raise AssertionError(msg)


def local_adapter(server: LlmServer, client: httpx.AsyncClient) -> Callable[[], OpenAIAdapter]:
    """A factory of keyless adapters for provider ``local`` on the test server (model ``small``)."""

    def make() -> OpenAIAdapter:
        models = {"small": ModelInfo(8192, 1024)}
        return OpenAIAdapter("local", client=client, base_url=server.base_url, models=models)

    return make


@pytest.mark.parametrize("failure_code", ["SERVER", "RATE_LIMIT", "AUTH"])
async def test_openai_adapter_conforms(llm_server: LlmServer, failure_code: FailureCode) -> None:
    """Text, tool call, failure and a cancelled hang, raw and through ctx.llm, over real HTTP."""
    async with httpx.AsyncClient(timeout=5.0) as client:
        await check_llm_adapter(
            local_adapter(llm_server, client),
            LlmServerScript(llm_server),
            model="small",
            provider="local",
            failure_code=failure_code,
        )
    assert not llm_server.replies  # every scripted reply was asked for
    assert len(llm_server.requests) == 8
    tool_request = llm_server.requests[1].body
    assert tool_request["tools"][0]["function"]["name"] == "get_weather"


async def test_openai_adapter_conforms_over_the_plugins_transport(llm_server: LlmServer) -> None:
    """The same check through the transport the plugin picks: aiohttp's on asyncio, httpx's on trio."""
    verify = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    transport = make_transport("auto", verify)
    assert (transport is not None) == on_asyncio()
    async with httpx.AsyncClient(timeout=5.0, verify=verify, transport=transport) as client:
        await check_llm_adapter(
            local_adapter(llm_server, client), LlmServerScript(llm_server), model="small", provider="local"
        )
    assert not llm_server.replies
    assert len(llm_server.requests) == 8


def test_llm_server_script_is_a_conformance_script(llm_server: LlmServer) -> None:
    assert isinstance(LlmServerScript(llm_server), ConformanceScript)


def test_llm_server_script_refuses_codes_it_cannot_produce(llm_server: LlmServer) -> None:
    with pytest.raises(ValueError, match="cannot produce 'EMPTY_RESPONSE'"):
        LlmServerScript(llm_server).expect_failure("EMPTY_RESPONSE")


async def test_a_server_that_never_hangs_up_fails_the_check(llm_server: LlmServer) -> None:
    """The check can fail here too: a hang answered as a plain text reply is caught."""

    class NoHang(LlmServerScript):
        def expect_hang(self, text: str) -> None:
            self.expect_text(text)

    async with httpx.AsyncClient(timeout=5.0) as client:
        with pytest.raises(AssertionError, match=r"hang case \(raw\): the stream ended by itself"):
            await check_llm_adapter(
                local_adapter(llm_server, client), NoHang(llm_server), model="small", provider="local"
            )
