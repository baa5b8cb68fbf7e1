"""One ``web_fetch``: GET with redirects followed hop by hop, a size cap and a time limit, text out."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator

import anyio
import anyio.to_thread
import attrs
import httpcore
import httpx

from dsh_core import ToolError

__all__ = ["FetchLimits", "Fetched", "fetch"]

_SCHEMES = ("http", "https")
_REDIRECTS = (301, 302, 303, 307, 308)
_HTML = ("text/html", "application/xhtml+xml")
#: content types read as text besides ``text/*``
_TEXTUAL = (
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-javascript",
    "application/x-yaml",
    "application/yaml",
    "application/toml",
)
_TRANSPORT_ERRORS = (
    httpx.HTTPError,
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    ssl.SSLError,
)


@attrs.frozen(kw_only=True)
class FetchLimits:
    """What one fetch may take."""

    #: seconds for the whole fetch, redirects included
    timeout: float
    #: bytes of body read at most (the rest is not downloaded)
    max_bytes: int
    #: redirects followed at most
    max_redirects: int


@attrs.frozen(kw_only=True)
class Fetched:
    """What a fetch found: where it ended, what it was, and its text."""

    url: str
    status: int
    content_type: str
    text: str
    #: the body was longer than ``max_bytes`` and was cut there
    truncated_body: bool


async def _release(response: httpx.Response, parts: AsyncIterator[bytes]) -> None:
    """Leave a body read midway without abandoning httpx's chain of async generators.

    Dropped while suspended, each would be reported by trio as a ResourceWarning
    (encode/httpx#3686): closing the response makes the next read fail at the bottom of the
    chain, so that every generator ends by that exception. Shielded: it runs on a time-out too.
    """
    if getattr(parts, "ag_frame", None) is None:  # exhausted, or ended by an exception from below
        return
    with anyio.CancelScope(shield=True):
        await response.aclose()
        with contextlib.suppress(Exception):  # the read on the closed response is meant to fail
            async for _ in parts:
                pass


def check_url(url: str, where: str = "url") -> httpx.URL:
    """``url`` parsed, if it is an absolute ``http`` or ``https`` URL with a host.

    :raises ToolError: naming what is wrong.
    """
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        msg = f"{where} {url!r} is not a valid URL ({exc})"
        raise ToolError(msg) from None
    if parsed.scheme not in _SCHEMES:
        msg = f"{where} {url!r} is not an http or https URL; web_fetch fetches only those"
        raise ToolError(msg)
    if not parsed.host:
        msg = f"{where} {url!r} has no host"
        raise ToolError(msg)
    return parsed


async def fetch(client: httpx.AsyncClient, url: str, limits: FetchLimits) -> Fetched:
    """GET ``url``, following redirects one hop at a time (each one checked like the first).

    :raises ToolError: a refused address or scheme, too many redirects, a transport failure, a
        time-out, or a body that is not text.
    """
    target = check_url(url)
    with anyio.move_on_after(limits.timeout) as deadline:
        return await _follow(client, target, limits)
    assert deadline.cancelled_caught
    msg = f"fetching {url} took longer than {limits.timeout:g} s and was stopped"
    raise ToolError(msg)


async def _follow(client: httpx.AsyncClient, target: httpx.URL, limits: FetchLimits) -> Fetched:
    for hop in range(limits.max_redirects + 1):
        try:
            async with client.stream("GET", target) as response:
                location = response.headers.get("location")
                if response.status_code in _REDIRECTS and location:
                    target = check_url(str(target.join(location)), where=f"redirect {hop + 1} to")
                    continue
                return await _read(response, str(target), limits)
        except ToolError as exc:
            if hop:
                msg = f"after {hop} redirect(s), at {target}: {exc}"
                raise type(exc)(msg) from exc
            raise
        except _TRANSPORT_ERRORS as exc:
            msg = f"fetching {target} failed: {type(exc).__name__}: {exc or 'no details'}"
            raise ToolError(msg) from exc
    msg = f"more than {limits.max_redirects} redirects; stopped at {target}"
    raise ToolError(msg)


async def _read(response: httpx.Response, url: str, limits: FetchLimits) -> Fetched:
    content_type = response.headers.get("content-type", "")
    kind = content_type.split(";", 1)[0].strip().lower()
    textual = kind.startswith("text/") or kind in _HTML or kind in _TEXTUAL or kind.endswith(("+json", "+xml"))
    if kind and not textual:
        msg = f"{url} is {kind}, not text; web_fetch reads only text and HTML"
        raise ToolError(msg)
    body = bytearray()
    truncated = False
    parts = response.aiter_bytes()  # decoded: the cap bounds what a compressed body becomes
    try:
        async for part in parts:
            body += part
            if len(body) > limits.max_bytes:
                del body[limits.max_bytes :]
                truncated = True
                break
    finally:
        await _release(response, parts)
    raw = bytes(body)
    charset = response.charset_encoding or "utf-8"
    try:
        text = raw.decode(charset, errors="replace")
    except LookupError:
        text = raw.decode("utf-8", errors="replace")
    if kind in _HTML or (not kind and text.lstrip()[:15].lower().startswith(("<!doctype html", "<html"))):
        from ._markdown import html_to_markdown  # BeautifulSoup and markdownify: only when a page is HTML

        text = await anyio.to_thread.run_sync(html_to_markdown, text)
    return Fetched(
        url=url, status=response.status_code, content_type=kind or "unknown", text=text, truncated_body=truncated
    )
