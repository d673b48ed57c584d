"""The network guard allows only globally routable unicast, checked against every entry of IANA's
IPv4 and IPv6 Special-Purpose Address Registries (transcribed here on their own, with their
"Globally Reachable" column, so the guard's table is not tested against itself).

No test connects anywhere: the decision function is called directly, and the end-to-end checks
go through `fetch` with an injected resolver and a transport that records instead of sending.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import httpx
import pytest

from bot.core.ports import Network
from bot.core.tool import CallContext, ToolPermissionError
from tests.conftest import make_config
from tools._netguard import blocked_reason, fetch

# IANA IPv4 Special-Purpose Address Registry: (block, name, globally reachable).
IPV4_REGISTRY = [
    ("0.0.0.0/8", "This network", False),
    ("0.0.0.0/32", "This host on this network", False),
    ("10.0.0.0/8", "Private-Use", False),
    ("100.64.0.0/10", "Shared Address Space", False),
    ("127.0.0.0/8", "Loopback", False),
    ("169.254.0.0/16", "Link Local", False),
    ("172.16.0.0/12", "Private-Use", False),
    ("192.0.0.0/24", "IETF Protocol Assignments", False),
    ("192.0.0.0/29", "IPv4 Service Continuity Prefix", False),
    ("192.0.0.8/32", "IPv4 dummy address", False),
    ("192.0.0.9/32", "Port Control Protocol Anycast", True),
    ("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", True),
    ("192.0.0.170/32", "NAT64/DNS64 Discovery", False),
    ("192.0.0.171/32", "NAT64/DNS64 Discovery", False),
    ("192.0.2.0/24", "Documentation (TEST-NET-1)", False),
    ("192.31.196.0/24", "AS112-v4", True),
    ("192.52.193.0/24", "AMT", True),
    ("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", None),
    ("192.168.0.0/16", "Private-Use", False),
    ("192.175.48.0/24", "Direct Delegation AS112 Service", True),
    ("198.18.0.0/15", "Benchmarking", False),
    ("198.51.100.0/24", "Documentation (TEST-NET-2)", False),
    ("203.0.113.0/24", "Documentation (TEST-NET-3)", False),
    ("240.0.0.0/4", "Reserved", False),
    ("255.255.255.255/32", "Limited Broadcast", False),
]

# IANA IPv6 Special-Purpose Address Registry. None = "N/A" in the registry.
IPV6_REGISTRY = [
    ("::1/128", "Loopback Address", False),
    ("::/128", "Unspecified Address", False),
    ("::ffff:0:0/96", "IPv4-mapped Address", False),
    ("64:ff9b::/96", "IPv4-IPv6 Translat.", True),
    ("64:ff9b:1::/48", "IPv4-IPv6 Translat.", False),
    ("100::/64", "Discard-Only Address Block", False),
    ("100:0:0:1::/64", "Dummy IPv6 Prefix", False),
    ("2001::/23", "IETF Protocol Assignments", False),
    ("2001::/32", "TEREDO", None),
    ("2001:1::1/128", "Port Control Protocol Anycast", True),
    ("2001:1::2/128", "Traversal Using Relays around NAT Anycast", True),
    ("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", True),
    ("2001:2::/48", "Benchmarking", False),
    ("2001:3::/32", "AMT", True),
    ("2001:4:112::/48", "AS112-v6", True),
    ("2001:10::/28", "Deprecated (previously ORCHID)", False),
    ("2001:20::/28", "ORCHIDv2", True),
    ("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", True),
    ("2001:db8::/32", "Documentation", False),
    ("2002::/16", "6to4", None),
    ("2620:4f:8000::/48", "Direct Delegation AS112 Service", True),
    ("3fff::/20", "Documentation", False),
    ("5f00::/16", "Segment Routing (SRv6) SIDs", False),
    ("fc00::/7", "Unique-Local", False),
    ("fe80::/10", "Link-Local Unicast", False),
]

REGISTRY = [(ipaddress.ip_network(block), name, reachable)
            for block, name, reachable in IPV4_REGISTRY + IPV6_REGISTRY]
# Blocks whose verdict is that of the IPv4 address inside (tested with samples below).
CARRY_IPV4 = {ipaddress.ip_network(n) for n in ("64:ff9b::/96", "2001::/32", "2002::/16")}


def samples(network) -> list:
    """First, last and middle address: where an off-by-one or a missing block shows."""
    return sorted({network[0], network[-1], network[network.num_addresses // 2]})


def expected_global(address) -> bool | None:
    """The registry's verdict: the most specific entry holding the address decides; an address
    in no entry is global unicast if IPv4 (multicast aside) or inside 2000::/3."""
    holding = [(net, reachable) for net, _, reachable in REGISTRY
               if net.version == address.version and address in net]
    if holding:
        network, reachable = max(holding, key=lambda entry: entry[0].prefixlen)
        return None if network in CARRY_IPV4 else bool(reachable)
    if address.version == 4:
        return address not in ipaddress.ip_network("224.0.0.0/4")
    return address in ipaddress.ip_network("2000::/3")


CASES = [(f"{net} {name}", address) for net, name, _ in REGISTRY for address in samples(net)
         if expected_global(address) is not None]


@pytest.mark.parametrize(("entry", "address"), CASES, ids=[f"{a}" for _, a in CASES])
def test_every_registry_entry_is_allowed_exactly_when_it_is_globally_reachable(entry, address):
    reason = blocked_reason(address)
    if expected_global(address):
        assert reason is None, f"{address} ({entry}) is global but refused: {reason}"
    else:
        assert reason is not None, f"{address} ({entry}) is not global but allowed"


def test_the_registry_tables_cover_every_row_and_both_verdicts():
    assert len(IPV4_REGISTRY) == 25 and len(IPV6_REGISTRY) == 25
    verdicts = [expected_global(address) for _, address in CASES]
    assert verdicts.count(True) >= 20 and verdicts.count(False) >= 60


# Addresses carrying an IPv4 address: judged by the address inside.
CARRIED = [
    ("64:ff9b::808:808", True), ("64:ff9b::a00:1", False), ("64:ff9b::7f00:1", False),
    ("64:ff9b::a9fe:a9fe", False), ("64:ff9b::c0a8:101", False), ("64:ff9b::6440:1", False),
    ("2002:808:808::1", True), ("2002:a00:1::", False), ("2002:c0a8:101::1", False),
    ("2002:e000:1::", False),  # 6to4 of a multicast address
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo client 192.0.2.45 (documentation)
    ("2001:0:808:808:0:f7f7:f7f7:f7f7", True),  # server 8.8.8.8, client 8.8.8.8
    ("2001:0:808:808::f5ff:fffe", False),  # client 10.0.0.1 behind a public server
    ("2001:0:a00:1:0:f7f7:f7f7:f7f7", False),  # server 10.0.0.1
    ("::ffff:808:808", False),  # IPv4-mapped: never contacted
    ("::ffff:10.0.0.1", False), ("::ffff:127.0.0.1", False), ("::ffff:169.254.169.254", False),
    ("::ffff:100.64.0.1", False), ("::ffff:198.18.0.1", False),
]


@pytest.mark.parametrize(("address", "reachable"), CARRIED)
def test_ipv6_forms_of_ipv4_are_decided_by_the_ipv4_address_inside(address, reachable):
    assert (blocked_reason(ipaddress.ip_address(address)) is None) is reachable


def test_a_refusal_names_the_ipv4_address_inside():
    reason = blocked_reason(ipaddress.ip_address("::ffff:10.0.0.1"))
    assert reason == "an IPv6 form of 10.0.0.1, which is in 10.0.0.0/8 (private-use), not globally reachable"


# Ranges the registries leave to others, and the gaps Python 3.11's is_global has.
OUTSIDE_THE_REGISTRIES = [
    "fec0::1", "fec0:ffff::1", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",  # site-local
    "ff02::1", "ff05::2", "ff0e::1",  # multicast, global scope included
    "224.0.0.1", "239.255.255.250", "233.252.0.1",  # multicast, documentation multicast
    "::7f00:1", "::a9fe:a9fe", "::8.8.8.8",  # deprecated IPv4-compatible
    "4000::1", "8000::1", "e000::1", "fe00::1",  # IPv6 outside 2000::/3
    "100::1:0:0:1", "::ffff:0:8.8.8.8",  # discard-only; IPv4-translated (SIIT)
    "192.0.0.255", "192.0.0.11",  # IETF protocol assignments around the anycast /32s
]


@pytest.mark.parametrize("address", OUTSIDE_THE_REGISTRIES)
def test_addresses_outside_global_unicast_are_refused(address):
    assert blocked_reason(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["1.1.1.1", "8.8.8.8", "223.255.255.255", "100.63.255.255",
                                     "100.128.0.0", "198.17.255.255", "198.20.0.0",
                                     "2606:4700::1111", "2a00:1450::1", "3ffe::1", "2001:200::1",
                                     "2001:4860:4860::8888", "3fff:1000::1"])
def test_public_unicast_next_to_special_blocks_is_allowed(address):
    assert blocked_reason(ipaddress.ip_address(address)) is None


def test_a_zone_id_is_refused_even_on_a_global_address():
    assert blocked_reason(ipaddress.ip_address("2606:4700::1111%eth0")) is not None


# --- end to end, without a network ---------------------------------------------------------------


class Recorder(httpx.AsyncBaseTransport):
    """Where the network would be: records, answers 200, sends nothing."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, headers={"content-type": "text/plain"}, text="ok")


