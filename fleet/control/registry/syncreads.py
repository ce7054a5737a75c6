"""The registry records a worker's sync reads, kept while the registry generation stands.

A sync reads its app, the registered clusters (to check the app still targets its cluster),
its project, the project's age key and the repository credentials that cover its URL: six
round trips to Redis per sync, for records that change a few times a day. Every write of
those records goes through the registry's generation-guarded transaction
(`fleet.control.registry.transact`), which bumps `<p>:registry:generation`; so `refresh()`, one
GET at the start of each sync, tells whether anything changed since the records were read.
While nothing did, the sync is answered from memory; after any write, everything is read
again. A sync therefore sees the registry as of its start, or newer: never older. What is
kept grows with the registry's clusters, projects and repository records, never with its apps.

Not kept: an app's own git credentials (one per app: they would grow the worker by the fleet's
size; read each sync), and the cluster's connection settings (an in-cluster token file
rotates; `Store.cluster_config` keeps its own parse; `refresh(cluster)` reads them in the
round trip that reads the generation, for the sync's first read). App records come from the
store's app cache (`fleet.control.registry.appcache`), which the worker holds anyway.

Thread-safe: a worker's sync threads share one. A record read while another thread found a new
generation is used by its sync but not kept (the epoch check), so a read older than a write
never outlives the write in memory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from fleet.control.registry.gitcreds import best_covering
from fleet.control.registry.records import AppRecord, ClusterRecord, ProjectRecord
from fleet.control.registry.store import Store
from fleet.engine.source.cache import GitCredentials
from fleet.engine.source.remotes import RemoteUrl

T = TypeVar("T")


class SyncReads:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._generation: int | None = None
        self._epoch = 0
        self._kept: dict[Hashable, Any] = {}
        self._lock = threading.Lock()
        self._mine = threading.local()  # the generation this thread's sync began at

    def refresh(self, cluster: str = "") -> None:
        """Forget every record kept when the registry changed since they were read (one round
        trip). The generation read is also this thread's: its app reads are as of it, or newer,
        whatever another thread's refresh found meanwhile. `cluster`: the cluster this sync
        is of, whose connection settings (read every sync, never kept) are read in the same
        round trip, for this thread's next read of them (`Store.generation_with`; any value
        an earlier refresh of the thread read is dropped). The app's own git credentials are
        not read early: they must be no older than the app record the sync reads after this
        (a record moved to a new URL with new credentials, or deleted and created again
        without any, in one write, would otherwise meet the credentials from before it)."""
        early = [self.store.keys.cluster_credentials(cluster)] if cluster else []
        raw = self.store.generation_with(early)
        generation = int(raw) if raw is not None else 0
        self._mine.generation = generation
        with self._lock:
            if generation != self._generation:  # an older read racing a newer: a clear too
                self._kept.clear()
                self._generation = generation
                self._epoch += 1

    def get_app(self, name: str) -> AppRecord:
        """`Store.get_app` (NotFound when gone), from the store's app cache brought to this
        thread's last `refresh` (a plain read before any)."""
        generation: int | None = getattr(self._mine, "generation", None)
        if generation is None:
            return self.store.get_app(name)
        return self.store.cached_app(name, generation)

    def done(self) -> None:
        """The sync is over: drop what its refresh read early and it did not use."""
        self.store.forget_early()

    def list_clusters(self) -> list[ClusterRecord]:
        return list(self._kept_or(("clusters",), self.store.list_clusters))

    def get_cluster(self, name: str) -> ClusterRecord:
        for cluster in self.list_clusters():
            if cluster.name == name:
                return cluster
        return self.store.get_cluster(name)  # NotFound

    def instances(self, app: AppRecord) -> list[str]:
        return self.store.instances(app, self.list_clusters())

    def get_project(self, name: str) -> ProjectRecord:
        return self._kept_or(("project", name), lambda: self.store.get_project(name))

    def age_key_for(self, project: str) -> str:
        return self._kept_or(("age-key", project), lambda: self.store.age_keys.key_for(project))

    def git_credentials_for(self, app: AppRecord) -> GitCredentials | None:
        """`Store.git_credentials_for`: the app's own credentials (read every time), else the
        repository credentials that cover its URL for its project (kept)."""

        repositories = self.store.repositories

        def covering(project: str, url: RemoteUrl) -> GitCredentials | None:
            # kept: the records (a few) and each one's secret, never anything per app or URL
            found = self._kept_or(("repositories",), repositories.list)
            best = best_covering(found, project, url)
            if best is None:
                return None
            return self._kept_or(
                ("repository", best.name), lambda: repositories.secret_of(best.name)
            )

        return self.store.git_credentials_for(app, covering)

    def _kept_or(self, key: Hashable, load: Callable[[], T]) -> T:
        with self._lock:
            if key in self._kept:
                return self._kept[key]  # type: ignore[no-any-return]
            epoch = self._epoch
        value = load()
        with self._lock:
            if epoch == self._epoch:
                self._kept[key] = value
        return value
