"""Which addresses ``web_fetch`` may connect to: only public ones, unless a host is allowed by name.

Checked on the addresses a name resolves to (every one of them), never on the name's spelling:
``2130706433``, ``0x7f.1``, ``0177.0.0.1`` and ``127.1`` all reach the checks as ``127.0.0.1``,
because the C library's resolver reads them so. IPv6 forms that carry an IPv4 address inside
(IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo) are judged
by that IPv4 address too.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeAlias

from dsh_core import ToolError

__all__ = ["BlockedAddressError", "HostAllowList", "Resolver", "blocked_reason", "normal_host"]

#: Resolves a host name (or an IP literal) and port to the IP addresses to connect to.
Resolver: TypeAlias = Callable[[str, int], Awaitable[Sequence[str]]]


class BlockedAddressError(ToolError):
    """``web_fetch`` refused to connect: the host resolves to an address that is not public."""

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
#: cloud metadata services, named in the refusal so that the reason is plain
_METADATA = frozenset(
    ipaddress.ip_address(address) for address in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def blocked_reason(address: IPAddress) -> str | None:
    """Why ``address`` may not be fetched from (loopback, private, ...), or ``None`` for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None:
            reason = blocked_reason(inner)
            return None if reason is None else f"{reason} (inside the IPv6 address {address})"
    if address in _METADATA:
        return f"{address} is a cloud metadata address"
    if address.is_loopback:
        return f"{address} is a loopback address"
    if address.is_unspecified:
        return f"{address} is the unspecified address (it reaches this machine)"
    if address.is_link_local:
        return f"{address} is a link-local address"
    if address.is_private:
        return f"{address} is a private address"
    if address.is_multicast:
        return f"{address} is a multicast address"
    if not address.is_global:
        return f"{address} is not a public address (reserved or shared range)"
    return None


def normal_host(host: str) -> str:
    """A host name as compared: lower case, without a trailing dot, IPv6 without brackets."""
    return host.strip().strip("[]").rstrip(".").lower()


class HostAllowList:
    """Hosts allowed by name (``[plugins.web] allowed_hosts``): exact names, or ``*.example.com``."""

    __slots__ = ("_exact", "_suffixes")

    def __init__(self, hosts: Iterable[str]) -> None:
        exact: set[str] = set()
        suffixes: list[str] = []
        for host in hosts:
            name = normal_host(host)
            if name.startswith("*."):
                suffixes.append(name[1:])  # ".example.com"
            elif name:
                exact.add(name)
        self._exact = frozenset(exact)
        self._suffixes = tuple(suffixes)

    def allows(self, host: str) -> bool:
        name = normal_host(host)
        return name in self._exact or any(name.endswith(suffix) for suffix in self._suffixes)
