"""The source cache keeps its repositories open between syncs (`fleet.engine.source.openrepos`)
and still reads what arrives later: new commits fetched by itself, by another thread, or by
another process sharing the cache folder. Real repositories, fetched over file://."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from fleet.engine.source.cache import SourceCache
from fleet.engine.source.openrepos import OpenRepos
from fleet.errors import SourceError
from tests.support.gitrepo import GitRepo


@pytest.fixture
def origin(tmp_path: Path) -> GitRepo:
    repo = GitRepo.create(tmp_path / "origin")
    repo.commit({"apps/web/cm.yaml": "v: 1\n"}, "initial")
    return repo


def test_syncs_of_one_remote_reuse_one_open_repository(origin: GitRepo, tmp_path: Path) -> None:
    cache = SourceCache(tmp_path / "cache")
    for _ in range(5):
        resolved = cache.resolve(origin.url)
        assert cache.read_tree(resolved, "apps/web") == {"cm.yaml": b"v: 1\n"}
    assert cache.repos.opened == 1
    cache.close()


def test_a_kept_repository_sees_commits_fetched_after_it_was_opened(
    origin: GitRepo, tmp_path: Path
) -> None:
    cache = SourceCache(tmp_path / "cache")
    first = cache.resolve(origin.url)
    assert cache.read_tree(first, "apps/web") == {"cm.yaml": b"v: 1\n"}
    for n in range(2, 5):
        tip = origin.commit({"apps/web/cm.yaml": f"v: {n}\n"})
        resolved = cache.resolve(origin.url)
        assert resolved.commit == tip
        assert cache.read_tree(resolved, "apps/web") == {"cm.yaml": f"v: {n}\n".encode()}
    assert cache.read_tree(first, "apps/web") == {"cm.yaml": b"v: 1\n"}  # old commits stay
    assert cache.repos.opened == 1
    cache.close()


def test_a_kept_repository_sees_a_pack_another_process_fetched_into_the_shared_folder(
    origin: GitRepo, tmp_path: Path
) -> None:
    ours, theirs = SourceCache(tmp_path / "cache"), SourceCache(tmp_path / "cache")
    ours.read_tree(ours.resolve(origin.url), "apps/web")  # ours now holds the folder open
    tip = origin.commit({"apps/web/cm.yaml": "v: 2\n", "apps/web/new.yaml": "n: 1\n"})
    fetched = theirs.resolve(origin.url)  # the new pack lands through the other instance
    assert fetched.commit == tip and theirs.fetches == 1

    # ours reads the new commit through the repository it kept, without fetching it again
    assert ours.read_tree(fetched, "apps/web") == {"cm.yaml": b"v: 2\n", "new.yaml": b"n: 1\n"}
    assert ours.resolve(origin.url, tip).commit == tip
    assert ours.fetches == 1 and ours.repos.opened == 1
    ours.close()
    theirs.close()


def test_threads_reading_at_once_never_share_a_repository(origin: GitRepo, tmp_path: Path) -> None:
    cache = SourceCache(tmp_path / "cache")
    resolved = cache.resolve(origin.url)
    inside, release = threading.Barrier(3), threading.Event()
    held: list[int] = []

    def read() -> None:
        with cache.snapshot(resolved) as snap:
            held.append(id(snap.repo))
            inside.wait(timeout=10)
            release.wait(timeout=10)
            assert snap.read_tree("apps/web") == {"cm.yaml": b"v: 1\n"}

    threads = [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    release.set()
    for t in threads:
        t.join(timeout=10)
    assert len(set(held)) == 3  # each borrower had its own while the others held theirs
    assert cache.repos.opened == 3
    cache.close()


def test_idle_repositories_are_bounded_and_the_oldest_close_first(tmp_path: Path) -> None:
    repos = OpenRepos(max_idle=2)
    paths = []
    for i in range(3):
        origin = GitRepo.create(tmp_path / f"r{i}")
        origin.commit({"f": f"{i}\n"})
        paths.append(str(origin.path))
    kept = {}
    for path in paths:
        with repos.borrow(path) as repo:
            kept[path] = repo
    with repos.borrow(paths[0]) as again:  # the oldest was closed and is opened anew
        assert again is not kept[paths[0]]
    with repos.borrow(paths[2]) as again:
        assert again is kept[paths[2]]
    assert repos.opened == 4
    repos.close()


def test_a_borrower_that_fails_gives_its_repository_back_closed(
    origin: GitRepo, tmp_path: Path
) -> None:
    cache = SourceCache(tmp_path / "cache")
    resolved = cache.resolve(origin.url)
    with pytest.raises(SourceError, match="not found"):
        cache.read_tree(resolved, "apps/missing")
    assert cache.read_tree(resolved, "apps/web") == {"cm.yaml": b"v: 1\n"}
    assert cache.repos.opened == 2  # the failed read's repository was not lent again
    cache.close()


def test_a_cache_folder_deleted_under_a_kept_repository_is_cloned_again(
    origin: GitRepo, tmp_path: Path
) -> None:
    cache = SourceCache(tmp_path / "cache")
    resolved = cache.resolve(origin.url)
    cache.read_tree(resolved, "apps/web")
    shutil.rmtree(cache.repo_dir(origin.url))  # an operator cleaning the cache by hand
    tip = origin.commit({"apps/web/cm.yaml": "v: 2\n"})

    again = cache.resolve(origin.url)
    assert again.commit == tip
    assert cache.read_tree(again, "apps/web") == {"cm.yaml": b"v: 2\n"}
    cache.close()


def test_a_repository_lent_out_when_its_folder_is_forgotten_is_closed_on_return(
    origin: GitRepo,
) -> None:
    repos = OpenRepos()
    path = str(origin.path)
    with repos.borrow(path) as first:
        repos.forget(path)  # the folder is about to be deleted and cloned again
    with repos.borrow(path) as second:
        assert second is not first
    with repos.borrow(path) as third:
        repos.close()
    with repos.borrow(path) as fourth:
        assert fourth is not third
    assert repos.opened == 3
    repos.close()
