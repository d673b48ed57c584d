"""Pure address and URL rules for the network guard (no I/O): see tools/_netguard.py.

- `parse_target` accepts only plain http(s) URLs (no userinfo, no control characters) and
  normalises the host; numeric hosts are parsed the way `inet_aton` and browsers parse them
  (2130706433, 0177.0.0.1, 0x7f.1, 127.1) by `parse_ipv4_loose`;
- `blocked_reason` says why an address is refused: anything but globally routable unicast
  (tools/_globaladdr.py: an allow-list checked against IANA's special-purpose registries, with
  IPv6 forms of IPv4 decided by the IPv4 address inside);
- `allow_list` / `AllowList` match the operator's `[tools.net] allow_hosts`; `domain_matches`
  matches a host against a list of domains.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import idna

from bot.core.tool import ToolInvalidArgsError, ToolPermissionError
from bot.language.phrase import Phrase
from tools._globaladdr import embedded_ipv4s, not_global_reason

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_PORTS = {"http": 80, "https": 443}

_BAD_URL_CHARS = re.compile(r"[\x00-\x20\x7f\\]")
_HOST_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_PATH_SAFE = "!#$%&'()*+,-./:;=?@[]^_`{|}~"
_NUMERIC_PART = re.compile(r"^(?:0[xX][0-9a-fA-F]*|[0-9]+)$")


# --- addresses -----------------------------------------------------------------------------


def parse_ipv4_loose(host: str) -> ipaddress.IPv4Address | None:
    """Parse a host the way inet_aton/browsers do, or return None if it is not numeric.

    Accepts 1 to 4 parts in decimal, octal (leading 0) or hex (0x); the last part fills the
    remaining bytes, so 127.1 and 2130706433 are 127.0.0.1. A host whose last label looks
    numeric but does not parse is refused rather than handed to DNS.
    """
    parts = host.split(".")
    if not _NUMERIC_PART.match(parts[-1]):
        return None
    if len(parts) > 4 or not all(_NUMERIC_PART.match(p) for p in parts):
        raise ToolInvalidArgsError(Phrase("Malformed numeric host {host}.", host=repr(host)),
                                   "Use a normal hostname or a dotted IPv4 address.")
    values = [_parse_number(p) for p in parts]
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        raise ToolInvalidArgsError(Phrase("Numeric host {host} is out of range.", host=repr(host)),
                                   "Use a normal hostname or a dotted IPv4 address.")
    number = last
    for index, value in enumerate(head):
        number += value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def _parse_number(part: str) -> int:
    if part[:2].lower() == "0x":
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part.startswith("0"):
        if not set(part) <= set("01234567"):
            raise ToolInvalidArgsError(Phrase("Malformed octal number {part} in host.", part=repr(part)),
                                       "Use a normal hostname or a dotted IPv4 address.")
        return int(part, 8)
    return int(part)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, NAT64, 6to4, Teredo client)."""
    carried = embedded_ipv4s(ip)
    return carried[-1] if carried else None


def blocked_reason(ip: IPAddress) -> str | None:
    """Why the guard refuses this address, or None when it is globally routable unicast."""
    return not_global_reason(ip)


# --- URLs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One parsed, normalised http(s) URL. `ip` is set when the host is an address literal."""

    scheme: str
    host: str
    port: int
    path: str
    ip: IPAddress | None = None

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.netloc}{self.path}"

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port


def parse_target(url: str) -> Target:
    """Parse and normalise a URL; refuse anything that is not a plain http(s) URL."""
    if not isinstance(url, str) or not url or len(url) > 8192:
        raise ToolInvalidArgsError(Phrase("The URL must be a non-empty string of at most {limit} "
                                          "characters.", limit=8192))
    if _BAD_URL_CHARS.search(url):
        raise ToolInvalidArgsError(
            Phrase("The URL contains spaces, control characters or backslashes."),
            "Percent-encode spaces (%20) and use forward slashes.", {"url": url[:200]})
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ToolInvalidArgsError(Phrase("Not a valid URL: {problem}.", problem=str(exc)),
                                   details={"url": url[:200]}) from exc
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ToolPermissionError(
            Phrase("Only http and https URLs are allowed, not {scheme}.", scheme=repr(scheme))
            if scheme else Phrase("Only http and https URLs are allowed, not a relative URL."),
            "Give a full URL that starts with https:// (or http://).", {"url": url[:200]})
    if "@" in parts.netloc:
        raise ToolPermissionError(Phrase("URLs with a user name or password (user@host) are "
                                         "refused."),
                                  "Remove the part before '@'; credentials go in headers.")
    host, ip = _normalise_host(parts.hostname or "", bracketed="[" in parts.netloc)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    # Percent-encode anything non-ASCII: the URL shown for approval is exactly the one sent,
    # with no room for look-alike or right-to-left characters.
    path = quote(path, safe=_PATH_SAFE)
    return Target(scheme, host, port or DEFAULT_PORTS[scheme], path, ip)


def _normalise_host(raw: str, bracketed: bool) -> tuple[str, IPAddress | None]:
    bad_host = ToolInvalidArgsError(Phrase("Not a valid host name: {host}.", host=repr(raw)),
                                    "Check the URL; the host looks like example.com.")
    if bracketed:
        if "%" in raw:  # a zone id names a local interface: never a public destination
            raise bad_host
        try:
            ip6 = ipaddress.IPv6Address(raw)
        except ValueError:
            raise bad_host from None
        return str(ip6), ip6
    host = raw[:-1] if raw.endswith(".") else raw
    if not host or "%" in host:
        raise bad_host
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except idna.IDNAError:
            raise bad_host from None
    ip4 = parse_ipv4_loose(host)
    if ip4 is not None:
        return str(ip4), ip4
    if len(host) > 253 or not all(_HOST_LABEL.match(label) for label in host.split(".")):
        raise bad_host
    return host, None


# --- allow-lists ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AllowList:
    hosts: frozenset[str]
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    def allows_host(self, host: str) -> bool:
        return host in self.hosts

    def allows_ip(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.networks)


@functools.lru_cache(maxsize=32)
def allow_list(entries: tuple[str, ...]) -> AllowList:
    """Operator entries: host names (exact), IPs or CIDR networks. Cached per configuration."""
    hosts: set[str] = set()
    networks = []
    for entry in entries:
        cleaned = entry.strip().lower().strip("[]").rstrip(".")
        try:
            networks.append(ipaddress.ip_network(cleaned, strict=False))
        except ValueError:
            hosts.add(cleaned)
    return AllowList(frozenset(hosts), tuple(networks))


def is_localhost_name(host: str) -> bool:
    """True for names that mean this machine (localhost and *.localhost)."""
    return host == "localhost" or host.endswith(".localhost")


def domain_matches(host: str, domains: Iterable[str]) -> bool:
    """True when host equals one of the domains or is a subdomain of one."""
    for domain in domains:
        domain = domain.strip().lower().rstrip(".").removeprefix("*.").lstrip(".")
        if domain and (host == domain or host.endswith("." + domain)):
            return True
    return False
