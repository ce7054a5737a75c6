"""The git source cache against real repositories: file://, a local path and smart HTTP."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from dulwich.refs import Ref
from dulwich.repo import Repo

from fleet.engine.source.cache import GitCredentials, Resolved, SourceCache, scrub
from fleet.errors import SourceError
from tests.support.gitrepo import GitRepo
from tests.support.gitserver import GitHttpServer

PASSWORD = "s3cret-t0ken"
APP = {"apps/web/deploy.yaml": "kind: Deployment\n", "apps/web/svc.yaml": "kind: Service\n"}


@pytest.fixture
def origin(tmp_path: Path) -> GitRepo:
    repo = GitRepo.create(tmp_path / "origin")
    repo.commit({**APP, "README.md": "hello\n"}, "initial")
    return repo


@pytest.fixture
def cache(tmp_path: Path) -> SourceCache:
    return SourceCache(tmp_path / "cache")


@pytest.fixture
def server(origin: GitRepo) -> Iterator[GitHttpServer]:
    with GitHttpServer({"app.git": origin.path}, username="deployer", password=PASSWORD) as srv:
        yield srv


@pytest.fixture
def open_server(origin: GitRepo) -> Iterator[GitHttpServer]:
    with GitHttpServer({"app.git": origin.path}) as srv:
        yield srv


CREDS = GitCredentials("deployer", PASSWORD)


def test_branch_and_head_resolve_to_the_tip_commit(origin: GitRepo, cache: SourceCache) -> None:
    origin.branch("release")
    tip = origin.commit({"README.md": "changed\n"})
    assert cache.resolve(origin.url, "main").commit == tip
    assert cache.resolve(origin.url).commit == tip
    assert cache.resolve(origin.url, "refs/heads/main").commit == tip
    assert cache.resolve(origin.url, "release").commit != tip


def test_lightweight_and_annotated_tags_resolve_to_the_tagged_commit(
    origin: GitRepo, cache: SourceCache
) -> None:
    tagged = origin.head()
    origin.tag("v1")
    origin.tag("v1-annotated", annotated=True)
    origin.commit({"README.md": "later\n"})
    assert cache.resolve(origin.url, "v1").commit == tagged
    assert cache.resolve(origin.url, "v1-annotated").commit == tagged


def test_abbreviated_sha_resolves_to_the_full_commit(origin: GitRepo, cache: SourceCache) -> None:
    first = origin.head()
    origin.commit({"README.md": "later\n"})
    resolved = cache.resolve(origin.url, first[:8])
    assert resolved.commit == first
    assert resolved.revision == first[:8]


def test_second_resolve_picks_up_a_new_commit_over_http(
    origin: GitRepo, cache: SourceCache, server: GitHttpServer
) -> None:
    url = server.url_for("app.git")
    first_sha = origin.head()
    assert cache.resolve(url, "main", credentials=CREDS).commit == first_sha
    second_sha = origin.commit({"apps/web/svc.yaml": "kind: Service\nx: 1\n"})
    second = cache.resolve(url, "main", credentials=CREDS)
    assert second.commit == second_sha
    assert cache.read_tree(second, "apps/web")["svc.yaml"] == b"kind: Service\nx: 1\n"


def test_a_present_full_sha_is_resolved_without_a_fetch(
    origin: GitRepo, cache: SourceCache, open_server: GitHttpServer
) -> None:
    url = open_server.url_for("app.git")
    sha = cache.resolve(url, "main").commit
    requests = len(open_server.requests)
    assert cache.resolve(url, sha).commit == sha
    assert len(open_server.requests) == requests


def test_unauthenticated_http_fetch_reads_the_tree(
    origin: GitRepo, cache: SourceCache, open_server: GitHttpServer
) -> None:
    resolved = cache.resolve(open_server.url_for("app.git"))
    files = cache.read_tree(resolved, "apps/web")
    assert files == {"deploy.yaml": b"kind: Deployment\n", "svc.yaml": b"kind: Service\n"}


def test_a_local_path_is_read_in_place_without_a_cache_copy(
    origin: GitRepo, cache: SourceCache
) -> None:
    resolved = cache.resolve(str(origin.path), "main")
    newer = origin.commit({"apps/web/extra.yaml": "kind: ConfigMap\n"})
    assert cache.resolve(str(origin.path), "main").commit == newer
    assert cache.read_tree(resolved, "apps/web").keys() == {"deploy.yaml", "svc.yaml"}
    assert not cache.root.exists()


def test_a_bare_local_repository_is_read_in_place(origin: GitRepo, cache: SourceCache) -> None:
    bare = cache.repo_dir(origin.url)
    cache.resolve(origin.url)
    resolved = cache.resolve(str(bare), "main")
    assert resolved.commit == origin.head()
    assert "apps/web/deploy.yaml" in cache.read_commit_tree(resolved)


def test_a_commit_that_does_not_touch_the_path_keeps_its_tree_id(
    origin: GitRepo, cache: SourceCache
) -> None:
    before = cache.resolve(origin.url)
    origin.commit({"README.md": "unrelated\n"})
    after = cache.resolve(origin.url)
    assert after.commit != before.commit
    assert cache.tree_id(after, "apps/web") == cache.tree_id(before, "./apps/web/")
    origin.commit({"apps/web/svc.yaml": "kind: Service\nchanged: true\n"})
    touched = cache.resolve(origin.url)
    assert cache.tree_id(touched, "apps/web") != cache.tree_id(before, "apps/web")
    assert cache.tree_id(touched, "") == cache.tree_id(touched, ".")


def test_trees_are_parsed_once_per_commit_across_snapshots(
    origin: GitRepo, cache: SourceCache
) -> None:
    resolved = cache.resolve(origin.url)
    expected = origin.tree_id("apps/web")
    assert cache.tree_id(resolved, "apps/web") == expected
    parsed = cache.objects.misses
    assert parsed >= 3  # the commit, the root tree, apps/
    for _ in range(5):
        assert cache.tree_id(resolved, "apps/web") == expected  # each call opens a new snapshot
    assert cache.objects.misses == parsed
    assert cache.objects.hits >= 5 * 3


def test_read_tree_is_recursive_and_skips_symlinks(origin: GitRepo, cache: SourceCache) -> None:
    os.symlink("deploy.yaml", origin.path / "apps/web/link.yaml")
    origin.commit({"apps/web/nested/cm.yaml": b"kind: ConfigMap\n", "apps/web/link.yaml": None})
    os.symlink("deploy.yaml", origin.path / "apps/web/link.yaml")
    with Repo(str(origin.path)) as repo:
        repo.get_worktree().stage(["apps/web/link.yaml"])
    origin.commit({}, "add a symlink")
    files = cache.read_tree(cache.resolve(origin.url), "apps/web")
    assert sorted(files) == ["deploy.yaml", "nested/cm.yaml", "svc.yaml"]


def test_wrong_password_fails_with_an_authentication_error_without_the_password(
    cache: SourceCache, server: GitHttpServer
) -> None:
    url = server.url_for("app.git")
    with pytest.raises(SourceError) as caught:
        cache.resolve(url, credentials=GitCredentials("deployer", "wrong-" + PASSWORD))
    assert str(caught.value) == (
        f"authentication failed for {url} (HTTP 401): check the username and password or token"
    )
    assert PASSWORD not in str(caught.value)


def test_missing_credentials_say_authentication_is_required(
    cache: SourceCache, server: GitHttpServer
) -> None:
    with pytest.raises(SourceError, match=r"authentication required for http://127\.0\.0\.1"):
        cache.resolve(server.url_for("app.git"))


def test_credentials_never_reach_the_cache_config_or_the_resolved_url(
    cache: SourceCache, server: GitHttpServer
) -> None:
    url = server.url_for("app.git")
    embedded = url.replace("http://", f"http://deployer:{PASSWORD}@")
    resolved = cache.resolve(embedded, "main")
    cache.resolve(url, "main", credentials=CREDS)
    config = (cache.repo_dir(url) / "config").read_text()
    assert resolved.url == url
    assert cache.repo_dir(embedded) == cache.repo_dir(url)
    assert PASSWORD not in config
    assert url in config
    with pytest.raises(SourceError) as caught:
        cache.resolve(embedded, "no-such-branch")
    assert PASSWORD not in str(caught.value)
    assert PASSWORD not in repr(CREDS)


def test_a_missing_repository_names_the_url_without_credentials(
    cache: SourceCache, open_server: GitHttpServer, tmp_path: Path
) -> None:
    url = open_server.url_for("missing.git")
    with pytest.raises(SourceError) as caught:
        cache.resolve(url.replace("http://", f"http://bot:{PASSWORD}@"))
    assert str(caught.value).startswith(f"git repository {url} not found: ")
    assert PASSWORD not in str(caught.value)
    assert not cache.repo_dir(url).exists()
    with pytest.raises(SourceError, match=r"^git repository file:///.*/nowhere not found: "):
        cache.resolve((tmp_path / "nowhere").as_uri())
    with pytest.raises(SourceError, match="no repository at that path"):
        cache.resolve(str(tmp_path / "nowhere"))


def test_an_unknown_revision_is_reported_with_the_url(origin: GitRepo, cache: SourceCache) -> None:
    with pytest.raises(SourceError) as caught:
        cache.resolve(origin.url, "v9")
    assert str(caught.value) == (
        f"revision 'v9' not found in {origin.url}: no branch, tag or commit by that name"
    )
    assert cache.resolve(origin.url, "main").commit == origin.head()  # the clone was kept


def test_an_unreachable_server_is_a_retryable_error(cache: SourceCache) -> None:
    with pytest.raises(SourceError) as caught:
        cache.resolve(f"http://deployer:{PASSWORD}@127.0.0.1:9/app.git")
    assert str(caught.value).startswith("git repository http://127.0.0.1:9/app.git unreachable: ")
    assert caught.value.retryable
    assert PASSWORD not in str(caught.value)


def test_a_branch_deleted_upstream_can_no_longer_be_resolved(
    origin: GitRepo, cache: SourceCache
) -> None:
    origin.branch("feature")
    assert cache.resolve(origin.url, "feature").commit == origin.head()
    with Repo(str(origin.path)) as repo:
        repo.refs.remove_if_equals(Ref(b"refs/heads/feature"), None)
    with pytest.raises(SourceError, match="revision 'feature' not found"):
        cache.resolve(origin.url, "feature")


def test_a_token_alone_authenticates_as_x_access_token(origin: GitRepo, cache: SourceCache) -> None:
    with GitHttpServer(
        {"app.git": origin.path}, username="x-access-token", password=PASSWORD
    ) as server:
        resolved = cache.resolve(
            server.url_for("app.git"), credentials=GitCredentials(password=PASSWORD)
        )
    assert resolved.commit == origin.head()


def test_a_missing_path_and_a_file_path_are_reported(origin: GitRepo, cache: SourceCache) -> None:
    resolved = cache.resolve(origin.url)
    with pytest.raises(SourceError, match=r"path 'apps/api' not found in commit [0-9a-f]{12} of"):
        cache.tree_id(resolved, "apps/api")
    with pytest.raises(SourceError, match=r"path 'README\.md' is a file, not a directory"):
        cache.read_tree(resolved, "README.md")


def test_concurrent_resolves_of_one_remote_share_the_cache(
    origin: GitRepo, cache: SourceCache
) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        commits = set(pool.map(lambda _: cache.resolve(origin.url).commit, range(8)))
    assert commits == {origin.head()}


def test_scrub_removes_user_info_and_known_secrets() -> None:
    text = f"fetch https://bot:{PASSWORD}@git.example/r.git failed: token {PASSWORD}"
    assert scrub(text, PASSWORD) == "fetch https://git.example/r.git failed: token ***"


def test_reading_a_commit_the_cache_does_not_hold_asks_to_resolve_again(
    origin: GitRepo, cache: SourceCache
) -> None:
    resolved = cache.resolve(origin.url)
    stale = Resolved(resolved.url, "main", "0" * 40)
    with pytest.raises(SourceError, match=f"commit {'0' * 40} is not in {resolved.url}: resolve"):
        cache.tree_id(stale, "apps/web")


def test_fetched_since_reuses_only_a_fetch_begun_since_and_max_age_one_ended_since(
    origin: GitRepo, cache: SourceCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch that read the remote's refs before a push, and ended after it (a slow pack),
    has not seen the push: a resolve asking for a fetch begun since the push fetches again.
    `max_age` still counts from a fetch's end, so a slow monorepo fetch serves a period."""
    first = cache.resolve(origin.url).commit  # the cache knows the remote
    real_fetch = cache._fetch
    refs_read = threading.Event()

    def slow_fetch(*args: Any) -> None:
        real_fetch(*args)  # reads the refs and the pack now...
        refs_read.set()
        time.sleep(0.5)  # ...and ends later, as a slow pack transfer would

    monkeypatch.setattr(cache, "_fetch", slow_fetch)
    with ThreadPoolExecutor(max_workers=1) as pool:
        earlier = pool.submit(cache.resolve, origin.url)
        assert refs_read.wait(10)
        pushed = origin.commit({"README.md": "pushed while the other fetch ends\n"})
        since = time.monotonic()  # the push is before this; the other fetch began before it
        assert cache.resolve(origin.url, max_age=60).commit == first  # waited for it: ended
        assert earlier.result().commit == first
        found = cache.resolve(origin.url, fetched_since=since)
    assert found.commit == pushed != first
    # a fetch begun since is reused (no third fetch); a full sha not in the cache never is
    monkeypatch.setattr(cache, "_fetch", lambda *args: pytest.fail("fetched again"))
    assert cache.resolve(origin.url, fetched_since=since).commit == pushed
    unknown = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setattr(cache, "_fetch", slow_fetch)
    refs_read.clear()
    with pytest.raises(SourceError, match="not found"):
        cache.resolve(origin.url, unknown, fetched_since=since)
    assert refs_read.is_set()  # it asked the remote for that commit
