"""The ``openai`` plugin: one adapter and one HTTP client per configured provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from ._adapter import OpenAIAdapter
from ._config import OpenAIConfig, resolve_providers

if TYPE_CHECKING:
    from dsh_core import Context

__all__ = ["OpenAIPlugin"]


class OpenAIPlugin:
    """Registers an ``OpenAIAdapter`` for every provider: the built-in ``deepseek`` and ``openai``,
    and those in ``[plugins.openai.providers]``.

    Each provider gets its own ``httpx.AsyncClient``, created in ``start`` and closed when the
    plugin stops (after its adapter is unregistered). Nothing touches the network or reads an API
    key before a request is made. ``transport`` replaces the network for every client (tests pass an
    ``httpx.MockTransport``).
    """

    name = "openai"
    requires = ("llm",)
    Config = OpenAIConfig

    def __init__(self, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._transport = transport

    def start(self, ctx: Context) -> None:
        config = ctx.config if isinstance(ctx.config, OpenAIConfig) else OpenAIConfig()
        providers = resolve_providers(config)
        timeout = httpx.Timeout(config.timeout, connect=config.connect_timeout)
        # One TLS context for all clients: loading the CA bundle once per client costs ~15 ms each.
        tls = httpx.create_ssl_context() if self._transport is None else True
        for settings in providers.values():
            client = httpx.AsyncClient(timeout=timeout, verify=tls, transport=self._transport)
            ctx.effect(client.aclose)  # undone after the adapter registration below (LIFO)
            adapter = OpenAIAdapter(
                settings.name,
                client=client,
                base_url=settings.base_url,
                api_key_env=settings.api_key_env,
                dialect=settings.dialect,
                models=settings.models,
            )
            ctx.llm.register_adapter(settings.name, adapter)
