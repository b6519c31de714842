"""The egress guard: every arm refuses what it should, names itself, and checks every DNS answer."""

from __future__ import annotations

import ipaddress

import httpx
import pytest

from tether.egress.guard import (
    EgressGuard,
    EgressPolicy,
    EgressRefused,
    PinnedTarget,
    SystemResolver,
    classify_address,
)
from tether.errors import InvalidInput


class FakeResolver:
    """Answers from a table and counts its lookups."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self._answers = answers
        self.calls: list[tuple[str, int]] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return list(self._answers[host])


class RebindingResolver:
    """Answers each lookup with the next round of answers (the last round repeats)."""

    def __init__(self, *rounds: list[str]) -> None:
        self._rounds = rounds
        self.calls: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        return list(self._rounds[min(len(self.calls), len(self._rounds)) - 1])


class FailingResolver:
    async def resolve(self, host: str, port: int) -> list[str]:
        raise OSError(-2, "Name or service not known")


def refusal(guard: EgressGuard, url: str) -> EgressRefused:
    with pytest.raises(EgressRefused) as caught:
        guard.check_url(url)
    return caught.value


# --------------------------------------------------------------------------- address arm, literals

ADDRESS_REFUSALS = [
    # (url, words the message must contain)
    ("https://10.0.0.5/push", "private address (RFC 1918)"),
    ("https://172.16.3.4/", "private address (RFC 1918)"),
    ("https://192.168.255.1/", "private address (RFC 1918)"),
    ("https://10.255.255.1/", "private address (RFC 1918)"),
    ("https://127.0.0.1/", "loopback"),
    ("https://127.255.0.9/", "loopback"),
    ("https://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("https://169.254.1.1/", "link-local"),
    ("https://100.100.100.200/", "cloud metadata"),
    ("https://100.64.0.1/", "CGNAT"),
    ("https://0.0.0.0/", "unspecified"),
    ("https://0.1.2.3/", "this network"),
    ("https://192.0.0.8/", "IETF protocol assignment"),
    ("https://192.0.2.1/", "documentation"),
    ("https://198.51.100.7/", "documentation"),
    ("https://203.0.113.9/", "documentation"),
    ("https://198.18.0.1/", "benchmarking"),
    ("https://224.0.0.1/", "multicast"),
    ("https://239.255.255.250/", "multicast"),
    ("https://240.0.0.1/", "reserved"),
    ("https://255.255.255.255/", "broadcast"),
    ("https://[::]/", "unspecified"),
    ("https://[::1]/", "loopback"),
    ("https://[0:0:0:0:0:0:0:1]/", "loopback"),
    ("https://[fe80::1]/", "link-local"),
    ("https://[fec0::1]/", "site-local"),
    ("https://[fd00::1]/", "unique-local"),
    ("https://[fc00::1]/", "unique-local"),
    ("https://[fd00:ec2::254]/", "cloud metadata"),
    ("https://[ff02::1]/", "multicast"),
    ("https://[2001:db8::1]/", "documentation"),
    ("https://[::ffff:10.0.0.1]/", "IPv4-mapped IPv6 address embedding 10.0.0.1, a private address"),
    ("https://[::ffff:a00:1]/", "IPv4-mapped IPv6 address embedding 10.0.0.1, a private address"),
    ("https://[::ffff:7f00:1]/", "embedding 127.0.0.1, a loopback"),
    ("https://[::ffff:a9fe:a9fe]/latest/meta-data/", "embedding 169.254.169.254, a cloud metadata"),
    ("https://[::ffff:5db8:d822]/", "IPv4 embedded in IPv6 is refused"),
    ("https://[64:ff9b::a00:1]/", "NAT64 address (RFC 6052) embedding 10.0.0.1"),
    ("https://[64:ff9b::5db8:d822]/", "NAT64"),
    ("https://[64:ff9b:1::a00:1]/", "local-use NAT64"),
    ("https://[2002:0a00:0001::]/", "6to4 address (RFC 3056) embedding 10.0.0.1"),
    ("https://[2002:5db8:d822::1]/", "6to4"),
    ("https://[::a00:1]/", "IPv4-compatible"),
    ("https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "Teredo"),
    ("https://[100::1]/", "discard-only"),
]


@pytest.mark.parametrize(("url", "words"), ADDRESS_REFUSALS)
def test_non_global_literals_are_refused_by_the_address_arm(url: str, words: str) -> None:
    error = refusal(EgressGuard(), url)
    assert error.arm == "address"
    assert error.code == "egress_refused"
    assert isinstance(error, InvalidInput) and error.status == 400
    assert words in error.message
    assert error.message.startswith("egress refused by the address arm: ")


def test_the_refusal_names_the_address_and_its_class() -> None:
    error = refusal(EgressGuard(), "https://10.0.0.5/push")
    assert error.message == "egress refused by the address arm: 10.0.0.5 is a private address (RFC 1918)"
    assert error.details == {
        "arm": "address",
        "address": "10.0.0.5",
        "class": "a private address (RFC 1918)",
    }


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LOCALHOST",
        "localhost.",
        "api.localhost",
        "api.localhost.",
        "metadata",
        "metadata.",
        "metadata.google.internal",
        "Metadata.Google.Internal.",
        "localhost\u3002",  # ideographic full stop: IDNA maps it to a dot
    ],
)
def test_denied_names_are_refused_without_resolving(host: str) -> None:
    resolver = FakeResolver({})
    error = refusal(EgressGuard(resolver=resolver), f"https://{host}/hook")
    assert error.arm == "address"
    assert "is refused" in error.message
    assert resolver.calls == []


def test_extra_denied_hosts_cover_the_name_and_its_subdomains() -> None:
    guard = EgressGuard(EgressPolicy(extra_denied_hosts=["Internal.Example.", "b\u00fccher.de"]))
    assert refusal(guard, "https://internal.example/").arm == "address"
    assert refusal(guard, "https://api.internal.example/").arm == "address"
    assert refusal(guard, "https://xn--bcher-kva.de/").arm == "address"
    assert guard.check_url("https://notinternal.example/").host == "notinternal.example"


# --------------------------------------------------------------------------- url arm


@pytest.mark.parametrize(
    "url",
    [
        "https://2130706433/",  # decimal
        "https://0177.0.0.1/",  # octal
        "https://0x7f.0.0.1/",  # hex
        "https://0x7f000001/",
        "https://127.1/",  # short form
        "https://10.1/",
        "https://017700000001/",
        "https://127.0.0.01/",
        "https://1.2.3.4./",  # trailing dot on a literal
        "https://%31%32%37.0.0.1/",  # percent-encoded
        "https://example.0x1/",
        "https://256.1.1.1/",
    ],
)
def test_numeric_hosts_in_odd_encodings_are_refused(url: str) -> None:
    error = refusal(EgressGuard(), url)
    assert error.arm == "url"


@pytest.mark.parametrize(
    "url",
    [
        "https://user:pass@push.example.com/",
        "https://user@push.example.com/",
        "https://@push.example.com/",
        "https://push.example.com\\@10.0.0.1/",
        "https:///no-host",
        "https:no-host",
        "https://push.example.com:0/",
        "https://push.example.com:70000/",
        "https://push.example.com./",  # trailing dot
        "https://push..example.com/",
        "https://push_example.com:8443/ path",
        "https://[fe80::1%25eth0]/",  # zone index
        "https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/",  # fullwidth: not valid IDNA
        "https://" + "a" * 64 + ".example.com/",
        "https://push.example.com/" + "x" * 5000,
    ],
)
def test_malformed_and_ambiguous_urls_are_refused_by_the_url_arm(url: str) -> None:
    assert refusal(EgressGuard(), url).arm == "url"


def test_userinfo_refusal_does_not_echo_the_password() -> None:
    error = refusal(EgressGuard(), "https://user:s3cret@push.example.com/")
    assert "s3cret" not in error.message


def test_a_non_string_url_is_refused() -> None:
    assert refusal(EgressGuard(), 42).arm == "url"  # type: ignore[arg-type]


# --------------------------------------------------------------------------- scheme arm


@pytest.mark.parametrize(
    "url",
    [
        "http://push.example.com/push",
        "HTTP://push.example.com/push",
        "ftp://push.example.com/",
        "ws://push.example.com/",
        "wss://push.example.com/",
        "//push.example.com/",
        "push.example.com/push",
        "not a url",
        "file:///etc/passwd",
    ],
)
def test_anything_but_https_is_refused_by_the_scheme_arm(url: str) -> None:
    error = refusal(EgressGuard(), url)
    assert error.arm == "scheme"
    assert "only https://" in error.message


def test_each_conformance_probe_is_refused_by_its_own_arm() -> None:
    guard = EgressGuard()
    assert refusal(guard, "http://push.example.com/push").arm == "scheme"
    assert refusal(guard, "https://10.0.0.5/push").arm == "address"


def test_allow_cidrs_never_relax_the_scheme_arm() -> None:
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]))
    assert guard.check_url("https://127.0.0.1:8443/hook").address == ipaddress.ip_address("127.0.0.1")
    assert refusal(guard, "http://127.0.0.1:8443/hook").arm == "scheme"
    assert refusal(guard, "http://127.0.0.1/").arm == "scheme"


def test_allow_cidrs_exempt_only_the_matching_addresses() -> None:
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32", "fd00::/8"]))
    guard.check_url("https://127.0.0.1/")
    guard.check_url("https://[fd00::1]/")
    guard.check_url("https://[::ffff:127.0.0.1]/")  # mapped form of an allowed IPv4
    assert refusal(guard, "https://127.0.0.2/").arm == "address"
    assert refusal(guard, "https://10.0.0.1/").arm == "address"
    assert refusal(guard, "https://localhost/").arm == "address"  # names are not addresses


# --------------------------------------------------------------------------- passes


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("https://93.184.216.34/x", "93.184.216.34", 443),
        ("https://[2606:4700::1111]/", "2606:4700::1111", 443),
        ("https://8.8.8.8:8443/hook", "8.8.8.8", 8443),
        ("https://push.example.com/push", "push.example.com", 443),
        ("HTTPS://Push.Example.COM:443/push?x=1", "push.example.com", 443),
        ("https://b\u00fccher.de/", "xn--bcher-kva.de", 443),
        ("https://cafe.be/", "cafe.be", 443),
        ("https://127.0.0.1.nip.io/", "127.0.0.1.nip.io", 443),  # a name: its answers are checked later
    ],
)
def test_public_targets_pass_check_url(url: str, host: str, port: int) -> None:
    target = EgressGuard().check_url(url)
    assert (target.host, target.port) == (host, port)
    assert target.url.startswith("https://")


def test_check_url_accepts_an_httpx_url() -> None:
    assert EgressGuard().check_url(httpx.URL("https://93.184.216.34/x")).host == "93.184.216.34"


@pytest.mark.parametrize(
    "address",
    ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001::200e"],
)
def test_classify_address_passes_global_addresses(address: str) -> None:
    assert classify_address(ipaddress.ip_address(address)) is None


# --------------------------------------------------------------------------- resolve_and_check


async def test_a_name_passes_when_every_answer_is_public() -> None:
    resolver = FakeResolver({"push.example.com": ["93.184.216.34", "2606:4700::1111", "93.184.216.34"]})
    target = await EgressGuard(resolver=resolver).resolve_and_check("https://push.example.com:8443/push")
    assert target == PinnedTarget(
        url="https://push.example.com:8443/push",
        host="push.example.com",
        port=8443,
        addresses=(ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("2606:4700::1111")),
    )
    assert resolver.calls == [("push.example.com", 8443)]


@pytest.mark.parametrize(
    ("answers", "words"),
    [
        (["93.184.216.34", "10.0.0.7"], "push.example.com resolves to 10.0.0.7, a private address (RFC 1918)"),
        (["2606:4700::1111", "::1"], "resolves to ::1, a loopback address"),
        (["93.184.216.34", "::ffff:a9fe:a9fe"], "embedding 169.254.169.254, a cloud metadata address"),
        (["169.254.169.254"], "cloud metadata"),
        (["fe80::1%eth0"], "zone index"),
        (["not-an-ip"], "resolves to 'not-an-ip', which is not an IP address"),
    ],
)
async def test_a_name_is_refused_when_any_answer_is_not_public(answers: list[str], words: str) -> None:
    guard = EgressGuard(resolver=FakeResolver({"push.example.com": answers}))
    with pytest.raises(EgressRefused) as caught:
        await guard.resolve_and_check("https://push.example.com/push")
    assert caught.value.arm == "address"
    assert words in caught.value.message


async def test_an_unresolvable_name_is_refused() -> None:
    guard = EgressGuard(resolver=FailingResolver())
    with pytest.raises(EgressRefused) as caught:
        await guard.resolve_and_check("https://nowhere.example/")
    assert caught.value.arm == "address"
    assert caught.value.details is not None and caught.value.details["reason"] == "unresolvable"

    empty = EgressGuard(resolver=FakeResolver({"nowhere.example": []}))
    with pytest.raises(EgressRefused, match="no addresses"):
        await empty.resolve_and_check("https://nowhere.example/")


async def test_a_slow_resolver_is_refused_after_the_resolve_timeout() -> None:
    import asyncio

    class Slow:
        async def resolve(self, host: str, port: int) -> list[str]:
            await asyncio.sleep(10)
            return ["93.184.216.34"]

    guard = EgressGuard(resolver=Slow(), resolve_timeout=0.05)
    with pytest.raises(EgressRefused, match="did not resolve within"):
        await guard.resolve_and_check("https://slow.example/")


async def test_literals_are_not_resolved() -> None:
    resolver = FakeResolver({})
    target = await EgressGuard(resolver=resolver).resolve_and_check("https://[2606:4700::1111]/")
    assert target.addresses == (ipaddress.ip_address("2606:4700::1111"),)
    assert resolver.calls == []


async def test_scheme_and_url_arms_run_before_any_lookup() -> None:
    resolver = FakeResolver({})
    guard = EgressGuard(resolver=resolver)
    for url in ("http://push.example.com/", "https://u:p@push.example.com/", "https://localhost/"):
        with pytest.raises(EgressRefused):
            await guard.resolve_and_check(url)
    assert resolver.calls == []


async def test_dns_rebinding_is_caught_on_the_next_check() -> None:
    resolver = RebindingResolver(["93.184.216.34"], ["127.0.0.1"])
    guard = EgressGuard(resolver=resolver)
    first = await guard.resolve_and_check("https://rebind.example/hook")
    assert first.addresses == (ipaddress.ip_address("93.184.216.34"),)
    with pytest.raises(EgressRefused) as caught:
        await guard.resolve_and_check("https://rebind.example/hook")
    assert caught.value.arm == "address"
    assert "rebind.example resolves to 127.0.0.1, a loopback address" in caught.value.message
    assert len(resolver.calls) == 2


async def test_allow_cidrs_exempt_resolved_answers_too() -> None:
    resolver = FakeResolver({"receiver.test": ["127.0.0.1"]})
    allowed = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]), resolver)
    assert (await allowed.resolve_and_check("https://receiver.test/")).addresses == (ipaddress.ip_address("127.0.0.1"),)
    with pytest.raises(EgressRefused):
        await EgressGuard(EgressPolicy(), resolver).resolve_and_check("https://receiver.test/")


async def test_the_system_resolver_returns_address_strings() -> None:
    assert await SystemResolver().resolve("127.0.0.1", 443) == ["127.0.0.1"]


# --------------------------------------------------------------------------- policy


@pytest.mark.parametrize("cidr", ["not-a-cidr", "10.0.0.1/8", "300.0.0.0/8", "fd00::/129"])
def test_policy_rejects_bad_cidrs(cidr: str) -> None:
    with pytest.raises(InvalidInput, match="--egress-allow-cidr"):
        EgressPolicy(allow_cidrs=[cidr])


def test_policy_rejects_a_bare_string_and_bad_names() -> None:
    with pytest.raises(InvalidInput):
        EgressPolicy(allow_cidrs="127.0.0.1/32")
    with pytest.raises(InvalidInput):
        EgressPolicy(extra_denied_hosts=["not a host"])
    with pytest.raises(InvalidInput):
        EgressPolicy(extra_denied_hosts=["\uff4c\uff4f\uff43\uff41\uff4c"])


def test_policy_is_a_frozen_value() -> None:
    policy = EgressPolicy(allow_cidrs=["127.0.0.1/32", "::1/128"])
    assert policy == EgressPolicy(allow_cidrs=("127.0.0.1/32", "::1/128"))
    assert hash(policy) == hash(EgressPolicy(allow_cidrs=["127.0.0.1/32", "::1/128"]))
    with pytest.raises(AttributeError):
        policy.allow_cidrs = ()  # type: ignore[misc]
    assert EgressGuard().policy == EgressPolicy()
