"""The web search seam: what a provider plugin supplies as ``ctx.web_search``, and what it answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

__all__ = ["SEARCH_SERVICE", "SearchHit", "WebSearchProvider"]

#: the service name ``web_search`` looks up
SEARCH_SERVICE = "web_search"


@attrs.frozen(kw_only=True)
class SearchHit:
    """One search result: its page's title and URL, and a snippet of its text."""

    title: str
    url: str
    snippet: str = ""


@runtime_checkable
class WebSearchProvider(Protocol):
    """``ctx.web_search``: a search engine, as a plugin supplies it (``ctx.provide("web_search", obj)``)."""

    async def search(self, query: str, *, max_results: int) -> Sequence[SearchHit]:
        """At most ``max_results`` hits for ``query``, best first.

        Raise (any ``Exception``) when the search fails; the message becomes the tool's error.
        Cancellation (a cancelled turn) must pass through.
        """
        ...
