"""Provider failures translated into ``Failure`` values: HTTP statuses, error bodies, transport errors.

Error tree::

    DshError
      + UnknownModelError(DshError, LookupError)   .provider, .model, .known
    ProviderFailure(Exception)                      .failure — a failure already classified; raised
                                                    inside a stream and turned into its ``Finish``

Statuses: 429 → ``RATE_LIMIT`` (with ``retry_after`` from ``Retry-After`` or ``retry-after-ms``),
401/403 → ``AUTH``, 408 → ``TIMEOUT``, a 4xx whose message speaks of the context length →
``CONTEXT_WINDOW_EXCEEDED``, other 4xx → ``BAD_REQUEST``, 5xx → ``SERVER``. Exceptions, most specific
first: httpx timeouts → ``TIMEOUT``, other httpx transport errors (refused connection, a stream cut
mid-way) → ``TRANSPORT``, the same for the aiohttp errors behind the aiohttp transport's, anything
else → ``UNKNOWN``. Every message names the provider and keeps
its own words, and the request id when the response carried one.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import sys
import time
from collections.abc import Mapping
from typing import Any, Final

from dsh_core import DshError
from dsh_core.llm import Failure, FailureCode

__all__ = [
    "ProviderFailure",
    "UnknownModelError",
    "failure_from_error_object",
    "failure_from_exception",
    "failure_from_status",
    "parse_retry_after",
]


class UnknownModelError(DshError, LookupError):
    """``model_info`` was asked about a model the provider's configuration does not list."""

    def __init__(self, message: str, *, provider: str, model: str, known: tuple[str, ...]) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.known = known


class ProviderFailure(Exception):
    """A failure already classified; the adapter turns it into ``Finish(reason="error")``.

    The LLM runtime reads the ``failure`` attribute too, should one ever escape an adapter.
    """

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


# Phrases providers use when the prompt does not fit: OpenAI's code ``context_length_exceeded``,
# DeepSeek and vLLM's "maximum context length is N tokens", llama.cpp's "exceeds the available
# context size", Anthropic-style "prompt is too long".
_CONTEXT_LENGTH: Final = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|prompt is too long|too many tokens", re.IGNORECASE
)
_REQUEST_ID_HEADERS: Final = ("x-request-id", "request-id", "x-ds-request-id")
_MAX_DETAIL: Final = 500


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date).

    ``None`` when neither header is present or readable; a date in the past gives ``0.0``.
    """
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(value, 0.0)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw.strip())
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP date is always GMT; one without a zone is malformed
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def _detail_of(body: object) -> tuple[str, str]:
    """The provider's own message and error code/type from an error body (``""`` when absent)."""
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, str):
            return error, ""
        if isinstance(error, Mapping):
            message = error.get("message") or error.get("detail") or body.get("message") or body.get("detail")
            code = error.get("code") or error.get("type") or ""
            text = message if isinstance(message, str) else json.dumps(error)
            return text, str(code)
    return "", ""


def _read_body(content: bytes) -> tuple[str, str]:
    text = content.decode("utf-8", errors="replace").strip()
    try:
        message, code = _detail_of(json.loads(text))
    except ValueError:
        message, code = "", ""
    if not message:
        message = text
    if len(message) > _MAX_DETAIL:
        message = message[:_MAX_DETAIL] + "…"
    return message, code


def _request_id(headers: Mapping[str, str]) -> str | None:
    for name in _REQUEST_ID_HEADERS:
        value = headers.get(name)
        if value:
            return value
    return None


def _is_context_length(message: str, code: str) -> bool:
    return bool(_CONTEXT_LENGTH.search(message) or _CONTEXT_LENGTH.search(code))


def failure_from_status(provider: str, status: int, headers: Mapping[str, str], content: bytes) -> Failure:
    """The failure an HTTP error response stands for (see the module docstring for the mapping)."""
    detail, error_code = _read_body(content)
    request_id = _request_id(headers)
    message = f"{provider} answered HTTP {status}" + (f": {detail}" if detail else "")
    if request_id:
        message += f" (request id {request_id})"
    retry_after = parse_retry_after(headers)
    if status == 429:
        return Failure(message, "RATE_LIMIT", status, retry_after)
    if status in (401, 403):
        return Failure(message, "AUTH", status)
    if status == 408:
        return Failure(message, "TIMEOUT", status, retry_after)
    if 400 <= status < 500:
        code: FailureCode = (
            "CONTEXT_WINDOW_EXCEEDED" if _is_context_length(detail, error_code) else "BAD_REQUEST"
        )
        return Failure(message, code, status)
    if status >= 500:
        return Failure(message, "SERVER", status, retry_after)
    return Failure(message, "UNKNOWN", status)


