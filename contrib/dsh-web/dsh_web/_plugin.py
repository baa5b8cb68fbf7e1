"""The ``web`` plugin: ``web_fetch`` over a guarded client, and ``web_search`` when a provider is loaded."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import attrs

from dsh_core import ToolError, tool

from ._addresses import HostAllowList, Resolver
from ._search import SEARCH_SERVICE, SearchHit, WebSearchProvider

if TYPE_CHECKING:
    import httpx

    from dsh_core import Context

__all__ = ["WebConfig", "WebPlugin"]

#: characters of text ``web_fetch`` returns when the call gives no ``max_chars``
DEFAULT_MAX_CHARS = 50_000
#: characters of an error page shown with its status
_ERROR_PAGE_CHARS = 2_000


def _positive(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not value > 0:
        msg = f"{attribute.name} must be greater than 0, got {value!r}"
        raise ValueError(msg)


def _hosts(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(host, str) for host in value):
        msg = f"allowed_hosts must be a list of host names, got {value!r}"
        raise TypeError(msg)
    return tuple(value)


@attrs.frozen(kw_only=True)
class WebConfig:
    """The ``[plugins.web]`` table; every key is optional."""

    #: hosts fetched although they resolve to loopback, private, link-local or metadata addresses
    #: (exact names, IP literals as written in URLs, or ``*.example.com``)
    allowed_hosts: tuple[str, ...] = attrs.field(default=(), converter=_hosts)
    #: seconds one fetch may take, redirects included
    timeout: float = attrs.field(default=30.0, validator=_positive)
    #: bytes of body read at most
    max_body_bytes: int = attrs.field(default=5 * 1024 * 1024, validator=_positive)
    #: redirects followed at most
    max_redirects: int = attrs.field(default=10, validator=_positive)
    #: the results ``web_search`` asks a provider for, at most
    max_search_results: int = attrs.field(default=20, validator=_positive)
    #: the ``User-Agent`` header
    user_agent: str = "dsh-web/0.1 (an AI agent's web_fetch)"


class WebPlugin:
    """Gives agents ``web_fetch``, and ``web_search`` when a ``web_search`` service is loaded.

    ``resolver`` replaces the system's name resolution (tests give names addresses with it).
    """

    name = "web"
    requires: ClassVar[tuple[str, ...]] = ("tools",)
    uses: ClassVar[tuple[str, ...]] = (SEARCH_SERVICE,)
    Config = WebConfig

    def __init__(self, *, resolver: Resolver | None = None) -> None:
        self._resolver = resolver
        self._client: httpx.AsyncClient | None = None

    def _client_for(self, config: WebConfig) -> httpx.AsyncClient:
        """The plugin's client, made at the first fetch: starting the harness imports no httpx."""
        if self._client is None:
            import httpx

            from ._transport import GuardedBackend, GuardedTransport, system_resolver

            backend = GuardedBackend(HostAllowList(config.allowed_hosts), self._resolver or system_resolver)
            self._client = httpx.AsyncClient(
                transport=GuardedTransport(backend),
                follow_redirects=False,  # followed one hop at a time, each checked
                trust_env=False,  # no proxy from the environment: it would connect for us, unchecked
                timeout=httpx.Timeout(config.timeout),
                headers={"user-agent": config.user_agent, "accept": "text/html, text/*;q=0.9, */*;q=0.5"},
            )
        return self._client

    async def _close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def start(self, ctx: Context) -> None:
        config = ctx.config if isinstance(ctx.config, WebConfig) else WebConfig()
        ctx.effect(self._close)

        @tool
        async def web_fetch(url: str, max_chars: Annotated[int, {"minimum": 1}] = DEFAULT_MAX_CHARS) -> str:
            """Fetch a web page or text file by URL (http or https) and return its text; HTML comes as
            Markdown. The result starts with the final URL (after redirects) and the content type.
            Addresses of this machine and private networks are refused.

            Args:
                url: the absolute URL, e.g. 'https://docs.python.org/3/library/json.html'
                max_chars: characters of text to return at most (default 50000)
            """
            from ._fetch import FetchLimits, fetch

            limits = FetchLimits(
                timeout=config.timeout, max_bytes=config.max_body_bytes, max_redirects=config.max_redirects
            )
            found = await fetch(self._client_for(config), url, limits)
            text = found.text
            if found.status >= 400:
                msg = f"{found.url} answered HTTP {found.status}:\n{text[:_ERROR_PAGE_CHARS]}"
                raise ToolError(msg)
            note = ""
            if len(text) > max_chars:
                note = (
                    f"\n\n[... cut at {max_chars} of {len(text)} characters; "
                    "call again with a larger max_chars to read more]"
                )
                text = text[:max_chars]
            elif found.truncated_body:
                note = f"\n\n[... the body was cut at {config.max_body_bytes} bytes]"
            return f"URL: {found.url}\nContent-Type: {found.content_type}\n\n{text}{note}"

        ctx.tools.register(web_fetch)
        provider = ctx.get_service(SEARCH_SERVICE)
        if provider is not None:
            ctx.tools.register(_search_tool(provider, config.max_search_results))


def _search_tool(provider: WebSearchProvider, most: int) -> Any:
    @tool
    async def web_search(query: str, max_results: Annotated[int, {"minimum": 1}] = 5) -> str:
        """Search the web; returns JSON {"query", "results": [{"title", "url", "snippet"}]}, best first.
        Fetch a result's page with web_fetch.

        Args:
            query: what to search for
            max_results: how many results to return at most (default 5)
        """
        if not query.strip():
            msg = "query is empty; say what to search for"
            raise ToolError(msg)
        try:
            hits = await provider.search(query, max_results=min(max_results, most))
        except Exception as exc:  # a failing provider is the model's error result; cancellation passes
            msg = f"the web search failed: {type(exc).__name__}: {exc}"
            raise ToolError(msg) from exc
        results = [_hit(hit) for hit in list(hits)[: min(max_results, most)]]
        return json.dumps({"query": query, "results": results}, ensure_ascii=False)

    return _with_maximum(web_search, "max_results", most)


def _hit(hit: Any) -> dict[str, str]:
    if isinstance(hit, SearchHit):
        return {"title": hit.title, "url": hit.url, "snippet": hit.snippet}
    if isinstance(hit, dict) and isinstance(hit.get("url"), str):
        return {"title": str(hit.get("title", "")), "url": hit["url"], "snippet": str(hit.get("snippet", ""))}
    msg = f"the search provider returned {hit!r}; expected SearchHit(title, url, snippet)"
    raise ToolError(msg)


def _with_maximum(found: Any, parameter: str, maximum: int) -> Any:
    properties = dict(found.parameters["properties"])
    properties[parameter] = {**properties[parameter], "maximum": maximum}
    return attrs.evolve(found, parameters={**found.parameters, "properties": properties})
