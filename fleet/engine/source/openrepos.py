"""Open repositories of the source cache, kept between syncs instead of reopened by each.

Opening a dulwich repository reads its config and, on first use, every pack index; closing it
unmaps them all. The worker's profile of a 10,000-app cold sync showed that open and close,
twice per sync (resolve, then render), as about an eighth of the worker's CPU.

`OpenRepos.borrow(path)` lends an open repository to one thread at a time (a dulwich
repository reads its packs through shared file positions, so two threads must never read one
at once) and takes it back afterwards; a thread that finds none idle opens another. A borrower
that fails gives its repository back closed, not for reuse, and so does one whose folder was
forgotten (or whose pool was closed) while it was lent out. At most `max_idle` repositories
stay open in all, the least recently returned closed first, so a worker syncing from
thousands of remotes holds a bounded number of files open.

A kept repository still sees what arrives later: dulwich reads refs from disk at every lookup
and, when an object is not in the packs it knows, looks for new packs before it answers "not
found" (another thread's fetch, or another process sharing the cache folder). `forget(path)`
closes the idle ones of a folder about to be deleted.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator

from dulwich.errors import NotGitRepository
from dulwich.repo import Repo

from fleet.errors import SourceError

DEFAULT_MAX_IDLE = 16


def open_repo(path: str) -> Repo:
    try:
        return Repo(path)
    except NotGitRepository as e:
        raise SourceError(f"git repository {path} not found: no repository at that path") from e


class OpenRepos:
    """Idle open repositories by folder, lent to one borrower at a time (see module)."""

    def __init__(self, max_idle: int = DEFAULT_MAX_IDLE) -> None:
        self.max_idle = max_idle
        self.opened = 0  # repositories opened (tests and benchmarks count)
        self._idle: OrderedDict[str, list[Repo]] = OrderedDict()
        self._count = 0
        self._epochs: dict[str, int] = {}  # path -> bumped by `forget`: older loans close
        self._epoch = 0  # bumped by `close`: every loan out now closes on return
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def borrow(self, path: str) -> Iterator[Repo]:
        with self._lock:
            lent_at = (self._epoch, self._epochs.get(path, 0))
        repo = self._take(path)
        if repo is None:
            repo = open_repo(path)
            with self._lock:
                self.opened += 1
        try:
            yield repo
        except BaseException:
            repo.close()
            raise
        self._give_back(path, repo, lent_at)

    def forget(self, path: str) -> None:
        """Close the idle repositories of `path` (its folder is about to go); one lent out
        now is closed when it comes back, never lent again."""
        with self._lock:
            repos = self._idle.pop(path, [])
            self._count -= len(repos)
            self._epochs[path] = self._epochs.get(path, 0) + 1
        for repo in repos:
            repo.close()

    def close(self) -> None:
        with self._lock:
            repos = [repo for idle in self._idle.values() for repo in idle]
            self._idle.clear()
            self._count = 0
            self._epoch += 1
        for repo in repos:
            repo.close()

    def _take(self, path: str) -> Repo | None:
        with self._lock:
            idle = self._idle.get(path)
            if not idle:
                return None
            self._count -= 1
            repo = idle.pop()
            if not idle:
                del self._idle[path]
            return repo

    def _give_back(self, path: str, repo: Repo, lent_at: tuple[int, int]) -> None:
        evicted: list[Repo] = []
        with self._lock:
            if lent_at != (self._epoch, self._epochs.get(path, 0)):
                evicted.append(repo)  # its folder was forgotten, or the pool closed, meanwhile
            else:
                self._idle.setdefault(path, []).append(repo)
                self._idle.move_to_end(path)
                self._count += 1
            while self._count > self.max_idle:
                oldest, repos = next(iter(self._idle.items()))
                evicted.append(repos.pop(0))
                self._count -= 1
                if not repos:
                    del self._idle[oldest]
        for old in evicted:
            old.close()
