"""Repository URLs are parsed, and every part that could reach the worker's disk, another
tenant's path or a viewer's screen is refused with the rule that refused it."""

from __future__ import annotations

import pytest

from fleet.engine.source.remotes import (
    RemotePolicy,
    RemoteUrl,
    RepoUrlError,
    identity,
    parse_remote,
)

LOCAL = "local path or an scp-like address"
SCHEME = "the fleet fetches https:// and ssh:// URLs only"
USERINFO = "carries user-info"
SEGMENT = "has a path segment"
HTTP = "uses plain http"

REFUSED = {
    "github.com/team-a/../../var/cache/gitfleet": LOCAL,
    "/var/cache/gitfleet/git/abc": LOCAL,
    "./repo": LOCAL,
    "~/repo": LOCAL,
    "git@github.com:team-a/shop.git": LOCAL,
    "file:///var/cache/gitfleet/git/abc": SCHEME,
    "FILE:///etc": SCHEME,
    "git://github.com/team-a/shop": SCHEME,
    "ext::sh -c touch% /tmp/pwned": "space, a control character",
    "https://github.com/team-a/../team-b/secrets": SEGMENT,
    "https://github.com/team-a/./shop": SEGMENT,
    "https://github.com/team-a/%2e%2e/team-b/secrets": SEGMENT,
    "https://github.com/team-a/%2E%2E/team-b/secrets": SEGMENT,
    "https://github.com/team-a%2f..%2fteam-b/secrets": SEGMENT,
    "https://github.com/team-a//shop": SEGMENT,
    "https://github.com/team-a/%ff": SEGMENT,
    "https://github.com/team-a\\..\\team-b": "backslash",
    "https://github.com/team-a/shop\n": "control character",
    "https://ghp_SECRET@github.com/team-a/shop": USERINFO,
    "https://bot:SECRET@github.com/team-a/shop": USERINFO,
    "https://github.com@evil.example/team-a/shop": USERINFO,
    "ssh://git:SECRET@github.com/team-a/shop": USERINFO,
    "https://github.com/team-a/shop?x=1": "query or fragment",
    "https://github.com/team-a/shop#main": "query or fragment",
    "https://github.com": "names no repository path",
    "https://github.com/team-a/.git": "names no repository before '.git'",
    "https://github.com:99999/team-a/shop": "invalid port",
    "https://github.com:x/team-a/shop": "invalid port",
    "https://gith_ub..com/team-a/shop": "no valid host name",
    "https:///team-a/shop": "no valid host name",
    "http://git.example.com/team-a/shop": HTTP,
    "http://127.0.0.2:8080/team-a/shop": HTTP,
}


@pytest.mark.parametrize(("url", "rule"), REFUSED.items(), ids=list(REFUSED))
def test_a_url_breaking_a_rule_is_refused_naming_the_rule(url: str, rule: str) -> None:
    policy = RemotePolicy.from_setting("127.0.0.1, localhost:9000")

    with pytest.raises(RepoUrlError, match=rule.replace(".", r"\.")) as refused:
        policy.check(url)

    assert "SECRET" not in str(refused.value)


ACCEPTED = {
    "https://github.com/team-a/shop.git": ("https://github.com/team-a/shop", "github.com"),
    "https://GitHub.COM:443/team-a/Shop/": ("https://github.com/team-a/Shop", "github.com"),
    "HTTPS://github.com/team-a/sh%6fp": ("https://github.com/team-a/shop", "github.com"),
    "https://git.example.com:8443/a/b/c.git": ("https://git.example.com:8443/a/b/c", "git..."),
    "ssh://git@github.com/team-a/shop.git": ("ssh://github.com/team-a/shop", "github.com"),
    "ssh://git@github.com:22/team-a/shop": ("ssh://github.com/team-a/shop", "github.com"),
    "ssh://github.com:2222/team-a/shop": ("ssh://github.com:2222/team-a/shop", "github.com"),
    "http://127.0.0.1:8123/apps": ("http://127.0.0.1:8123/apps", "127.0.0.1"),
    "http://localhost:9000/apps": ("http://localhost:9000/apps", "localhost"),
    "https://[::1]:8443/apps": ("https://[::1]:8443/apps", "::1"),
}


@pytest.mark.parametrize(("url", "expected"), ACCEPTED.items(), ids=list(ACCEPTED))
def test_an_accepted_url_has_one_name_per_repository(url: str, expected: tuple[str, str]) -> None:
    parsed = RemotePolicy.from_setting("127.0.0.1,localhost:9000").check(url)

    assert parsed.name == expected[0]
    assert identity(url) == expected[0]
    assert parse_remote(parsed.url) == parsed  # what is fetched parses back to what was checked


def test_an_insecure_host_entry_with_a_port_allows_that_port_only() -> None:
    policy = RemotePolicy.from_setting("localhost:9000")

    assert policy.check("http://localhost:9000/x").name == "http://localhost:9000/x"
    with pytest.raises(RepoUrlError, match="list localhost:9001 in GITFLEET_INSECURE_GIT_HOSTS"):
        policy.check("http://localhost:9001/x")


def test_the_fetched_url_is_rebuilt_from_the_checked_parts() -> None:
    parsed = RemotePolicy().check("ssh://git@GitHub.com:22/team-a/my%20repo.git")

    assert parsed.url == "ssh://git@github.com/team-a/my%20repo.git"
    assert parsed.path == ("team-a", "my repo.git")


def test_a_prefix_holds_its_own_subtree_only() -> None:
    prefix = parse_remote("https://github.com/team-a", prefix=True)
    host = parse_remote("https://github.com/", prefix=True)

    assert parse_remote("https://github.com/team-a/shop.git").within(prefix)
    assert parse_remote("https://github.com/team-a").within(prefix)
    assert parse_remote("https://github.com/team-b/shop").within(host)
    assert not parse_remote("https://github.com/team-ab/shop").within(prefix)
    assert not parse_remote("ssh://github.com/team-a/shop").within(prefix)
    assert not parse_remote("https://github.com:8443/team-a/shop").within(prefix)
    assert not parse_remote("https://github.com/team-b/team-a").within(prefix)


def test_identity_never_raises_and_drops_user_info() -> None:
    assert identity("https://tok@Host.example/a/b.git/") == "https://host.example/a/b"
    assert identity("file:///srv/git/shop.git") == "file:///srv/git/shop"
    assert identity("github.com/team-a/../../x") == "github.com/team-a/../../x"


def test_a_remote_url_prints_as_its_name() -> None:
    url = RemoteUrl("https", "github.com", ("team-a", "shop.git"))

    assert str(url) == "https://github.com/team-a/shop"
    assert url.segments == ("team-a", "shop")
