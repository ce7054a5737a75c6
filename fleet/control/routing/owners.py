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
import weakref
from collections.abc import Callable

from redis import Redis

from fleet.control.keys import Keys
from fleet.control.registry import appcache, records
from fleet.control.registry.appcache import AppCache
from fleet.control.registry.instances import clusters_for, instance_key
from fleet.control.registry.records import AppRecord, ClusterRecord
from fleet.control.routing import membership
from fleet.control.routing.sharding import Placement

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
    changed, a sync requested) costs reading the apps written since the last look. One that
    adds or removes instances (an app created or deleted) updates the map in place
    (`fleet.control.routing.sharding.Placement`: exact, and a full recomputation only when a
    worker is near its capacity); a change of the live workers or of the clusters recomputes
    it. The instances of each app are remembered, and the map's own app cache says which apps
    were written since its last look, so a change costs the apps that changed, not a pass over
    every app's destinations."""

    def __init__(self, redis: Redis, *, prefix: str = "gitfleet") -> None:
        self.redis = redis
        self.prefix = prefix
        self._keys = Keys(prefix)
        self._apps = appcache.shared(redis, self._keys)
        self._consumer = self._apps.consumer()
        weakref.finalize(self, self._apps.drop, self._consumer)
        self._lock = threading.Lock()
        self._stamp: tuple[bytes | None, tuple[str, ...]] | None = None
        self._clusters: tuple[bytes, ...] | None = None
        self._of_app: dict[str, tuple[str, ...]] = {}  # app -> its instances
        self._placement: Placement | None = None

    def owner(self, instance: str) -> str:
        """The live worker that owns `instance`; `NoWorkers` when none is live."""
        workers, generation = self._look()
        with self._lock:
            return self._refreshed(workers, generation).owner_if_added(instance)

    def current(self) -> dict[str, str]:
        """instance -> worker for every registered instance; `NoWorkers` when none is live."""
        workers, generation = self._look()
        with self._lock:
            return dict(self._refreshed(workers, generation).placed)

    def current_if_changed(self, since: object) -> tuple[object, dict[str, str] | None]:
        """(the map's stamp, instance -> worker), the map left out (None) when its stamp is
        still `since`: a caller that keeps the map it got skips a copy of every instance.
        The stamp changes with the registry generation and the live workers."""
        workers, generation = self._look()
        with self._lock:
            placement = self._refreshed(workers, generation)
            stamp = self._stamp
            return stamp, (None if since is not None and stamp == since else dict(placement.placed))

    def live(self) -> tuple[str, ...]:
        return tuple(membership.live_workers(self.redis, prefix=self.prefix))

    def _look(self) -> tuple[tuple[str, ...], bytes | None]:
        """The live workers (`live`) and the registry generation, in one round trip."""
        return membership.live_workers_and(self.redis, self._keys.generation, prefix=self.prefix)

    def _refreshed(self, workers: tuple[str, ...], generation: bytes | None) -> Placement:
        """The placement as of `generation` and `workers`, read just before (called with the
        lock held)."""
        stamp = (generation, workers)
        placement = self._placement
        if stamp == self._stamp and placement is not None:
            return placement
        rebuild = placement is None or placement.workers != workers
        raws = tuple(_load(self.redis, self._keys.clusters, self._keys.cluster))
        clusters = [records.from_json(ClusterRecord, r) for r in raws]
        changed, everything = self._apps.changes(self._consumer)
        if raws != self._clusters:  # destinations may match other clusters: start over
            if not everything:
                changed, everything = {a.name: a for a in self._apps.apps()}, True
            self._clusters = raws
        if everything:
            self._of_app, rebuild = {}, True
        added, removed = self._changed(changed, clusters)
        if rebuild or placement is None:
            instances = [i for of in self._of_app.values() for i in of]
            placement = Placement(instances, workers)
        else:
            placement.update(added, removed)
        self._placement, self._stamp = placement, stamp
        return placement

    def _changed(
        self, changed: dict[str, AppRecord | None], clusters: list[ClusterRecord]
    ) -> tuple[list[str], list[str]]:
        """Instances added and removed by the `changed` apps (None: deleted); remembers each
        app's instances."""
        added: list[str] = []
        removed: list[str] = []
        for name, app in changed.items():
            old = self._of_app.pop(name, ())
            now: tuple[str, ...] = ()
            if app is not None:
                now = tuple(instance_key(name, c) for c in clusters_for(app, clusters))
                self._of_app[name] = now
            added += [i for i in now if i not in old]
            removed += [i for i in old if i not in now]
        return added, removed
