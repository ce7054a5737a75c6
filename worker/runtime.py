"""The warm state a worker keeps between jobs, and how a job function finds it.

A worker runs many syncs in one long-lived process (rq `SimpleWorker`, no fork per job), so
what is expensive to build is built once and reused: the git object cache and render cache
(`SyncCaches`, under a folder of this worker's own), one `KubeClient` per cluster with its
connection pool and discovery cache, the store, the dispatcher and the lease helper.

A cluster's client is rebuilt when its credentials change: each job reads the cluster's
decrypted settings from the store (one GET and a decrypt, cheap next to a sync) and compares
them with those the cached client was built from. A project that acts as a ServiceAccount gets a
client of its own per (cluster, account), impersonating it on every request; the most recently
used `IMPERSONATING_CLIENTS` of those are kept warm.

The runtime holds the worker's watches (`worker.selfheal.SelfHeal`) only as a `Watcher`, the
little a job asks of them: record what a sync declared, and say whether an instance has been
quiet since its last sync. The process passes the factory that builds them when it builds the
runtime, and the runtime hands them to the engine too, as the `LabelledIndex` a prune reads.

rq calls job functions with their arguments only, so the worker makes its runtime current for
the thread that executes the job (`active`), and the job asks for it with `current()`. Tests
that run two workers as threads in one process therefore never see each other's state.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from redis import Redis

from fleet.control.pushes import PushLog
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.store import Store
from fleet.control.registry.syncreads import SyncReads
from fleet.control.registry.syncrecords import ResourceRecord
from fleet.control.routing.dispatch import Dispatcher
from fleet.control.routing.leases import Lease
from fleet.engine.caches import SyncCaches
from fleet.engine.prune import LabelledIndex
from fleet.engine.source.remotes import RemotePolicy
from fleet.kube.client import KubeClient
from fleet.kube.kubeconfig import ServiceAccount
from worker.journal import Journal
from worker.settings import WorkerSettings

IMPERSONATING_CLIENTS = 32
ClientKey = tuple[str, ServiceAccount | None]


class HandBack(BaseException):
    """Raised in a job's thread when a draining worker's time is up (`worker.process`): the job
    stops where it is and gives its sync back to be run by another worker. A BaseException, so
    no `except Exception` on the way swallows it."""


class Watcher(LabelledIndex, Protocol):
    """What jobs ask of the worker's watches of its instances' objects."""

    def begin(self, instance: str) -> None:
        """This worker starts syncing `instance`: what its watches see meanwhile may be the
        sync's own doing (`worker.selfheal.SelfHeal.begin`)."""
        ...

    def declare(self, instance: str, resources: Sequence[ResourceRecord]) -> None:
        """Note the objects this worker's own sync of `instance` just reported (ends it)."""
        ...

    def end(self, instance: str) -> None:
        """The sync `begin` started is over, whether or not it declared anything."""
        ...

    def not_quiet_since(self, instance: str, kinds: set[tuple[str, str]], since: float) -> str:
        """Why the instance's live objects may have changed since `since`; "" if they cannot."""
        ...


class Runtime:
    def __init__(
        self,
        settings: WorkerSettings,
        redis: Redis,
        *,
        watcher: Callable[[Runtime], Watcher] | None = None,
    ) -> None:
        """`watcher` builds the worker's watches from the runtime (None: no watches)."""
        self.settings = settings
        self.name = settings.name
        self.redis = redis
        box = SecretBox.open(
            settings.secret_key, redis, prefix=settings.prefix, insecure_dev=settings.insecure_dev
        )
        self.store = Store(redis, box, prefix=settings.prefix)
        self.reads = SyncReads(self.store)  # a sync's registry reads, while nothing changes
        self.dispatcher = Dispatcher(redis, prefix=settings.prefix)
        self.remotes = RemotePolicy.from_setting(settings.insecure_git_hosts)
        self.caches = SyncCaches.at(settings.cache_dir, remotes=self.remotes)
        self.journal = Journal(redis, prefix=settings.prefix)
        self.pushes = PushLog(redis, prefix=settings.prefix)
        self.holder = f"{self.name}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        self._clients: OrderedDict[ClientKey, KubeClient] = OrderedDict()
        self._lock = threading.Lock()
        self.watcher = watcher(self) if watcher is not None else None
        self.caches.labelled = self.watcher

    @property
    def leases(self) -> Lease:
        return self.dispatcher.leases

    def kube_for(self, cluster: str, acting_as: ServiceAccount | None = None) -> KubeClient:
        """The warm client of `cluster`, acting as `acting_as` on every request if given;
        rebuilt when the cluster's stored credentials changed."""
        config = self.store.cluster_config(cluster).acting_as(acting_as)
        key = (cluster, acting_as)
        with self._lock:
            client = self._clients.get(key)
            if client is None or client.config != config:
                if client is not None:
                    client.close()
                client = self._clients[key] = KubeClient(config)
            self._clients.move_to_end(key)
            self._evict()
            return client

    def _evict(self) -> None:
        """Close the least recently used impersonating clients beyond the limit."""
        impersonating = [key for key in self._clients if key[1] is not None]
        for key in impersonating[: max(len(impersonating) - IMPERSONATING_CLIENTS, 0)]:
            self._clients.pop(key).close()

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
        self.caches.source.close()


_local = threading.local()


@contextmanager
def active(runtime: Runtime) -> Iterator[Runtime]:
    """Make `runtime` the current one for this thread while the block runs."""
    previous = getattr(_local, "runtime", None)
    _local.runtime = runtime
    try:
        yield runtime
    finally:
        _local.runtime = previous


def current() -> Runtime:
    runtime: Runtime | None = getattr(_local, "runtime", None)
    if runtime is None:
        raise RuntimeError(
            "no worker runtime is active: job functions run inside a gitfleet worker"
        )
    return runtime
