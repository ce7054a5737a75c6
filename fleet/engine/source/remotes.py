"""Repository URLs the fleet fetches: parsed with `urllib.parse`, never pattern matched.

An application's repository URL is text an API user wrote, and a worker acts on it with the
credentials and the disk of every tenant. So a URL is taken apart once, here, and refused unless
every part is plain:

- scheme `https` or `ssh`; `http` only for a host the operator lists as insecure
  (GITFLEET_INSECURE_GIT_HOSTS, `host` or `host:port`); never `file://`, a local path or an
  scp-like `host:path` (git reads those as paths on the worker's own disk);
- a host name or IP address, with a valid port if any;
- no user-info on http(s): a token there is shown to every viewer of the app and written into
  logs and traces (credentials go in the API's `credentials` field). An ssh URL may name its
  user (`ssh://git@host/...`, an address, not a secret) but never a password;
- a path of at least one segment, none of them empty, `.` or `..`, also once percent-decoded
  (`%2e%2e`), with no encoded `/` or `\\`, no control characters, no query or fragment.

`RemoteUrl.name` is the repository's one name: scheme, lower-case host, the port only when not
the scheme's default, and the decoded path without a trailing `/` or `.git`. Git credentials
are bound to it, `sourceRepos` globs match it component by component
(`fleet.control.sourcerepos`), and the source cache names its folder after its hash. `url` is
what is fetched: rebuilt from the parsed parts, so what was checked is what is fetched.

Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from fleet.errors import Fault, SourceError

SCHEMES = ("https", "ssh")
DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22}
MAX_LENGTH = 2048
_HOST = re.compile(r"[a-z0-9]([a-z0-9_.-]*[a-z0-9])?")
_SSH_USER = re.compile(r"[A-Za-z0-9._-]+")
_UNSAFE = re.compile(r"[\x00-\x20\x7f\\]")  # in the URL text
_UNSAFE_DECODED = re.compile(r"[\x00-\x1f\x7f\\]")  # in a decoded segment (%20 is a space)
_USERINFO = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/]*@")


class RepoUrlError(SourceError):
    """A repository URL the fleet refuses to fetch; the message names the rule."""

    fault = Fault.USER


@dataclass(frozen=True)
class RemoteUrl:
    """A parsed repository URL. `port` is None for the scheme's default; `path` holds the
    decoded segments as given (a last segment may end in `.git`)."""

    scheme: str
    host: str
    path: tuple[str, ...]
    port: int | None = None
    user: str = ""

    @property
    def address(self) -> str:
        """`host`, or `host:port` for a port other than the scheme's default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    @property
    def segments(self) -> tuple[str, ...]:
        """The path's segments without the `.git` of the last one."""
        if not self.path:
            return ()
        return (*self.path[:-1], self.path[-1].removesuffix(".git"))

    @property
    def name(self) -> str:
        """The repository's one name: `https://github.com/team-a/shop`."""
        return f"{self.scheme}://{self.address}/" + "/".join(self.segments)

    @property
    def url(self) -> str:
        """What a worker fetches, rebuilt from the checked parts."""
        user = f"{self.user}@" if self.user else ""
        path = "/" + "/".join(quote(s, safe="~!$&'()*+,;=:@") for s in self.path)
        return urlunsplit((self.scheme, user + self.address, path, "", ""))

    def within(self, prefix: RemoteUrl) -> bool:
        """Whether this URL is `prefix` or below it: same scheme and address, and the prefix's
        segments lead this URL's (`https://h/team-a` holds `https://h/team-a/x`, never
        `https://h/team-ab`)."""
        if (self.scheme, self.address) != (prefix.scheme, prefix.address):
            return False
        count = len(prefix.segments)
        return self.segments[:count] == prefix.segments

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class RemotePolicy:
    """Which URLs a fleet process fetches: `parse_remote`'s rules, with `http` allowed only
    for `insecure_hosts` (`host` for any port, or `host:port`)."""

    insecure_hosts: frozenset[str] = frozenset()

    @classmethod
    def from_setting(cls, setting: str | Iterable[str]) -> RemotePolicy:
        """From GITFLEET_INSECURE_GIT_HOSTS: comma-separated `host` or `host:port`."""
        items = setting.split(",") if isinstance(setting, str) else setting
        return cls(frozenset(i.strip().lower() for i in items if i.strip()))

    def check(self, text: str, *, prefix: bool = False) -> RemoteUrl:
        """The parsed URL, or RepoUrlError naming the rule it breaks."""
        url = parse_remote(text, prefix=prefix)
        if url.scheme == "http" and not self.allows_http(url):
            raise RepoUrlError(
                f"repository URL {shown(text)} uses plain http, which sends credentials and "
                f"code in clear: use https://, or have the operator list {url.address} in "
                "GITFLEET_INSECURE_GIT_HOSTS"
            )
        return url

    def allows_http(self, url: RemoteUrl) -> bool:
        return url.host in self.insecure_hosts or url.address in self.insecure_hosts


