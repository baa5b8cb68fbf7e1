"""Failures mapped to Failure codes: HTTP statuses, timeouts, refused connections, cut streams, cancel."""

from __future__ import annotations

import email.utils
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypeAlias

import aiohttp
import anyio
import anyio.lowlevel
import httpx
import pytest
from dsh_harness_openai import OpenAIPlugin
from dsh_harness_openai._errors import failure_from_exception, failure_from_status, parse_retry_after
from dsh_harness_openai.testing import LlmServer, Reply, chunk, sse
from httpx_aiohttp.transport import map_aiohttp_exceptions

from dsh_core import Context, Harness, Text, UserMessage
from dsh_core.llm import Failure, Finish, LlmRequest, TextDelta

#: the ``chat`` fixture: ``await chat("provider/model", messages, **request_fields)`` -> the chunks
Chat: TypeAlias = Callable[..., Awaitable[list[Any]]]

pytestmark = pytest.mark.anyio


async def test_429_is_rate_limit_with_retry_after_seconds(llm_server: LlmServer, chat: Chat) -> None:
    """429 → RATE_LIMIT carrying Retry-After, the status, the provider's message and the request id."""
    llm_server.error(429, "Rate limit reached", headers={"Retry-After": "7", "x-request-id": "req-123"})
    (finish,) = await chat()
    assert finish == Finish(
        "error",
        Failure(
            "deepseek answered HTTP 429: Rate limit reached (request id req-123)", "RATE_LIMIT", 429, 7.0
        ),
    )


async def test_429_with_an_http_date_retry_after(llm_server: LlmServer, chat: Chat) -> None:
    """Retry-After as an HTTP date becomes the seconds until then."""
    when = email.utils.formatdate(4_000_000_000, usegmt=True)
    llm_server.error(429, "slow down", headers={"Retry-After": when})
    (finish,) = await chat()
    assert finish.error.code == "RATE_LIMIT"
    assert finish.error.retry_after is not None
    assert finish.error.retry_after > 1_000_000  # the date is decades away


