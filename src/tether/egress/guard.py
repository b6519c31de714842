"""The one egress guard: decides whether Tether may send a request to a URL, and to which addresses.

Every outbound request (A2A pushes, OpenWOP webhooks, callbackUrl, hand-offs to other agents)
is checked twice: when its URL is registered (`EgressGuard.check_url` and
`EgressGuard.resolve_and_check`) and again before every attempt: `GuardedTransport` applies
`check_url` to every request and `resolve_and_check` to every new connection, which it opens
only to the addresses that returned (a kept-alive connection stays pinned to the address
checked when it was opened).

Three arms can refuse, and the refusal names the arm:

- ``scheme``: only ``https://``. No setting turns this arm off.
- ``url``: the URL is malformed or ambiguous — userinfo, an empty host, a bad port, numeric
  hosts in odd encodings (``2130706433``, ``0177.0.0.1``, ``0x7f.0.0.1``, ``127.1``),
  trailing dots, zone indexes, characters that parsers disagree about.
- ``address``: the host is a denied name (``localhost``, ``*.localhost``, ``metadata``,
  ``metadata.google.internal``, the policy's extra names), or it is, or resolves to, an address
  that is not globally routable. Every A and AAAA answer must pass. The operator's
  ``--egress-allow-cidr`` exempts matching addresses from this arm only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias

import httpx

from tether.errors import InvalidInput

__all__ = [
    "DEFAULT_RESOLVE_TIMEOUT",
    "DENIED_HOST_NAMES",
    "EgressArm",
    "EgressGuard",
    "EgressPolicy",
    "EgressRefused",
    "IPAddress",
    "ParsedTarget",
    "PinnedTarget",
    "Resolver",
    "SystemResolver",
    "classify_address",
]

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
EgressArm: TypeAlias = Literal["scheme", "address", "url"]

DEFAULT_RESOLVE_TIMEOUT = 5.0
"""Seconds a name may take to resolve before the guard refuses it as unresolvable."""

MAX_URL_LENGTH = 4096
"""Longer URLs are refused by the url arm; no receiver needs more."""

DENIED_HOST_NAMES: frozenset[str] = frozenset(
    {
        "localhost",
        "localhost.localdomain",
        "ip6-localhost",
        "ip6-loopback",
        "metadata",
        "metadata.google.internal",
    }
)
"""Names refused without resolving them (also with a trailing dot); ``*.localhost`` too."""


class EgressRefused(InvalidInput):
    """The egress guard refuses a URL; `arm` says which check refused it ("scheme", "url" or "address")."""

    code = "egress_refused"

    def __init__(self, reason: str, *, arm: EgressArm, details: dict[str, object] | None = None) -> None:
        super().__init__(f"egress refused by the {arm} arm: {reason}", details={"arm": arm, **(details or {})})
        self.arm: EgressArm = arm
        self.reason = reason


# --------------------------------------------------------------------------- address arm

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

_METADATA = "a cloud metadata address"
_RFC1918 = "a private address (RFC 1918)"
_DOCUMENTATION_V4 = "a documentation address (RFC 5737)"

# Most specific first: the first match names the class in the refusal.
_IPV4_CLASSES: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("169.254.169.254/32"), _METADATA),
    (_V4("100.100.100.200/32"), _METADATA),
    (_V4("0.0.0.0/32"), "the unspecified address"),
    (_V4("0.0.0.0/8"), "a 'this network' address (RFC 1122)"),
    (_V4("10.0.0.0/8"), _RFC1918),
    (_V4("172.16.0.0/12"), _RFC1918),
    (_V4("192.168.0.0/16"), _RFC1918),
    (_V4("100.64.0.0/10"), "a shared CGNAT address (RFC 6598)"),
    (_V4("127.0.0.0/8"), "a loopback address"),
    (_V4("169.254.0.0/16"), "a link-local address"),
    (_V4("192.0.0.0/24"), "an IETF protocol assignment (RFC 6890)"),
    (_V4("192.0.2.0/24"), _DOCUMENTATION_V4),
    (_V4("198.51.100.0/24"), _DOCUMENTATION_V4),
    (_V4("203.0.113.0/24"), _DOCUMENTATION_V4),
    (_V4("192.88.99.0/24"), "a 6to4 relay anycast address (RFC 7526)"),
    (_V4("198.18.0.0/15"), "a benchmarking address (RFC 2544)"),
    (_V4("224.0.0.0/4"), "a multicast address"),
    (_V4("255.255.255.255/32"), "the limited broadcast address"),
    (_V4("240.0.0.0/4"), "a reserved address (RFC 1112)"),
)

_MAPPED = _V6("::ffff:0:0/96")
_COMPATIBLE = _V6("::/96")
_NAT64 = _V6("64:ff9b::/96")
_SIX_TO_FOUR = _V6("2002::/16")
_TEREDO = _V6("2001::/32")

_IPV6_CLASSES: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("::/128"), "the unspecified address"),
    (_V6("::1/128"), "a loopback address"),
    (_V6("64:ff9b:1::/48"), "a local-use NAT64 address (RFC 8215)"),
    (_V6("fd00:ec2::254/128"), _METADATA),
    (_V6("fc00::/7"), "a unique-local address (RFC 4193)"),
    (_V6("fe80::/10"), "a link-local address"),
    (_V6("fec0::/10"), "a site-local address (deprecated, RFC 3879)"),
    (_V6("ff00::/8"), "a multicast address"),
    (_V6("2001:db8::/32"), "a documentation address (RFC 3849)"),
    (_V6("3fff::/20"), "a documentation address (RFC 9637)"),
    (_V6("100::/64"), "a discard-only address (RFC 6666)"),
    (_V6("5f00::/16"), "a segment-routing SID (RFC 9602)"),
)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """Which IPv4 address an IPv6 transition address carries, and what kind of wrapper it is."""
    if address in _MAPPED:
        assert address.ipv4_mapped is not None
        return "an IPv4-mapped IPv6 address", address.ipv4_mapped
    if address in _NAT64:
        return "a NAT64 address (RFC 6052)", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _COMPATIBLE:
        return "an IPv4-compatible IPv6 address (deprecated)", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        assert address.sixtofour is not None
        return "a 6to4 address (RFC 3056)", address.sixtofour
    if address in _TEREDO:
        assert address.teredo is not None
        return "a Teredo address (RFC 4380)", address.teredo[1]
    return None


def _classify_by_properties(address: IPAddress) -> str | None:
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private:
        return "a private or special-purpose address"
    if not address.is_global:
        return "not a globally routable address"
    return None


def classify_address(address: IPAddress) -> str | None:
    """Why an address may not be an egress target, or None if it is globally routable.

    Parameters:
        address: an IPv4 or IPv6 address (a zone index is itself a reason to refuse).

    Returns:
        A phrase naming the address's class, e.g. ``"a private address (RFC 1918)"``, to follow
        ``"<address> is "``; None when the address passes the address arm.
    """
    if isinstance(address, ipaddress.IPv4Address):
        for network, label in _IPV4_CLASSES:
            if address in network:
                return label
        return _classify_by_properties(address)
    if address.scope_id:
        return "an address with a zone index"
    for network6, label in _IPV6_CLASSES:
        if address in network6:
            return label
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        wrapper, inner = embedded
        inner_class = classify_address(inner)
        if inner_class is not None:
            return f"{wrapper} embedding {inner}, {inner_class}"
        return f"{wrapper} embedding {inner}; IPv4 embedded in IPv6 is refused"
    return _classify_by_properties(address)


# --------------------------------------------------------------------------- policy

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_CANONICAL_IPV4 = re.compile(
    r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
)
_FORBIDDEN_CHARACTERS = re.compile(r"[\x00-\x20\x7f\\]")


def _normalise_name(name: str) -> str:
    """Lower-case, IDNA-encode (exactly as httpx does) and strip trailing dots, as hosts are compared."""
    try:
        return httpx.URL(f"https://{name.strip().rstrip('.')}/").raw_host.decode("ascii")
    except httpx.InvalidURL as exc:
        raise ValueError(str(exc)) from exc


@dataclass(frozen=True)
class EgressPolicy:
    """The operator's development switches for the guard; the defaults are the production posture.

    Example::

        EgressPolicy(allow_cidrs=["127.0.0.1/32"])   # --egress-allow-cidr 127.0.0.1/32

    Parameters:
        allow_cidrs: networks exempted from the address arm (never from the scheme or url arm);
            ``--egress-allow-cidr``, for development and tests only. Host bits must be zero.
        extra_denied_hosts: further names refused like ``localhost`` — the name itself and
            every name under it.

    Raises:
        InvalidInput: a CIDR or a name does not parse.
    """

    allow_cidrs: Sequence[str] = ()
    extra_denied_hosts: Sequence[str] = ()
    allow_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if isinstance(self.allow_cidrs, str) or isinstance(self.extra_denied_hosts, str):
            raise InvalidInput("allow_cidrs and extra_denied_hosts are sequences of strings, not one string")
        networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for cidr in self.allow_cidrs:
            try:
                networks.append(ipaddress.ip_network(cidr.strip(), strict=True))
            except ValueError as exc:
                raise InvalidInput(
                    f"--egress-allow-cidr {cidr!r} is not a CIDR: {exc}", details={"cidr": cidr}
                ) from exc
        names: list[str] = []
        for host in self.extra_denied_hosts:
            try:
                name = _normalise_name(host)
            except ValueError as exc:
                raise InvalidInput(f"denied host {host!r} is not a host name: {exc}", details={"host": host}) from exc
            if not name or not all(_LABEL.fullmatch(label) for label in name.split(".")):
                raise InvalidInput(f"denied host {host!r} is not a host name", details={"host": host})
            names.append(name)
        object.__setattr__(self, "allow_cidrs", tuple(self.allow_cidrs))
        object.__setattr__(self, "extra_denied_hosts", tuple(names))
        object.__setattr__(self, "allow_networks", tuple(networks))

    def allows(self, address: IPAddress) -> bool:
        """Whether an operator CIDR exempts this address (an IPv4-mapped one by its IPv4 too)."""
        candidates: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        return any(candidate in network for candidate in candidates for network in self.allow_networks)

    def denies_name(self, name: str) -> bool:
        """Whether a (normalised, dot-stripped) host name is refused without resolving it."""
        if name in DENIED_HOST_NAMES or name.endswith(".localhost"):
            return True
        return any(name == denied or name.endswith("." + denied) for denied in self.extra_denied_hosts)


# --------------------------------------------------------------------------- targets and resolver


@dataclass(frozen=True)
class ParsedTarget:
    """A URL that passed the scheme and url arms, and the address arm if its host is a literal.

    Parameters:
        url: the URL as httpx serialises it (the form the transport will send).
        host: the ASCII host exactly as httpx and httpcore use it (IDNA-encoded, lower-case;
            an IPv6 literal without brackets).
        port: the TCP port (443 when the URL names none).
        address: the IP address when the host is a literal, else None.
    """

    url: str
    host: str
    port: int
    address: IPAddress | None = None


@dataclass(frozen=True)
class PinnedTarget:
    """A URL whose every address passed the address arm; connect to these and nothing else.

    Parameters:
        url: the URL as httpx serialises it.
        host: the original host name, for TLS SNI and the Host header.
        port: the TCP port.
        addresses: the checked addresses, in the resolver's order.
    """

    url: str
    host: str
    port: int
    addresses: tuple[IPAddress, ...]


class Resolver(Protocol):
    """Turns a host name into IP address strings (all A and AAAA answers)."""

    async def resolve(self, host: str, port: int) -> list[str]:
        """Every address `host` resolves to, as strings, in preference order."""
        ...


class SystemResolver:
    """The default `Resolver`: the event loop's getaddrinfo, for A and AAAA together."""

    async def resolve(self, host: str, port: int) -> list[str]:
        """Every address getaddrinfo returns for `host`, without duplicates, in its order."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            host, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
        answers: list[str] = []
        for family, _type, _proto, _canonname, sockaddr in infos:
            if family not in (socket.AF_INET, socket.AF_INET6):
                continue
            address = str(sockaddr[0])
            if address not in answers:
                answers.append(address)
        return answers


# --------------------------------------------------------------------------- the guard


class EgressGuard:
    """Checks egress URLs against the scheme, url and address arms and pins the checked addresses.

    Example::

        guard = EgressGuard(EgressPolicy())
        guard.check_url(url)                          # at registration, without DNS
        target = await guard.resolve_and_check(url)   # at registration and before each delivery

    Parameters:
        policy: the operator's switches; the default refuses everything non-public.
        resolver: where names are resolved; defaults to `SystemResolver`.
        resolve_timeout: seconds a resolution may take before the name is refused.
    """

    def __init__(
        self,
        policy: EgressPolicy | None = None,
        resolver: Resolver | None = None,
        *,
        resolve_timeout: float = DEFAULT_RESOLVE_TIMEOUT,
    ) -> None:
        self._policy = policy if policy is not None else EgressPolicy()
        self._resolver: Resolver = resolver if resolver is not None else SystemResolver()
        self._resolve_timeout = resolve_timeout

    @property
    def policy(self) -> EgressPolicy:
        """The operator switches this guard applies."""
        return self._policy

    def check_address(self, address: IPAddress | str, *, host: str | None = None) -> IPAddress:
        """Apply the address arm to one address.

        Parameters:
            address: the address, or its string form.
            host: the name it was resolved from, named in the refusal.

        Returns:
            The address, parsed.

        Raises:
            EgressRefused: arm "address", naming the address and its class.
        """
        if isinstance(address, str):
            try:
                address = ipaddress.ip_address(address)
            except ValueError as exc:
                subject = f"{host} resolves to {address!r}, which" if host else repr(address)
                raise EgressRefused(f"{subject} is not an IP address", arm="address") from exc
        if self._policy.allows(address):
            return address
        refusal = classify_address(address)
        if refusal is not None:
            raise EgressRefused(
                f"{host} resolves to {address}, {refusal}" if host else f"{address} is {refusal}",
                arm="address",
                details={"address": str(address), "class": refusal, **({"host": host} if host else {})},
            )
        return address

    def check_url(self, url: str | httpx.URL) -> ParsedTarget:
        """Apply the scheme and url arms, denied names and, for an IP literal, the address arm; no DNS.

        Parameters:
            url: the egress URL as registered or about to be requested.

        Returns:
            The parsed target; `address` is set when the host is an IP literal.

        Raises:
            EgressRefused: with the arm that refused.
        """
        if not isinstance(url, (str, httpx.URL)):
            raise EgressRefused(f"the URL must be a string, not {type(url).__name__}", arm="url")
        raw = str(url)
        if len(raw) > MAX_URL_LENGTH:
            raise EgressRefused(f"the URL is longer than {MAX_URL_LENGTH} characters", arm="url")
        try:
            parsed = url if isinstance(url, httpx.URL) else httpx.URL(raw)
        except httpx.InvalidURL as exc:
            raise EgressRefused(f"not a valid URL: {exc}", arm="url") from exc

        if parsed.scheme != "https":
            shown = f"{parsed.scheme}://" if parsed.scheme else "a URL without a scheme"
            raise EgressRefused(
                f"only https:// URLs may be used for egress, not {shown}",
                arm="scheme",
                details={"scheme": parsed.scheme},
            )

        if _FORBIDDEN_CHARACTERS.search(raw):
            raise EgressRefused("the URL contains whitespace, control characters or a backslash", arm="url")
        authority = raw.split("://", 1)[1] if "://" in raw else ""
        authority = re.split(r"[/?#]", authority, maxsplit=1)[0]
        if parsed.userinfo or "@" in authority:
            raise EgressRefused("URLs with userinfo (user:password@) are refused", arm="url")

        host = parsed.raw_host.decode("ascii")
        if not host:
            raise EgressRefused("the URL has no host", arm="url")
        port = parsed.port if parsed.port is not None else 443
        if not 1 <= port <= 65535:
            raise EgressRefused(f"port {port} is out of range", arm="url")

        if ":" in host:  # httpx only lets an IPv6 literal in brackets through with a colon in the host
            if "%" in host:
                raise EgressRefused(f"the IPv6 literal [{host}] carries a zone index", arm="url")
            try:
                literal6 = ipaddress.IPv6Address(host)
            except ValueError as exc:
                raise EgressRefused(f"[{host}] is not an IPv6 address", arm="url") from exc
            self.check_address(literal6)
            return ParsedTarget(url=str(parsed), host=host, port=port, address=literal6)

        bare = host.rstrip(".")
        if self._policy.denies_name(bare):
            raise EgressRefused(f"the host name {bare!r} is refused", arm="address", details={"host": bare})

        labels = host.split(".")
        if _NUMERIC_LABEL.fullmatch(labels[-1] or (labels[-2] if len(labels) > 1 else "")):
            if not _CANONICAL_IPV4.fullmatch(host):
                raise EgressRefused(
                    f"numeric host {host!r} is not a canonical dotted-quad IPv4 address",
                    arm="url",
                    details={"host": host},
                )
            literal4 = ipaddress.IPv4Address(host)
            self.check_address(literal4)
            return ParsedTarget(url=str(parsed), host=host, port=port, address=literal4)

        if host.endswith("."):
            raise EgressRefused(f"host names with a trailing dot are refused ({host!r})", arm="url")
        if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
            raise EgressRefused(f"{host!r} is not a valid host name", arm="url")
        return ParsedTarget(url=str(parsed), host=host, port=port)

    async def resolve_and_check(self, url: str | httpx.URL) -> PinnedTarget:
        """Check the URL, resolve its host once, and require every answer to pass the address arm.

        Parameters:
            url: the egress URL.

        Returns:
            The target with the checked addresses to connect to (no further lookup needed).

        Raises:
            EgressRefused: by the arm that refused; a name that does not resolve (or not within
                `resolve_timeout`) is refused by the address arm.
        """
        target = self.check_url(url)
        if target.address is not None:
            return PinnedTarget(url=target.url, host=target.host, port=target.port, addresses=(target.address,))
        try:
            async with asyncio.timeout(self._resolve_timeout):
                answers = await self._resolver.resolve(target.host, target.port)
        except TimeoutError as exc:
            raise EgressRefused(
                f"{target.host} did not resolve within {self._resolve_timeout:g}s",
                arm="address",
                details={"host": target.host, "reason": "unresolvable"},
            ) from exc
        except OSError as exc:
            raise EgressRefused(
                f"{target.host} did not resolve: {exc}",
                arm="address",
                details={"host": target.host, "reason": "unresolvable"},
            ) from exc
        if not answers:
            raise EgressRefused(
                f"{target.host} resolved to no addresses",
                arm="address",
                details={"host": target.host, "reason": "unresolvable"},
            )
        addresses: list[IPAddress] = []
        for answer in answers:
            checked = self.check_address(answer, host=target.host)
            if checked not in addresses:
                addresses.append(checked)
        return PinnedTarget(url=target.url, host=target.host, port=target.port, addresses=tuple(addresses))
