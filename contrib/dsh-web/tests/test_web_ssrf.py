"""web_fetch refuses every address of a corpus of SSRF tricks, and fetches what allowed_hosts names."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

import pytest
from dsh_web import WebPlugin

from dsh_core import Harness
from dsh_core.testing import call_tool, result_text

from .web_kit import LocalServer

pytestmark = pytest.mark.anyio

#: names a hostile DNS server would answer (the one edge of the network these tests cannot own)
FAKE_DNS = {
    "evil.example": ["127.0.0.1"],
    "rebind.example": ["93.184.216.34", "127.0.0.1"],
    "metadata.example": ["169.254.169.254"],
    "private.example": ["10.1.2.3"],
    "v6loop.example": ["::1"],
    "mapped.example": ["::ffff:127.0.0.1"],
    "public.example": ["127.0.0.1"],  # allowed by name in one test: proves the vetted address is used
}


async def fake_resolver(host: str, port: int) -> Sequence[str]:
    if host in FAKE_DNS:
        return FAKE_DNS[host]
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def corpus(port: int) -> list[str]:
    """At least 30 ways to spell an address of this machine or a private network."""
    here = [
        "127.0.0.1",
        "localhost",
        "LOCALHOST",
        "localhost.",
        "127.1",
        "127.0.1",
        "127.127.127.127",
        "2130706433",  # decimal
        "0x7f000001",  # hex
        "0x7f.1",
        "0x7f.0x0.0x0.0x1",
        "0177.0.0.1",  # octal
        "017700000001",  # octal, whole
        "0",
        "0.0.0.0",
        "[::1]",
        "[0:0:0:0:0:0:0:1]",
        "[::]",
        "[::ffff:127.0.0.1]",  # IPv4-mapped
        "[::ffff:7f00:1]",
        "[0:0:0:0:0:ffff:127.0.0.1]",
        "[64:ff9b::7f00:1]",  # NAT64 around loopback
        "[2002:7f00:1::]",  # 6to4 around loopback
        "evil.example",  # a name resolving to 127.0.0.1
        "rebind.example",  # one public, one loopback answer
        "v6loop.example",
        "mapped.example",
        "user:pass@127.0.0.1",
    ]
    elsewhere = [
        "169.254.169.254",  # cloud metadata
        "metadata.example",
        "[fd00:ec2::254]",
        "100.100.100.200",
        "[::ffff:a9fe:a9fe]",  # metadata, IPv4-mapped
        "10.0.0.1",
        "172.16.0.1",
        "192.168.1.1",
        "private.example",
        "100.64.0.1",  # shared address space
        "[fe80::1]",  # link-local
        "[fc00::1]",  # unique local
        "224.0.0.1",  # multicast
    ]
    return [f"http://{host}:{port}/secret" for host in here] + [f"http://{host}/latest/meta-data/" for host in elsewhere]


def redirects(server: LocalServer) -> list[str]:
    """Allowed first hops whose redirects lead into this machine."""
    start = server.url("/redirect?to=", host="localhost")
    return [
        start + server.url("/secret"),
        start + server.url("/secret", host="[::1]"),
        start + server.url("/secret", host="2130706433"),
        start + server.url("/secret", host="evil.example"),
        start + "http://169.254.169.254/latest/meta-data/",
        start + "file:///etc/passwd",
        # two hops, the second one into loopback
        start + server.url("/redirect?to=", host="localhost") + server.url("/secret", host="0x7f.1"),
    ]


async def _fetch(table: dict[str, Any], url: str) -> Any:
    async with Harness(config={"plugins": {"web": table}}, plugins=[WebPlugin(resolver=fake_resolver)], autoload=False) as ctx:
        return await call_tool(ctx, "web_fetch", url=url)


async def test_the_corpus_is_large_enough(server: LocalServer) -> None:
    assert len(corpus(server.port)) + len(redirects(server)) >= 30
    assert len(set(corpus(server.port))) == len(corpus(server.port))


async def test_every_trick_is_refused_and_nothing_reaches_the_server(server: LocalServer) -> None:
    """Each URL is refused before a connection is made; the local server sees no request at all."""
    async with Harness(plugins=[WebPlugin(resolver=fake_resolver)], autoload=False) as ctx:
        for url in corpus(server.port):
            result = await call_tool(ctx, "web_fetch", url=url)
            text = result_text(result)
            assert result.error_code == "TOOL_ERROR", url
            # refused by the address check, or already by httpx's URL parser (a dotted IPv4 with a
            # leading zero, which it will not guess at)
            assert "refused to fetch from" in text or "is not a valid URL (Invalid IPv4 address" in text, (url, text)
            if "refused" in text:
                assert "allowed_hosts" in text, url
    assert server.seen == []


async def test_redirects_into_private_ranges_are_refused_at_their_hop(server: LocalServer) -> None:
    """With localhost allowed by name, its redirects are still checked: only the first hops arrive."""
    async with Harness(
        config={"plugins": {"web": {"allowed_hosts": ["localhost"]}}},
        plugins=[WebPlugin(resolver=fake_resolver)],
        autoload=False,
    ) as ctx:
        for url in redirects(server):
            result = await call_tool(ctx, "web_fetch", url=url)
            text = result_text(result)
            assert result.error_code == "TOOL_ERROR", url
            assert "redirect" in text, (url, text)
            assert "refused to fetch from" in text or "not an http or https URL" in text, (url, text)
    assert all(seen.path.startswith("/redirect") for seen in server.seen)
    assert all(seen.host.startswith("localhost:") for seen in server.seen)


async def test_other_schemes_are_refused(server: LocalServer) -> None:
    async with Harness(plugins=[WebPlugin(resolver=fake_resolver)], autoload=False) as ctx:
        for url in ("file:///etc/passwd", "ftp://example.com/x", "gopher://127.0.0.1:70/", "javascript:alert(1)", "//127.0.0.1/"):
            result = await call_tool(ctx, "web_fetch", url=url)
            assert result.error_code == "TOOL_ERROR", url
            assert "not an http or https URL" in result_text(result) or "no host" in result_text(result), url


@pytest.mark.parametrize("host", ["localhost", "LocalHost.", "127.0.0.1", "*.example"])
async def test_a_host_named_in_allowed_hosts_is_fetched(server: LocalServer, host: str) -> None:
    """allowed_hosts lets a named host through, and only that one."""
    name = "evil.example" if host == "*.example" else host.lower().rstrip(".")
    result = await _fetch({"allowed_hosts": [host]}, server.url("/text", host=name))
    assert result.error_code is None, result_text(result)
    assert result_text(result).endswith("plain text, größe\n")
    other = "127.0.0.1" if name != "127.0.0.1" else "localhost"
    refused = await _fetch({"allowed_hosts": [host]}, server.url("/text", host=other))
    assert "refused to fetch from" in result_text(refused)


async def test_an_allowed_name_connects_to_the_address_it_was_resolved_to(server: LocalServer) -> None:
    """public.example resolves (in the fake DNS) to the local server: the request arrives with its Host."""
    result = await _fetch({"allowed_hosts": ["public.example"]}, server.url("/text", host="public.example"))
    assert result.error_code is None, result_text(result)
    assert server.seen[-1].host == f"public.example:{server.port}"