def test_retry_after_forms() -> None:
    """Seconds, milliseconds, dates past and future; junk gives None."""
    now = 1_700_000_000.0
    assert parse_retry_after({"retry-after": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": email.utils.formatdate(now + 30, usegmt=True)}, now=now) == 30.0
    assert parse_retry_after({"retry-after": email.utils.formatdate(now - 30, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "-3"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "nan"}) is None
    assert parse_retry_after({}) is None


@pytest.mark.parametrize(
    ("status", "message", "code"),
    [
        (500, "Internal error", "SERVER"),
        (502, "Bad gateway", "SERVER"),
        (503, "Service Unavailable", "SERVER"),
        (401, "Authentication Fails (no such user)", "AUTH"),
        (403, "Forbidden", "AUTH"),
        (408, "Request timeout", "TIMEOUT"),
        (
            400,
            "This model's maximum context length is 1000000 tokens. However, you requested 1200000 tokens.",
            "CONTEXT_WINDOW_EXCEEDED",
        ),
        (400, "Invalid 'messages[2]': missing field 'content'", "BAD_REQUEST"),
        (402, "Insufficient Balance", "BAD_REQUEST"),
        (404, "Model Not Exist", "BAD_REQUEST"),
        (422, "Invalid parameters", "BAD_REQUEST"),
    ],
)
async def test_error_statuses_map_to_codes(
    llm_server: LlmServer, chat: Chat, status: int, message: str, code: str
) -> None:
    """Each status maps to its code; the message keeps the provider's words and the status."""
    llm_server.error(status, message)
    (finish,) = await chat()
    assert finish.reason == "error"
    assert (finish.error.code, finish.error.status) == (code, status)
    assert finish.error.message == f"deepseek answered HTTP {status}: {message}"


async def test_503_retry_after_is_kept(llm_server: LlmServer, chat: Chat) -> None:
    """A 5xx with Retry-After carries it too."""
    llm_server.error(503, "busy", headers={"Retry-After": "3"})
    (finish,) = await chat()
    assert (finish.error.code, finish.error.retry_after) == ("SERVER", 3.0)


def test_openai_context_length_code_is_recognised() -> None:
    """OpenAI's error code context_length_exceeded is enough, whatever the wording."""
    body = b'{"error": {"message": "Too long.", "type": "invalid_request_error", "code": "context_length_exceeded"}}'
    assert failure_from_status("openai", 400, {}, body).code == "CONTEXT_WINDOW_EXCEEDED"


def test_non_json_error_bodies_are_quoted() -> None:
    """A plain-text error page is kept (truncated) as the message."""
    failure = failure_from_status("local", 502, {}, b"<html>" + b"x" * 1000)
    assert failure.code == "SERVER"
    assert failure.message.startswith("local answered HTTP 502: <html>xxx")
    assert len(failure.message) < 600


def test_other_error_body_shapes() -> None:
    """{"error": "text"} (Ollama) and {"message": ...} (vLLM) are read as the provider's message."""
    assert failure_from_status("p", 404, {}, b'{"error": "model \\"x\\" not found"}').message == (
        'p answered HTTP 404: model "x" not found'
    )
    assert failure_from_status(
        "p", 400, {}, b'{"object": "error", "message": "bad", "code": 400}'
    ).message == ("p answered HTTP 400: bad")


def test_unexpected_exceptions_are_unknown() -> None:
    """An exception that is not httpx's becomes UNKNOWN naming its type."""
    failure = failure_from_exception("p", "http://x", KeyError("k"))
    assert (failure.code, failure.message) == ("UNKNOWN", "p: KeyError: 'k'")


@pytest.mark.parametrize(
    ("error", "code", "words"),
    [
        (aiohttp.ServerDisconnectedError(), "TRANSPORT", "failed mid-response"),
        (aiohttp.ClientPayloadError("cut"), "TRANSPORT", "failed mid-response"),
        (aiohttp.SocketTimeoutError("read"), "TIMEOUT", "no data from http://x within the timeout"),
        (aiohttp.ConnectionTimeoutError("connect"), "TIMEOUT", "connecting to http://x timed out"),
    ],
)
def test_aiohttp_errors_are_classified_by_their_cause(error: Exception, code: str, words: str) -> None:
    """httpx-aiohttp maps every ClientConnectionError to httpx.ConnectTimeout: its cause decides."""
    with pytest.raises(httpx.HTTPError) as caught:
        with map_aiohttp_exceptions():
            raise error
    assert isinstance(caught.value, httpx.ConnectTimeout | httpx.ReadError | httpx.ReadTimeout)
    failure = failure_from_exception("p", "http://x", caught.value)
    assert failure.code == code
    assert words in failure.message


@pytest.fixture
def openai_config(llm_server: LlmServer) -> dict[str, Any]:
    """The test server as ``deepseek``, with a short timeout for the slow-headers test."""
    return {"timeout": 0.5, "providers": {"deepseek": {"base_url": llm_server.base_url}}}


async def test_slow_headers_time_out(llm_server: LlmServer, chat: Chat) -> None:
    """No response headers within the timeout → TIMEOUT."""
    llm_server.reply(Reply(hold_headers=True))
    (finish,) = await chat()
    assert finish.reason == "error"
    assert finish.error.code == "TIMEOUT"
    assert "deepseek" in finish.error.message


async def test_connection_refused_is_transport(free_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing listening at the base URL → TRANSPORT naming the URL."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk")
    config = {
        "plugins": {"openai": {"providers": {"deepseek": {"base_url": f"http://127.0.0.1:{free_port}"}}}}
    }
    async with Harness(config=config, plugins=[OpenAIPlugin()], autoload=False) as ctx:
        request = LlmRequest("deepseek", "deepseek-v4-flash", [UserMessage((Text("hi"),))])
        (finish,) = [c async for c in ctx.llm.stream(request)]
    assert finish.reason == "error"
    assert finish.error.code == "TRANSPORT"
    assert f"127.0.0.1:{free_port}" in finish.error.message


async def test_a_stream_cut_mid_way_is_transport(llm_server: LlmServer, chat: Chat) -> None:
    """The connection closing before the body is complete → TRANSPORT, after the deltas that arrived."""
    body = sse(chunk(content="par"), chunk(content="tial"), done=False)
    llm_server.reply(Reply(body=body, cut=True))
    chunks = await chat()
    assert chunks[:2] == [TextDelta(0, "par"), TextDelta(0, "tial")]
    assert chunks[2].reason == "error"
    assert chunks[2].error.code == "TRANSPORT"
    assert len(chunks) == 3


async def test_cancel_mid_stream_closes_the_connection(llm_server: LlmServer, llm_ctx: Context) -> None:
    """Cancelling the consumer mid-stream propagates (no Finish) and the server sees the disconnect."""
    llm_server.reply(Reply(body=[sse(chunk(content="first"), done=False)], hold_open=True))
    request = LlmRequest("deepseek", "deepseek-v4-flash", [UserMessage((Text("hi"),))])
    seen: list[object] = []
    with anyio.CancelScope() as scope:
        async with aclosing(llm_ctx.llm.stream(request)) as chunks:
            async for c in chunks:
                seen.append(c)
                scope.cancel()
                await anyio.lowlevel.checkpoint()  # where the cancel above lands
    assert scope.cancelled_caught
    assert seen == [TextDelta(0, "first")]
    assert await anyio.to_thread.run_sync(llm_server.disconnected.wait, 5)


async def test_cancel_while_waiting_for_data_closes_the_connection(
    llm_server: LlmServer, llm_ctx: Context
) -> None:
    """A cancel that arrives while the adapter awaits the next bytes closes the response too."""
    llm_server.reply(Reply(body=[sse(chunk(content="first"), done=False)], hold_open=True))
    request = LlmRequest("deepseek", "deepseek-v4-flash", [UserMessage((Text("hi"),))])
    seen: list[object] = []
    with anyio.move_on_after(10) as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_soon() -> None:
                await anyio.wait_all_tasks_blocked()  # the consumer is now blocked reading the socket
                tg.cancel_scope.cancel()

            async def consume() -> None:
                async with aclosing(llm_ctx.llm.stream(request)) as chunks:
                    async for c in chunks:
                        seen.append(c)
                        tg.start_soon(cancel_soon)

            tg.start_soon(consume)
    assert not scope.cancelled_caught
    assert seen == [TextDelta(0, "first")]
    assert await anyio.to_thread.run_sync(llm_server.disconnected.wait, 5)


async def test_transport_errors_before_any_response(monkeypatch: pytest.MonkeyPatch) -> None:
    """An httpx error raised by the transport is mapped like the real one (MockTransport)."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk")
    plugin = OpenAIPlugin(transport=httpx.MockTransport(refuse))
    async with Harness(plugins=[plugin], autoload=False) as ctx:
        request = LlmRequest("deepseek", "deepseek-v4-flash", [UserMessage((Text("hi"),))])
        (finish,) = [c async for c in ctx.llm.stream(request)]
    assert finish.error.code == "TIMEOUT"
