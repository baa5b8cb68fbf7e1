"""The ``openai`` plugin: one adapter per configured provider, each with its own HTTP client made on its first request."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._adapter import OpenAIAdapter
from ._config import OpenAIConfig, resolve_providers
from ._transport import make_transport

if TYPE_CHECKING:
    import httpx

    from dsh_core import Context

__all__ = ["OpenAIPlugin"]


class OpenAIPlugin:
    """Registers an ``OpenAIAdapter`` for every provider: the built-in ``deepseek`` and ``openai``,
    and those in ``[plugins.openai.providers]``.

    Each provider gets its own ``httpx.AsyncClient``, made on the provider's first request (so a
    command that makes none never imports httpx, and ``dsh run`` makes one client, not one per
    provider) and closed when the plugin stops, after its adapter is unregistered; an adapter of a
    stopped plugin makes no new client. Nothing touches the network or reads an API key before a
    request is made. On asyncio a client's transport is aiohttp's (``http_transport = "auto"``,
    when ``httpx-aiohttp`` is installed: ``_transport`` says why), on trio httpx's own.
    ``transport`` replaces the network for every client (tests pass an ``httpx.MockTransport``).
    """

    name = "openai"
    requires = ("llm",)
    Config = OpenAIConfig

    def __init__(self, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._transport = transport

    def start(self, ctx: Context) -> None:
        config = ctx.config if isinstance(ctx.config, OpenAIConfig) else OpenAIConfig()
        clients = _Clients(config, self._transport)
        ctx.effect(clients.aclose)  # undone after the adapter registrations below (LIFO)
        for settings in resolve_providers(config).values():
            adapter = OpenAIAdapter(
                settings.name,
                client=clients.maker(settings.name, settings.base_url),
                base_url=settings.base_url,
                api_key_env=settings.api_key_env,
                dialect=settings.dialect,
                models=settings.models,
                price_registry=config.price_registry,
            )
            ctx.llm.register_adapter(settings.name, adapter)


class _Clients:
    """The plugin's HTTP clients: each made on its provider's first request, all closed with the plugin."""

    def __init__(self, config: OpenAIConfig, transport: httpx.AsyncBaseTransport | None) -> None:
        self._config = config
        self._transport = transport
        self._made: list[httpx.AsyncClient] = []
        self._closed = False
        self._tls: ssl.SSLContext | None = None

    def maker(self, provider: str, base_url: str) -> Callable[[], httpx.AsyncClient]:
        """The function that makes ``provider``'s client."""

        def make() -> httpx.AsyncClient:
            if self._closed:
                msg = f"{provider}: the openai plugin has stopped; its adapters make no more requests"
                raise RuntimeError(msg)
            import httpx

            timeout = httpx.Timeout(self._config.timeout, connect=self._config.connect_timeout)
            if self._transport is None:
                verify = self._verify(base_url)
                transport = make_transport(self._config.http_transport, verify)
                client = httpx.AsyncClient(timeout=timeout, verify=verify, transport=transport)
            else:
                client = httpx.AsyncClient(timeout=timeout, transport=self._transport)
            self._made.append(client)
            return client

        return make

    def _verify(self, base_url: str) -> ssl.SSLContext:
        """The TLS context of a client for ``base_url``.

        One context for all https providers: loading the CA bundle costs ~15 ms each time. A plain
        ``http://`` provider (a local server) makes no TLS connection (clients follow no redirects),
        so it gets a context that trusts no certificate instead of paying for the bundle: should it
        ever make one, verification fails closed.
        """
        if not base_url.startswith("https://"):
            return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, and trusts nobody
        if self._tls is None:
            import httpx

            self._tls = httpx.create_ssl_context()
        return self._tls

    async def aclose(self) -> None:
        """Close every client made; no new one is made afterwards. Idempotent."""
        self._closed = True
        made, self._made = self._made, []
        for client in made:
            await client.aclose()
