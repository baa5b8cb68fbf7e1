"""Which transport carries a provider's requests under its ``httpx.AsyncClient``.

On asyncio, ``httpx-aiohttp``'s ``AiohttpTransport`` (what the OpenAI SDK offers as its faster
client): aiohttp reads the socket straight from its protocol with a C HTTP parser, where httpx's
own stack (httpcore, h11, anyio's stream) pays per read for an epoll re-registration, a timeout
scope and pure-Python parsing. At a model's pace every chunk is a read of its own, so that is most
of a streamed chunk's cost (``docs/plugins/openai.md``, "Transports", has the figures). aiohttp
runs on asyncio only: on trio, and when ``httpx-aiohttp`` is not installed, httpx's own transport
is used.
"""

from __future__ import annotations

import asyncio
import importlib.util
import ssl
from typing import TYPE_CHECKING

from ._config import HttpTransport

if TYPE_CHECKING:
    import httpx

__all__ = ["make_transport", "on_asyncio"]


def on_asyncio() -> bool:
    """Whether the calling code runs in an asyncio event loop (not trio's)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def make_transport(choice: HttpTransport, verify: ssl.SSLContext) -> httpx.AsyncBaseTransport | None:
    """The transport for a new client made in the running event loop; ``None``: httpx's own."""
    if choice == "httpx" or not on_asyncio() or importlib.util.find_spec("httpx_aiohttp") is None:
        return None
    from httpx_aiohttp import AiohttpTransport

    return AiohttpTransport(verify=verify)
