"""``OpenAIAdapter``: one provider's ``/chat/completions`` endpoint as a dsh LLM adapter.

``stream`` posts the request with ``stream: true`` and reads the server-sent events with
httpx-sse. It never raises for a failure: every one ends the stream as
``Finish(reason="error", error=Failure(...))`` (``_errors`` says which code). Cancellation is a
``BaseException`` and passes through; leaving the ``async with`` closes the HTTP response, so the
server sees the connection go at once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import attrs

from dsh_core.llm import Chunk, Failure, Finish, LlmRequest, ModelInfo

from ._config import Dialect, ProviderSettings
from ._errors import (
    ProviderFailure,
    UnknownModelError,
    failure_from_error_object,
    failure_from_exception,
    failure_from_status,
)
from ._price_registry import registry_prices
from ._request import DEEPSEEK_ALIASES, build_body, plan_call, resolve_model
from ._stream import StreamParser

if TYPE_CHECKING:
    import httpx
    from httpx_sse import ServerSentEvent

__all__ = ["OpenAIAdapter"]


class OpenAIAdapter:
    """An LLM adapter for any OpenAI-compatible chat completions endpoint.

    ``client`` is used as given and never closed here: its owner closes it (the ``openai`` plugin
    does, when it stops). It may also be a function that makes the client, called once, on the
    first request (or the first read of ``client``): the plugin passes one, so that a provider
    nobody calls costs no client, and a command that calls none never imports httpx. The API key
    is read from the environment variable ``api_key_env`` at every request, never earlier;
    ``api_key_env=None`` sends no ``Authorization`` header (local servers).

    ``model_info`` knows the ``models`` given (and, for the ``deepseek`` dialect, the retired
    aliases of those) and raises ``UnknownModelError`` for others. ``stream`` does not check the
    model against that list: the provider decides which models it serves, and a model without
    known limits is sent as asked, with ``max_tokens`` unclamped.
    """

    def __init__(
        self,
        provider: str,
        *,
        client: httpx.AsyncClient | Callable[[], httpx.AsyncClient],
        base_url: str,
        api_key_env: str | None = None,
        dialect: Dialect = "compatible",
        models: Mapping[str, ModelInfo] | None = None,
        price_registry: bool = True,
    ) -> None:
        self._settings = ProviderSettings(
            name=provider,
            base_url=base_url,
            api_key_env=api_key_env or None,
            dialect=dialect,
            models=MappingProxyType(dict(models or {})),
        )
        self._price_registry = price_registry
        #: models whose prices were looked up in the registry (the table had none)
        self._priced: dict[str, ModelInfo] = {}
        self._client: httpx.AsyncClient | None = None
        self._make_client: Callable[[], httpx.AsyncClient] | None = None
        if callable(client):
            self._make_client = client
        else:
            self._client = client

    @property
    def provider(self) -> str:
        """The provider name this adapter serves (the part before ``/`` in a model string)."""
        return self._settings.name

    @property
    def api_key_env(self) -> str | None:
        """The environment variable the API key is read from (``None``: no key is sent)."""
        return self._settings.api_key_env

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client requests go through (made now if it was given as a function and not made yet)."""
        if self._client is None:
            assert self._make_client is not None  # one of the two is always set
            self._client = self._make_client()
            self._make_client = None
        return self._client

    @property
    def models(self) -> Mapping[str, ModelInfo]:
        """The models this provider is configured with, and their limits (what ``dsh models`` lists)."""
        return self._settings.models

    @property
    def endpoint(self) -> str:
        """The URL requests are posted to."""
        return self._settings.endpoint

    def model_info(self, model: str) -> ModelInfo:
        """The context window, output limit and prices of ``model`` (a retired DeepSeek alias is resolved).

        Prices come from the table (``input_price``, ``output_price``, ``cached_input_price``), else
        (with ``price_registry``) from the genai-prices registry, looked up once per model.

        :raises UnknownModelError: the configuration lists no such model; the message names the
            known ones and the config key that adds one.
        """
        resolved, _ = resolve_model(self._settings, model)
        info = self._settings.models.get(resolved)
        if info is not None:
            if info.prices is not None or not self._price_registry:
                return info
            priced = self._priced.get(resolved)
            if priced is None:
                settings = self._settings
                prices = registry_prices(settings.name, settings.base_url, resolved)
                priced = self._priced[resolved] = info if prices is None else attrs.evolve(info, prices=prices)
            return priced
        known = tuple(sorted(self._settings.models))
        if self._settings.dialect == "deepseek":
            known += tuple(
                sorted(alias for alias, (target, _) in DEEPSEEK_ALIASES.items() if target in known)
            )
        name = self._settings.name
        msg = (
            f"provider {name!r} knows no model {model!r} (known: {', '.join(known) or 'none'}); "
            f"declare it as [plugins.openai.providers.{name}.models.{model}] with context_window "
            f"and max_output_tokens"
        )
        raise UnknownModelError(msg, provider=name, model=model, known=known)

    def _headers(self) -> dict[str, str]:
        env = self._settings.api_key_env
        if env is None:
            return {}
        key = os.environ.get(env, "").strip()
        if not key:
            msg = (
                f"{self._settings.name}: no API key: the environment variable {env} is not set "
                f"(set it, or change plugins.openai.providers.{self._settings.name}.api_key_env)"
            )
            raise ProviderFailure(Failure(msg, "AUTH"))
        return {"Authorization": f"Bearer {key}"}

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        """Stream the model's answer to ``request``: deltas, then ``Usage`` (if sent) and one ``Finish``."""
        settings = self._settings
        tail: list[Chunk]
        try:
            call = plan_call(settings, request)
            body = build_body(request, settings, call)
            headers = self._headers()
            client = self.client  # the first request of a lazy client imports httpx
            import httpx_sse

            async with httpx_sse.aconnect_sse(
                client, "POST", settings.endpoint, json=body, headers=headers
            ) as source:
                response = source.response
                parser = StreamParser(settings.name)
                if response.status_code != 200:
                    await response.aread()
                    failure = failure_from_status(
                        settings.name, response.status_code, response.headers, response.content
                    )
                    tail = [Finish("error", failure)]
                elif "text/event-stream" not in response.headers.get("content-type", ""):
                    tail = await _whole_body(settings.name, response, parser)
                else:
                    events = source.aiter_sse()
                    try:
                        async for event in events:
                            if parser.done:
                                continue  # nothing after [DONE] is ours; reading on lets the connection be reused
                            if event.event == "error":
                                raise ProviderFailure(_stream_error(settings.name, event.data))
                            for chunk in parser.feed(event.data):
                                yield chunk
                    except Exception:
                        if not parser.done:
                            raise  # after [DONE] the answer is whole, whatever befalls the connection
                    finally:
                        await _release(response, events)
                    tail = parser.close()
        except Exception as exc:  # noqa: BLE001 - a failure is data; cancellation is a BaseException and passes
            tail = [Finish("error", failure_from_exception(settings.name, settings.endpoint, exc))]
        for chunk in tail:
            yield chunk

    def __repr__(self) -> str:
        return f"<OpenAIAdapter {self._settings.name!r} {self._settings.endpoint} ({self._settings.dialect})>"