def failure_from_error_object(provider: str, body: Mapping[str, Any]) -> Failure:
    """The failure an error object stands for when it comes with a 200, in the stream or as the body.

    A numeric ``code`` that looks like an HTTP status (OpenRouter sends those) is read as one;
    otherwise a rate-limit or context-length wording is recognised, and anything else is ``SERVER``:
    the provider accepted the request and then failed.
    """
    detail, error_code = _detail_of(body)
    detail = detail or json.dumps(body)[:_MAX_DETAIL]
    error = body.get("error")
    raw_code = error.get("code") if isinstance(error, Mapping) else None
    if isinstance(raw_code, int) and not isinstance(raw_code, bool) and 400 <= raw_code < 600:
        return failure_from_status(provider, raw_code, {}, json.dumps(body).encode())
    message = f"{provider} reported an error in its response: {detail}"
    if "rate_limit" in error_code.lower() or "rate limit" in detail.lower():
        return Failure(message, "RATE_LIMIT")
    if _is_context_length(detail, error_code):
        return Failure(message, "CONTEXT_WINDOW_EXCEEDED")
    return Failure(message, "SERVER")


def failure_from_exception(provider: str, url: str, exc: Exception) -> Failure:
    """The failure an exception raised while talking to the provider stands for."""
    if isinstance(exc, ProviderFailure):
        return exc.failure
    import httpx  # imported with the client, before any request could fail: a lookup here
    import httpx_sse

    why = str(exc) or type(exc).__name__
    aiohttp_error = _aiohttp_error(exc)
    if aiohttp_error is not None:
        return _failure_from_aiohttp(provider, url, aiohttp_error)
    if isinstance(exc, httpx.ConnectTimeout):
        return Failure(f"{provider}: connecting to {url} timed out ({why})", "TIMEOUT")
    if isinstance(exc, httpx.TimeoutException):
        return Failure(f"{provider}: no data from {url} within the timeout ({type(exc).__name__})", "TIMEOUT")
    if isinstance(exc, httpx.ConnectError):
        return Failure(f"{provider}: cannot connect to {url}: {why}", "TRANSPORT")
    if isinstance(exc, httpx.TransportError | httpx.DecodingError | httpx_sse.SSEError):
        return Failure(f"{provider}: the connection to {url} failed mid-response: {why}", "TRANSPORT")
    return Failure(f"{provider}: {type(exc).__name__}: {why}", "UNKNOWN")


def _aiohttp_error(exc: BaseException) -> BaseException | None:
    """The aiohttp error behind ``exc`` (itself, or the cause httpx-aiohttp mapped it from), if any.

    httpx-aiohttp maps aiohttp's errors to httpx's, but not always to the right one (it maps
    every ``ClientConnectionError``, a refused connection and a server that hung up included, to
    ``httpx.ConnectTimeout``), so the cause decides. aiohttp is looked up, never imported: only the
    aiohttp transport raises its errors.
    """
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is None:
        return None
    client_error: type[BaseException] = aiohttp.ClientError
    for candidate in (exc, exc.__cause__):
        if isinstance(candidate, client_error):
            return candidate
    return None


def _failure_from_aiohttp(provider: str, url: str, exc: BaseException) -> Failure:
    import aiohttp

    why = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return Failure(f"{provider}: connecting to {url} timed out ({why})", "TIMEOUT")
    if isinstance(exc, aiohttp.ServerTimeoutError):  # the socket-read timeouts included
        return Failure(f"{provider}: no data from {url} within the timeout ({type(exc).__name__})", "TIMEOUT")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return Failure(f"{provider}: cannot connect to {url}: {why}", "TRANSPORT")
    return Failure(f"{provider}: the connection to {url} failed mid-response: {why}", "TRANSPORT")
