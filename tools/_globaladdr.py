"""Which addresses the web tools may contact: globally routable unicast, nothing else.

An allow-list, not a list of what to block: an IPv6 address must lie in the global unicast
range 2000::/3, and no address (v4 or v6) may fall in a block that IANA's special-purpose
registries mark as not globally reachable, or in multicast, site-local or other ranges the
registries do not list. The most specific block decides (192.0.0.9/32, PCP anycast, is global
inside the non-global 192.0.0.0/24).

IPv6 forms that carry an IPv4 address (NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo 2001::/32)
are decided by the IPv4 addresses they carry: the packet ends up there. IPv4-mapped addresses
(::ffff:0:0/96) are never contacted; a refusal names the IPv4 address inside when it is the
reason.

Python's own `ipaddress.is_global` is not used: 3.11 misses ranges (fec0::/10, 192.0.0.0/24's
neighbours, multicast) and its tables change between versions.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass

from bot.language.phrase import Phrase

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")

# (block, what it is, globally reachable). IANA IPv4 and IPv6 Special-Purpose Address
# Registries, plus the ranges they leave to other registries (multicast, site-local).
_BLOCKS: tuple[tuple[str, str, bool], ...] = (
    ("0.0.0.0/8", "\"this network\"", False),
    ("0.0.0.0/32", "\"this host\"", False),
    ("10.0.0.0/8", "private-use", False),
    ("100.64.0.0/10", "shared (CGNAT)", False),
    ("127.0.0.0/8", "loopback", False),
    ("169.254.0.0/16", "link-local (cloud metadata lives here)", False),
    ("172.16.0.0/12", "private-use", False),
    ("192.0.0.0/24", "IETF protocol assignment", False),
    ("192.0.0.0/29", "IPv4 service continuity", False),
    ("192.0.0.8/32", "IPv4 dummy", False),
    ("192.0.0.9/32", "PCP anycast", True),
    ("192.0.0.10/32", "TURN anycast", True),
    ("192.0.0.170/31", "NAT64/DNS64 discovery", False),
    ("192.0.2.0/24", "documentation", False),
    ("192.31.196.0/24", "AS112", True),
    ("192.52.193.0/24", "AMT", True),
    ("192.88.99.0/24", "deprecated 6to4 relay anycast", False),
    ("192.168.0.0/16", "private-use", False),
    ("192.175.48.0/24", "AS112 direct delegation", True),
    ("198.18.0.0/15", "benchmarking", False),
    ("198.51.100.0/24", "documentation", False),
    ("203.0.113.0/24", "documentation", False),
    ("224.0.0.0/4", "multicast", False),
    ("240.0.0.0/4", "reserved", False),
    ("255.255.255.255/32", "limited broadcast", False),
    ("::/128", "unspecified", False),
    ("::1/128", "loopback", False),
    ("::/96", "deprecated IPv4-compatible", False),
    ("::ffff:0:0/96", "IPv4-mapped", False),
    ("64:ff9b::/96", "NAT64", True),
    ("64:ff9b:1::/48", "local-use NAT64", False),
    ("100::/64", "discard-only", False),
    ("100:0:0:1::/64", "dummy", False),
    ("2001::/23", "IETF protocol assignment", False),
    ("2001:1::1/128", "PCP anycast", True),
    ("2001:1::2/128", "TURN anycast", True),
    ("2001:1::3/128", "DNS-SD SRP anycast", True),
    ("2001:2::/48", "benchmarking", False),
    ("2001:3::/32", "AMT", True),
    ("2001:4:112::/48", "AS112", True),
    ("2001:10::/28", "deprecated ORCHID", False),
    ("2001:20::/28", "ORCHIDv2", True),
    ("2001:30::/28", "drone remote ID", True),
    ("2001:db8::/32", "documentation", False),
    ("2620:4f:8000::/48", "AS112 direct delegation", True),
    ("3fff::/20", "documentation", False),
    ("5f00::/16", "SRv6 SID", False),
    ("fc00::/7", "unique-local", False),
    ("fe80::/10", "link-local", False),
    ("fec0::/10", "deprecated site-local", False),
    ("ff00::/8", "multicast", False),
)


@dataclass(frozen=True)
class Block:
    network: Network
    name: str
    is_global: bool


@functools.cache
def _blocks(version: int) -> tuple[Block, ...]:
    """This version's blocks, most specific first. Built on first use, not at import."""
    blocks = [Block(ipaddress.ip_network(net), name, reachable) for net, name, reachable in _BLOCKS]
    return tuple(sorted((b for b in blocks if b.network.version == version),
                        key=lambda b: -b.network.prefixlen))


def special_block(ip: IPAddress) -> Block | None:
    """The most specific special-purpose block holding this address, if any."""
    return next((b for b in _blocks(ip.version) if ip in b.network), None)


def embedded_ipv4s(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address carries and would be delivered to (mapped, NAT64,
    6to4, Teredo server and client); empty for any other address."""
    if ip in _MAPPED or ip in _NAT64:
        return (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF),)
    if ip in _SIX_TO_FOUR:
        return (ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF),)
    if ip in _TEREDO and ip.teredo is not None:
        return ip.teredo
    return ()


def not_global_reason(ip: IPAddress) -> str | None:
    """Why this address is not globally routable unicast, or None when it is."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return Phrase("an IPv6 address with a zone id")
        inner = embedded_ipv4s(ip)
        for v4 in inner:
            if why := not_global_reason(v4):
                return Phrase("an IPv6 form of {address}, which is {why}", address=str(v4), why=why)
        if inner and ip not in _MAPPED:  # NAT64, 6to4, Teredo: delivered to those global v4s
            return None
    block = special_block(ip)
    if block is not None and not block.is_global:
        return Phrase("in {network} ({name}), not globally reachable", network=str(block.network),
                      name=block.name)
    if isinstance(ip, ipaddress.IPv6Address) and ip not in GLOBAL_UNICAST_V6:
        return Phrase("outside IPv6 global unicast (2000::/3), not globally reachable")
    return None
