"""`sourceRepos` globs match scheme, host and path apart, and `*` never crosses a `/`."""

from __future__ import annotations

import pytest

from fleet.control.sourcerepos import allows, parse_glob
from fleet.engine.source.remotes import RemoteUrl, RepoUrlError, parse_remote

TEAM_A = "https://github.com/team-a/*"

# (glob, url, matches)
CASES = [
    (TEAM_A, "https://github.com/team-a/shop", True),
    (TEAM_A, "https://github.com/team-a/shop.git", True),
    (TEAM_A, "https://github.com/team-a/shop/", True),
    (TEAM_A, "https://GitHub.com/team-a/shop", True),
    (TEAM_A, "https://github.com:443/team-a/shop", True),
    (TEAM_A, "https://github.com/team-a/sh%6fp", True),
    (TEAM_A, "https://github.com/team-a/sub/shop", False),
    (TEAM_A, "https://github.com/team-a", False),
    (TEAM_A, "https://github.com/team-ab/shop", False),
    (TEAM_A, "https://github.com/Team-A/shop", False),
    (TEAM_A, "https://github.com:8443/team-a/shop", False),
    (TEAM_A, "ssh://git@github.com/team-a/shop", False),
    (TEAM_A, "http://github.com/team-a/shop", False),
    (TEAM_A, "https://evil.example/github.com/team-a/shop", False),
    (TEAM_A, "https://github.com.evil.example/team-a/shop", False),
    ("https://github.com/team-a/*.git", "https://github.com/team-a/shop", True),
    ("https://github.com/team-a/shop", "https://github.com/team-a/shop.git", True),
    ("https://github.com/team-a/shop.git", "https://github.com/team-a/shop", True),
    ("https://github.com/team-a/shop", "https://github.com/team-a/shop2", False),
    ("https://github.com/team-a/**", "https://github.com/team-a/sub/group/shop", True),
    ("https://github.com/team-a/**", "https://github.com/team-a", False),
    ("https://github.com/*/shop", "https://github.com/team-b/shop", True),
    ("https://github.com/*/shop", "https://github.com/team-b/x/shop", False),
    ("https://*.example.com/team-a/*", "https://git.example.com/team-a/shop", True),
    ("https://*.example.com/team-a/*", "https://example.com/team-a/shop", False),
    ("HTTPS://GITHUB.COM/team-a/*", "https://github.com/team-a/shop", True),
    ("http://127.0.0.1:*/*", "http://127.0.0.1:8123/apps", True),
    ("http://127.0.0.1/*", "http://127.0.0.1:8123/apps", False),
    ("http://127.0.0.1:8123/*", "http://127.0.0.1:8124/apps", False),
    ("https://git.example.com:8443/*", "https://git.example.com:8443/shop", True),
    ("*://github.com/team-a/*", "ssh://github.com/team-a/shop", True),
    ("github.com/team-a/*", "ssh://git@github.com/team-a/shop", True),
    ("github.com/team-a/*", "https://github.com/team-a/shop", True),
    ("github.com/team-a/*", "https://github.com/team-b/shop", False),
    ("https://[::1]:8443/*", "https://[::1]:8443/apps", True),
    ("*", "https://github.com/anyone/anything", True),
    ("*", "ssh://git@host.example/a/b/c", True),
]


@pytest.mark.parametrize(("glob", "url", "matches"), CASES, ids=[f"{g} ~ {u}" for g, u, _ in CASES])
def test_a_glob_matches_each_component_of_a_parsed_url(glob: str, url: str, matches: bool) -> None:
    assert allows([glob], parse_remote(url)) is matches


# URLs the parser refuses can never be matched; a matcher handed one anyway refuses it too.
TRAVERSALS = [
    "https://github.com/team-a/../team-b/secrets",
    "https://github.com/team-a/%2e%2e/team-b/secrets",
    "https://github.com/team-a/%2E%2e/team-b/secrets",
    "github.com/team-a/../../var/cache/gitfleet/git/abc",
]


@pytest.mark.parametrize("url", TRAVERSALS)
def test_a_url_with_dot_segments_never_reaches_the_matcher(url: str) -> None:
    with pytest.raises(RepoUrlError):
        parse_remote(url)


def test_the_matcher_refuses_dot_segments_even_when_handed_them() -> None:
    forged = RemoteUrl("https", "github.com", ("team-a", "..", "team-b", "secrets"))

    assert not allows([TEAM_A, "https://github.com/team-a/*/*/*"], forged)
    assert not allows(["https://github.com/**"], forged)


BAD_GLOBS = {
    "git@github.com:team-a/*": "no user-info",
    "https://bot@github.com/team-a/*": "no user-info",
    "https://github.com": "needs a path",
    "https://github.com/": "needs a path",
    "https://github.com/team-a/../*": "needs a path without empty, '.' or '..'",
    "https://github.com/team-a//*": "needs a path without empty, '.' or '..'",
    "https://github.com/team-a/%2e%2e/*": "needs a path without empty, '.' or '..'",
    "https://github.com/a?b": "queries",
    "://github.com/a/*": "a scheme, a host and a path",
}


@pytest.mark.parametrize(("glob", "problem"), BAD_GLOBS.items(), ids=list(BAD_GLOBS))
def test_a_glob_that_is_not_a_repository_glob_is_refused_and_matches_nothing(
    glob: str, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem.replace("?", r"\?").replace(".", r"\.")):
        parse_glob(glob)
    assert not allows([glob], parse_remote("https://github.com/team-a/shop"))
