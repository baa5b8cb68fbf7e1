"""web_fetch against a real local server: Markdown, redirects, caps, errors, read-only mode; web_search's seam."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from dsh_permissions import PermissionsPlugin
from dsh_web import SearchHit, WebPlugin

from dsh_core import Harness
from dsh_core.testing import call_tool, result_text

from .web_kit import LocalServer

pytestmark = pytest.mark.anyio

LOCAL = {"allowed_hosts": ["127.0.0.1", "localhost"]}


async def _fetch(url: str, table: dict[str, Any] | None = None, **arguments: Any) -> Any:
    config = {"plugins": {"web": {**LOCAL, **(table or {})}}}
    async with Harness(config=config, plugins=[WebPlugin()], autoload=False) as ctx:
        return await call_tool(ctx, "web_fetch", url=url, **arguments)


async def test_html_comes_as_markdown_with_url_and_type(server: LocalServer) -> None:
    """Headings, links, code and lists survive; scripts and styles do not."""
    result = await _fetch(server.url("/page"))
    text = result_text(result)
    assert result.error_code is None, text
    assert text.startswith(f"URL: {server.url('/page')}\nContent-Type: text/html\n\n# Widgets\n\n")
    assert "## How to use widgets" in text
    assert "Call `widget()` with [the docs](/docs) at hand." in text
    assert "- first\n- second" in text
    assert "alert" not in text
    assert "color:red" not in text


async def test_redirects_are_followed_to_the_final_url(server: LocalServer) -> None:
    """A redirect on an allowed host is followed; the result names where it ended."""
    result = await _fetch(server.url("/redirect?to=/text", host="localhost"))
    text = result_text(result)
    assert text.startswith(f"URL: {server.url('/text', host='localhost')}\nContent-Type: text/plain\n\n")
    assert text.endswith("plain text, größe\n")
    assert [seen.path for seen in server.seen] == ["/redirect?to=/text", "/text"]


async def test_too_many_redirects_stop(server: LocalServer) -> None:
    loop = server.url("/redirect?to=") + server.url("/redirect?to=/text")
    result = await _fetch(loop, {"max_redirects": 1})
    assert "more than 1 redirects" in result_text(result)


async def test_max_chars_cuts_the_text_and_says_so(server: LocalServer) -> None:
    result = await _fetch(server.url("/big"), max_chars=25)
    text = result_text(result)
    assert text.split("\n\n", 1)[1].startswith("0123456789012345678901234\n\n[... cut at 25 of 1000000 characters")


async def test_the_body_cap_stops_the_download(server: LocalServer) -> None:
    result = await _fetch(server.url("/big"), {"max_body_bytes": 1000})
    text = result_text(result)
    assert "[... the body was cut at 1000 bytes]" in text
    assert len(text) < 1200


async def test_binary_bodies_and_error_statuses_are_errors(server: LocalServer) -> None:
    png = await _fetch(server.url("/png"))
    assert png.error_code == "TOOL_ERROR"
    assert "is image/png, not text" in result_text(png)
    missing = await _fetch(server.url("/missing"))
    assert missing.error_code == "TOOL_ERROR"
    assert f"{server.url('/missing')} answered HTTP 404:\nNo such widget" in result_text(missing)


async def test_a_slow_server_meets_the_time_limit(server: LocalServer) -> None:
    """A body that never ends is stopped at ``timeout``; the call returns an error promptly."""
    with anyio.fail_after(10):
        result = await _fetch(server.url("/hang"), {"timeout": 0.5})
    assert result.error_code == "TOOL_ERROR"
    assert "took longer than 0.5 s" in result_text(result)


async def test_nothing_listening_is_a_clear_error(server: LocalServer) -> None:
    result = await _fetch("http://127.0.0.1:9/")  # the discard port: nothing listens there
    assert result.error_code == "TOOL_ERROR"
    assert "fetching http://127.0.0.1:9/ failed: ConnectError" in result_text(result)


async def test_read_only_mode_denies_web_fetch_unless_a_rule_allows_it(server: LocalServer) -> None:
    """web_fetch reaches outside: plan mode denies it, and an allow rule lets it run."""
    for rules, code in (([], "DENIED"), ([{"tool": "web_fetch", "action": "allow"}], None)):
        config = {"plugins": {"web": LOCAL, "permissions": {"mode": "read-only", "rules": rules}}}
        async with Harness(config=config, plugins=[WebPlugin(), PermissionsPlugin()], autoload=False) as ctx:
            result = await call_tool(ctx, "web_fetch", url=server.url("/text"))
        assert result.error_code == code, result_text(result)


class LocalSearch:
    """A search provider with a fixed index: the seam's far side, as a plugin supplies it."""

    name = "local-search"
    provides = ("web_search",)

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []

    def start(self, ctx: Any) -> None:
        ctx.provide("web_search", self)

    async def search(self, query: str, *, max_results: int) -> Sequence[SearchHit]:
        self.asked.append((query, max_results))
        if query == "boom":
            raise RuntimeError("index offline")
        hits = [SearchHit(title=f"{query} {n}", url=f"https://example.com/{n}", snippet=f"about {query}") for n in range(50)]
        return hits[:max_results]


async def test_web_search_goes_to_the_provider() -> None:
    """Results come back as JSON; max_results is passed on and bounded by config."""
    provider = LocalSearch()
    config = {"plugins": {"web": {"max_search_results": 3}}}
    async with Harness(config=config, plugins=[provider, WebPlugin()], autoload=False) as ctx:
        result = await call_tool(ctx, "web_search", query="widgets", max_results=2)
        assert json.loads(result_text(result)) == {
            "query": "widgets",
            "results": [
                {"title": "widgets 0", "url": "https://example.com/0", "snippet": "about widgets"},
                {"title": "widgets 1", "url": "https://example.com/1", "snippet": "about widgets"},
            ],
        }
        too_many = await call_tool(ctx, "web_search", query="widgets", max_results=4)
        assert too_many.error_code == "INVALID_ARGS"
        failed = await call_tool(ctx, "web_search", query="boom")
        assert failed.error_code == "TOOL_ERROR"
        assert "the web search failed: RuntimeError: index offline" in result_text(failed)
    assert provider.asked == [("widgets", 2), ("boom", 3)]


async def test_without_a_provider_there_is_no_web_search() -> None:
    async with Harness(plugins=[WebPlugin()], autoload=False) as ctx:
        assert "web_fetch" in ctx.tools.names()
        assert "web_search" not in ctx.tools.names()