def parse_remote(text: str, *, prefix: bool = False) -> RemoteUrl:
    """Parse an https, ssh or http repository URL (http is checked by `RemotePolicy`); raise
    RepoUrlError naming the rule that refused it. With `prefix`, the path may be empty (a whole
    host), as for repository credentials registered for every repository under a prefix."""
    if not text or len(text) > MAX_LENGTH:
        raise RepoUrlError(f"give a repository URL of at most {MAX_LENGTH} characters")
    if _UNSAFE.search(text):
        raise RepoUrlError(
            f"repository URL {shown(text)} contains a space, a control character or a "
            "backslash: give the URL without them"
        )
    if "://" not in text:
        raise RepoUrlError(
            f"repository {shown(text)} is a local path or an scp-like address, not a URL: the "
            "fleet fetches https:// and ssh:// URLs only (local paths are for the one-shot "
            "`gitfleet sync` and `gitfleet diff`)"
        )
    try:
        parts = urlsplit(text)
    except ValueError as e:  # an unbalanced IPv6 bracket
        raise RepoUrlError(f"repository URL {shown(text)} cannot be parsed: {e}") from None
    scheme = parts.scheme.lower()
    if scheme not in (*SCHEMES, "http"):
        raise RepoUrlError(
            f"repository URL {shown(text)} has scheme {scheme or 'none'}: the fleet fetches "
            "https:// and ssh:// URLs only (file:// and local paths would read the worker's "
            "own disk)"
        )
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise RepoUrlError(f"repository URL {shown(text)} has a query or fragment: remove it")
    user = _user(text, scheme, parts.netloc)
    host, port = _host_and_port(text, scheme, parts.netloc)
    path = _segments(text, parts.path, prefix=prefix)
    return RemoteUrl(scheme=scheme, host=host, path=path, port=port, user=user)


def shown(text: str) -> str:
    """`text` safe to show: user-info replaced by `***`, so no refusal repeats a token."""
    return _USERINFO.sub(r"\g<scheme>***@", text)


def identity(text: str) -> str:
    """The repository's name for a URL the engine may fetch without a policy too (file://,
    git://, a local path): `RemoteUrl.name` when it parses, else the text lower-cased without
    user-info, trailing `/` or `.git`. Never raises; the source cache hashes it."""
    try:
        return parse_remote(text).name
    except RepoUrlError:
        try:
            parts = urlsplit(text.strip())
        except ValueError:
            return shown(text.strip())
        netloc = parts.netloc.rpartition("@")[2].lower()
        path = parts.path.rstrip("/").removesuffix(".git")
        return urlunsplit((parts.scheme.lower(), netloc, path, "", ""))


def _user(text: str, scheme: str, netloc: str) -> str:
    if "@" not in netloc:
        return ""
    userinfo = netloc.rpartition("@")[0]
    if scheme != "ssh" or ":" in userinfo or not _SSH_USER.fullmatch(userinfo):
        raise RepoUrlError(
            f"repository URL {shown(text)} carries user-info before '@': a token there would "
            "be shown to every viewer and written into logs; send it in `credentials` (an ssh "
            "URL may name its user, as in ssh://git@host/org/repo, never a password)"
        )
    return userinfo


def _host_and_port(text: str, scheme: str, netloc: str) -> tuple[str, int | None]:
    address = netloc.rpartition("@")[2]
    host_part, port_text = _split_port(address)
    host = _host(text, host_part)
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise RepoUrlError(f"repository URL {shown(text)} has an invalid port {port_text!r}")
    port = int(port_text)
    return host, None if port == DEFAULT_PORTS.get(scheme) else port


def _split_port(address: str) -> tuple[str, str | None]:
    if address.startswith("["):
        host, _, rest = address.partition("]")
        return host + "]", rest[1:] if rest.startswith(":") else None
    host, sep, port = address.partition(":")
    return host, port if sep else None


def _host(text: str, host: str) -> str:
    host = host.lower()
    if host.startswith("[") and host.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(host[1:-1]))
        except ValueError:
            pass
    elif _HOST.fullmatch(host) and ".." not in host:
        return host
    raise RepoUrlError(f"repository URL {shown(text)} has no valid host name")


def _segments(text: str, path: str, *, prefix: bool) -> tuple[str, ...]:
    raw = path.removeprefix("/").removesuffix("/")
    segments = tuple(raw.split("/")) if raw else ()
    if not segments and not prefix:
        raise RepoUrlError(f"repository URL {shown(text)} names no repository path")
    decoded = tuple(_segment(text, s) for s in segments)
    if decoded and not decoded[-1].removesuffix(".git"):
        raise RepoUrlError(f"repository URL {shown(text)} names no repository before '.git'")
    return decoded


def _segment(text: str, segment: str) -> str:
    try:
        decoded = unquote(segment, errors="strict")
    except UnicodeDecodeError:
        decoded = ""
    if decoded in ("", ".", "..") or "/" in decoded or _UNSAFE_DECODED.search(decoded):
        raise RepoUrlError(
            f"repository URL {shown(text)} has a path segment {segment!r}: empty, '.' and '..' "
            "segments (also percent-encoded), encoded '/' or '\\' and invalid UTF-8 are refused"
        )
    return decoded