async def _release(response: httpx.Response, events: AsyncGenerator[ServerSentEvent, None]) -> None:
    """Leave the event stream without abandoning httpx's chain of async generators.

    When the stream is left midway (a failure, or the consumer closing this adapter's stream),
    the generators that httpx and httpx-sse nest inside ``aiter_sse`` would be dropped while
    suspended, which trio reports as a ResourceWarning for each (encode/httpx#3686). Closing the
    response first makes the next read fail at the bottom of the chain, so that every generator
    ends by that exception.
    """
    if getattr(events, "ag_frame", None) is None:  # finished: exhausted, or ended by an exception from below
        return
    await response.aclose()
    with contextlib.suppress(Exception):  # the read on the closed response is meant to fail
        async for _ in events:  # events already buffered are dropped
            pass


async def _whole_body(provider: str, response: httpx.Response, parser: StreamParser) -> list[Chunk]:
    """A 200 that is not an event stream: a whole completion, an error object, or nonsense."""
    await response.aread()
    content_type = response.headers.get("content-type", "") or "none"
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("error"):
        return [Finish("error", failure_from_error_object(provider, body))]
    if isinstance(body, dict) and "choices" in body:  # the server ignored stream: true
        chunks = parser.feed_object(body)
        parser.done = True
        return [*chunks, *parser.close()]
    msg = f"{provider} answered 200 with content-type {content_type!r}, not an event stream: {response.text[:200]!r}"
    return [Finish("error", Failure(msg, "TRANSPORT"))]


def _stream_error(provider: str, data: str) -> Failure:
    """An ``event: error`` in the stream."""
    parser = StreamParser(provider)
    try:
        parser.feed(data)
    except ProviderFailure as exc:
        return exc.failure
    return Failure(f"{provider} reported an error in its event stream: {data[:200]!r}", "SERVER")
