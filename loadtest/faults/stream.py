"""A steady stream of commits, each delivered to the coordinator as a GitHub push webhook.

Every `every_s` seconds the stream commits a new value into the first ConfigMap of the next app
(round robin), taken from one counter, so an app's committed values only ever grow: a smaller
value seen in a cluster after a larger one was written is a stale write. Each commit is pushed
to the webhook; a delivery that fails (the API is down, Redis is away) is not dropped: its paths
ride along with the next delivery (one push event from the last delivered commit, listing every
path since), as a CI pipeline that retries its notification would. The apps' own polling
interval is the fallback beyond that.

`newest()` says which value each app's newest commit holds; `pause()` stops committing (pending
deliveries still go out) so the fleet can be checked against a fixed head.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dulwich.repo import Repo

from api.client import ClientError
from loadtest.fleetrun import push_event
from loadtest.workload import App, change


@dataclass
class StreamCounts:
    """What the stream did: commits made, deliveries accepted and refused."""

    commits: int = 0
    delivered: int = 0
    refused: int = 0
    commit_times: list[float] = field(default_factory=list)

    def commits_between(self, start: float, end: float) -> int:
        return sum(1 for t in self.commit_times if start <= t < end)


class CommitStream:
    def __init__(
        self,
        *,
        repo: Path,
        repo_url: str,
        apps: Sequence[App],
        per_app: int,
        every_s: float,
        deliver: Callable[[dict[str, Any]], Any],
    ) -> None:
        """`deliver(event)` posts one push event (raises ClientError when refused)."""
        self.repo, self.repo_url, self.apps = repo, repo_url, list(apps)
        self.per_app, self.every_s = per_app, every_s
        self.deliver = deliver
        self.counts = StreamCounts()
        self._values = {app.name: 0 for app in self.apps}
        self._lock = threading.Lock()
        self._paused = threading.Event()
        self._stop = threading.Event()
        self._pending: list[str] = []
        with Repo(str(repo)) as opened:
            self._delivered = self._head = opened.head().decode()
        self._thread = threading.Thread(target=self._loop, name="commit-stream", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def pause(self) -> None:
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    def newest(self) -> dict[str, int]:
        """app -> the value of its newest commit (0: the initial one)."""
        with self._lock:
            return dict(self._values)

    def undelivered(self) -> bool:
        with self._lock:
            return bool(self._pending)

    def tick(self) -> None:
        """One step of the stream: a commit (unless paused), then the pending delivery."""
        if not self._paused.is_set():
            self._commit_next()
        self._deliver_pending()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.tick()

    def upcoming(self, count: int) -> list[App]:
        """The apps the next `count` commits will change."""
        number = self.counts.commits + 1
        return [self.apps[(number + i) % len(self.apps)] for i in range(count)]

    def _commit_next(self) -> None:
        number = self.counts.commits + 1
        app = self.apps[number % len(self.apps)]
        sha, paths = change(self.repo, app, self.per_app, str(number))
        with self._lock:
            self._values[app.name] = number
            self._pending += paths
            self._head = sha
        self.counts.commits = number
        self.counts.commit_times.append(time.time())

    def _deliver_pending(self) -> None:
        with self._lock:
            if not self._pending:
                return
            sha, paths = self._head, list(dict.fromkeys(self._pending))
        event = push_event(self.repo_url, sha=sha, before=self._delivered, paths=paths)
        try:
            self.deliver(event)
        except (ClientError, OSError):
            self.counts.refused += 1
            return
        with self._lock:  # commits and deliveries share this thread: nothing came meanwhile
            self._pending = []
            self._delivered = sha
        self.counts.delivered += 1