def net_ctx(tmp_path: Path, answers: dict[str, list[str]], transport: Recorder,
            allow_hosts: list[str] | None = None) -> CallContext:
    async def resolver(host: str) -> list[str]:
        return answers[host]

    config = make_config(tmp_path, {"tools": {"net": {"allow_hosts": allow_hosts or []}}})
    return CallContext(workspace=config.workspace, settings=config,
                       network=Network(resolver=resolver, http_transport=transport))


@pytest.mark.parametrize("answer", ["fec0::1", "64:ff9b:1::a", "2001:db8::1", "198.18.0.1",
                                    "192.0.0.8", "3fff::1", "5f00::1", "::ffff:192.168.0.1"])
async def test_a_name_resolving_into_a_missed_range_is_refused_without_a_request(tmp_path, answer):
    transport = Recorder()
    ctx = net_ctx(tmp_path, {"sneaky.example": ["93.184.216.34", answer]}, transport)
    with pytest.raises(ToolPermissionError) as refused:
        await fetch(ctx, "GET", "https://sneaky.example/")
    assert refused.value.details["address"] == str(ipaddress.ip_address(answer))
    assert transport.requests == []


async def test_the_operators_allow_list_still_opens_a_named_address(tmp_path):
    transport = Recorder()
    ctx = net_ctx(tmp_path, {"nas.lan": ["fec0::5"]}, transport, allow_hosts=["fec0::5"])
    fetched = await fetch(ctx, "GET", "http://nas.lan/")
    assert fetched.status == 200 and len(transport.requests) == 1
