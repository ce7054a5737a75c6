"""Which repositories a project allows: `sourceRepos` globs matched per URL component.

A glob is `scheme://host/path`, matched against a parsed repository URL
(`fleet.engine.source.remotes.RemoteUrl`) one component at a time, never as one string, so no
`*` reaches across a `/` into another team's path, and a `..` never gets as far as a match:

- the scheme is matched as such (`https://...` never matches an `ssh://` or `http://` URL); a
  glob without a scheme (`github.com/team-a/*`) matches every scheme the fleet fetches;
- the host (with `:port` when the URL has a port other than the scheme's default) is matched
  in lower case, so `github.com` matches the default port only and `127.0.0.1:*` any port;
- the path is matched segment by segment, case-sensitively, with `fnmatch` patterns inside one
  segment; `**` as a whole segment matches one or more segments; a trailing `.git` on either
  side is ignored;
- `*` alone matches every repository (the built-in `default` project).

Why our own matcher: a string glob over the URL (fnmatch, or a `*` that crosses `/`) is the
bug this replaces, and Argo CD's own fix (match the normalized URL, scheme kept) still lets one
`*` span segments. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from urllib.parse import unquote

from fleet.engine.source.remotes import RemoteUrl

ANY = "*"


@dataclass(frozen=True)
class RepoGlob:
    """A parsed `sourceRepos` entry; `scheme` is `*` when the glob names none."""

    scheme: str
    host: str
    segments: tuple[str, ...]

    def matches(self, url: RemoteUrl) -> bool:
        if any(s in ("", ".", "..") for s in url.segments):
            return False  # never parsed so, but a matcher does not trust its caller
        return (
            fnmatchcase(url.scheme, self.scheme)
            and _host_matches(url.address, self.host)
            and _path_matches(url.segments, self.segments)
        )


def parse_glob(text: str) -> RepoGlob:
    """A glob from its text, or ValueError saying what is wrong with it."""
    body = text.strip()
    if body == ANY:
        return RepoGlob(ANY, ANY, ("**",))
    scheme, sep, rest = body.partition("://")
    if not sep:
        scheme, rest = ANY, body
    host, _, path = rest.partition("/")
    if not scheme or "@" in host or not host or any(c in body for c in " \\?#"):
        raise ValueError(
            f"{text!r} is not a repository glob like 'https://github.com/team-a/*' (a scheme, "
            "a host and a path; no user-info, spaces, backslashes, queries or fragments)"
        )
    segments = tuple(unquote(s) for s in path.removesuffix("/").split("/")) if path else ()
    if not segments or any(s in ("", ".", "..") for s in segments):
        raise ValueError(
            f"{text!r} needs a path without empty, '.' or '..' segments: end it with /* for "
            "one level or /** for every level below"
        )
    last = segments[-1].removesuffix(".git") or segments[-1]
    return RepoGlob(scheme.lower(), host.lower(), (*segments[:-1], last))


def allows(globs: Sequence[str], url: RemoteUrl) -> bool:
    """Whether any glob matches `url`; a glob that does not parse matches nothing."""
    return any(_matches(glob, url) for glob in globs)


def _matches(glob: str, url: RemoteUrl) -> bool:
    try:
        return parse_glob(glob).matches(url)
    except ValueError:
        return False


def _host_matches(address: str, glob: str) -> bool:
    if glob.startswith("["):  # an IPv6 address: brackets are not a character class here
        return address == glob
    return fnmatchcase(address, glob)


def _path_matches(segments: Sequence[str], globs: Sequence[str]) -> bool:
    if not globs:
        return not segments
    if globs[0] == "**":
        rest = globs[1:]
        return any(_path_matches(segments[i:], rest) for i in range(1, len(segments) + 1))
    if not segments:
        return False
    return fnmatchcase(segments[0], globs[0]) and _path_matches(segments[1:], globs[1:])
