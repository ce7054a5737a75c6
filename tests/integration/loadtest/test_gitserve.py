"""The benchmark's git server: `git http-backend` behind the same URLs as the product's dulwich
server, serving clones and one-commit fetches to gitfleet's source cache, and 404 for a name it
does not serve (`loadtest.gitserve`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.engine.source.cache import SourceCache
from fleet.errors import SourceError
from loadtest import gitserve
from loadtest.presets import GIT_SERVERS
from tests.support.gitrepo import GitRepo


@pytest.fixture(params=GIT_SERVERS)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[GitRepo, str]]:
    origin = GitRepo.create(tmp_path / "origin")
    origin.commit({"apps/web/cm.yaml": "kind: ConfigMap\n"}, "initial")
    url, stack = gitserve.serve({"fleet": origin.path}, 0, request.param)
    with stack:
        yield origin, url


def test_clone_then_fetch_of_a_new_commit(served: tuple[GitRepo, str], tmp_path: Path) -> None:
    origin, url = served
    cache = SourceCache(tmp_path / "cache")
    first = cache.resolve(url + "fleet", "main")
    assert first.commit == origin.head()
    assert cache.read_tree(first, "apps/web") == {"cm.yaml": b"kind: ConfigMap\n"}

    newer = origin.commit({"apps/web/cm.yaml": "kind: ConfigMap\ndata: {a: b}\n"}, "change")
    second = cache.resolve(url + "fleet", "main")
    assert second.commit == newer != first.commit
    assert cache.read_tree(second, "apps/web") == {"cm.yaml": b"kind: ConfigMap\ndata: {a: b}\n"}
    assert cache.fetches == 2


def test_a_name_not_served_is_not_found(served: tuple[GitRepo, str], tmp_path: Path) -> None:
    _, url = served
    with pytest.raises(SourceError, match="other"):
        SourceCache(tmp_path / "cache").resolve(url + "other", "main")


def test_cgi_output_without_headers_is_a_bad_gateway() -> None:
    assert gitserve._parse_cgi(b"no header block")[0] == "502 Bad Gateway"
    status, headers, body = gitserve._parse_cgi(
        b"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nmissing"
    )
    assert (status, headers, body) == (
        "404 Not Found",
        [("Content-Type", "text/plain")],
        b"missing",
    )
