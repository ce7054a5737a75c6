"""Which worker owns each application instance (`app@cluster`,
`fleet.control.registry.instances`).

The owner of an instance is what `fleet.control.routing.sharding.assign` gives it over *every*
instance known in the registry and the live workers, so the coordinator, the scheduler and every
worker compute the same owner. `OwnerMap` caches that map and recomputes it only when the registry
generation (`Keys.generation`, bumped by every registry write) or the set of live workers
changes, so dispatching one sync costs two small Redis reads, not a registry scan.

rq job ids allow letters, digits, `_` and `-` only; `safe_id` encodes anything else as `_xx`
(hex of its UTF-8 bytes, `_` itself included), which keeps ids readable and injective.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from redis import Redis

from fleet.control.keys import Keys
from fleet.control.registry import records
from fleet.control.registry.appcache import AppCache
from fleet.control.registry.instances import clusters_for, instance_key
from fleet.control.registry.records import AppRecord, ClusterRecord
from fleet.control.routing import membership
from fleet.control.routing.sharding import assign

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def safe_id(text: str) -> str:
    """`text` with every character outside [A-Za-z0-9-] written as `_xx` (its UTF-8 bytes)."""
    return "".join(c if c in _SAFE else "".join(f"_{b:02x}" for b in c.encode()) for c in text)


def _load(redis: Redis, index: str, key_of: Callable[[str], str]) -> list[bytes]:
    names = sorted(m.decode() for m in redis.smembers(index))  # type: ignore[union-attr]
    raws = redis.mget([key_of(n) for n in names]) if names else []
    return [raw for raw in raws if isinstance(raw, bytes)]


def registered_instances(
    redis: Redis, *, prefix: str = "gitfleet", apps: AppCache | None = None
) -> list[str]:
    """Every `app@cluster` the registry holds, read without decrypting anything (the app
    records from `apps` when given, which re-reads only the apps written since its last use)."""
    keys = Keys(prefix)
    if apps is None:
        records_ = [records.from_json(AppRecord, r) for r in _load(redis, keys.apps, keys.app)]
    else:
        records_ = apps.apps()
    clusters = [
        records.from_json(ClusterRecord, r) for r in _load(redis, keys.clusters, keys.cluster)
    ]
    return [instance_key(a.name, c) for a in records_ for c in clusters_for(a, clusters)]


class OwnerMap:
    """The shard map over registered instances and live workers, cached between changes.

    A registry write that leaves the set of instances as it was (an app's source or policy
    changed, a sync requested) costs reading the apps written since the last look; the map is
    recomputed only when the instances or the live workers changed."""

    def __init__(self, redis: Redis, *, prefix: str = "gitfleet") -> None:
        self.redis = redis
        self.prefix = prefix
        self._keys = Keys(prefix)
        self._apps = AppCache(redis, self._keys)
        self._lock = threading.Lock()
        self._stamp: tuple[bytes | None, tuple[str, ...]] | None = None
        self._basis: tuple[frozenset[str], tuple[str, ...]] | None = None
        self._map: dict[str, str] = {}

    def owner(self, instance: str) -> str:
        """The live worker that owns `instance`; `NoWorkers` when none is live."""
        workers = self.live()
        shard = self._refreshed(workers)
        found = shard.get(instance)
        if found is not None:
            return found
        return assign([*shard, instance], list(workers))[instance]

    def current(self) -> dict[str, str]:
        """instance -> worker for every registered instance; `NoWorkers` when none is live."""
        return dict(self._refreshed(self.live()))

    def live(self) -> tuple[str, ...]:
        return tuple(membership.live_workers(self.redis, prefix=self.prefix))

    def _refreshed(self, workers: tuple[str, ...]) -> dict[str, str]:
        raw = self.redis.get(self._keys.generation)
        stamp = (raw if isinstance(raw, bytes) else None, workers)
        with self._lock:
            if stamp != self._stamp:
                instances = registered_instances(self.redis, prefix=self.prefix, apps=self._apps)
                basis = (frozenset(instances), workers)
                if basis != self._basis:
                    self._map = assign(instances, list(workers))
                    self._basis = basis
                self._stamp = stamp
            return self._map
