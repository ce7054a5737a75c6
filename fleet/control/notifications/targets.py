"""Where notifications may be sent: the target URL rules, against server-side request forgery.

A subscription's URL is text an API user wrote, and the coordinator posts to it from inside the
fleet's network. So, like repository URLs (`fleet.engine.source.remotes`), a target is parsed
with `urllib.parse` and refused unless:

- the scheme is `https`; `http` only for a host the operator lists in
  GITFLEET_NOTIFY_ALLOW_HOSTS (comma-separated `host` or `host:port`);
- it carries no user-info (a password there would be shown to every reader) and no fragment;
- the host is a globally reachable unicast address: not loopback, private, link-local, shared
  (100.64.0.0/10: CGNAT, pod networks, Alibaba's metadata at 100.100.100.200), reserved,
  multicast or unspecified (a cloud metadata endpoint, the fleet's own Redis), an IPv4-mapped,
  6to4 or NAT64 IPv6 address judged as the IPv4 address it carries; neither as written nor as
  resolved when a message is sent, unless the operator lists it in GITFLEET_NOTIFY_ALLOW_HOSTS.

Refusals name the rule, never what a port answered. `check` is pure; `addresses` looks the name
up once and answers the addresses to connect to, each checked (the delivery connects to these
only, so a name cannot resolve outside for the check and inside for the connection).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from fleet.errors import UsageError

MAX_LENGTH = 2048


class TargetUrlError(UsageError):
    """A notification target the fleet refuses to post to; the message names the rule."""

    stage = "notifications"


@dataclass(frozen=True)
class TargetPolicy:
    """Hosts (`host` or `host:port`) that may be posted to over http or on an inside address."""

    allow_hosts: frozenset[str] = frozenset()

    @classmethod
    def from_setting(cls, setting: str | Iterable[str]) -> TargetPolicy:
        """From GITFLEET_NOTIFY_ALLOW_HOSTS: comma-separated `host` or `host:port`."""
        items = setting.split(",") if isinstance(setting, str) else setting
        return cls(frozenset(i.strip().lower() for i in items if i.strip()))

    def allows(self, host: str, port: int) -> bool:
        return host in self.allow_hosts or f"{host}:{port}" in self.allow_hosts

    def check(self, text: str) -> SplitResult:
        """The parsed URL, or TargetUrlError naming the rule it breaks."""
        if not text or len(text) > MAX_LENGTH or any(c <= " " or c == "\\" for c in text):
            raise TargetUrlError(
                f"url: give an https URL of at most {MAX_LENGTH} characters, without spaces, "
                "control characters or backslashes"
            )
        try:
            parts = urlsplit(text)
            port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        except ValueError as e:
            raise TargetUrlError(f"url: cannot be parsed: {e}") from None
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
        if scheme not in ("https", "http") or not host:
            raise TargetUrlError("url: give an https:// URL with a host")
        if "@" in parts.netloc:
            raise TargetUrlError("url: user-info before '@' is refused; put no secret in a URL")
        if parts.fragment:
            raise TargetUrlError("url: remove the fragment (#...)")
        allowed = self.allows(host, port)
        if scheme == "http" and not allowed:
            raise TargetUrlError(
                f"url: plain http sends messages in clear: use https://, or have the operator "
                f"list {host} in GITFLEET_NOTIFY_ALLOW_HOSTS"
            )
        if not allowed and _inside(host):
            raise TargetUrlError(
                f"url: {host} is a loopback, private or link-local address; the coordinator "
                "posts only to outside hosts unless the operator lists it in "
                "GITFLEET_NOTIFY_ALLOW_HOSTS"
            )
        return parts

    def resolves_inside(self, parts: SplitResult) -> bool:
        """Whether the URL's host, not allowed by name, resolves to an inside address now
        (a name that pointed outside when the subscription was made may not any more)."""
        try:
            self.addresses(parts)
        except TargetUrlError:
            return True
        except OSError:
            return False  # the post fails on its own, with its own error
        return False

    def addresses(self, parts: SplitResult) -> list[str]:
        """The addresses the URL's host resolves to now, in order, to connect to exactly these
        (a second lookup could answer otherwise: DNS rebinding). TargetUrlError if the host,
        not allowed by name, resolves to any inside address; OSError if it does not resolve."""
        host = (parts.hostname or "").lower()
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        found = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        if not addresses:
            raise OSError(f"{host} resolves to no address")
        if not self.allows(host, port) and any(_inside(a) for a in addresses):
            raise TargetUrlError(f"url: {host} resolves to an inside address: refused")
        return addresses


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")


def _embedded(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries and reaches (IPv4-mapped, 6to4, NAT64)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _inside(host: str) -> bool:
    """Anything but a globally reachable unicast address: loopback, private, link-local,
    shared (100.64.0.0/10: CGNAT, pod networks, Alibaba's 100.100.100.200 metadata), reserved,
    multicast, unspecified; an IPv4-mapped, 6to4 or NAT64 IPv6 address as its IPv4."""
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(
            host.strip("[]").split("%", 1)[0]
        )
    except ValueError:
        return host == "localhost" or host.endswith(".localhost")
    if isinstance(address, ipaddress.IPv6Address):
        if address in _LOCAL_NAT64:  # a site's own NAT64 (RFC 8215): not global
            return True
        embedded = _embedded(address)
        if embedded is not None:
            address = embedded
    return address.is_multicast or not address.is_global
