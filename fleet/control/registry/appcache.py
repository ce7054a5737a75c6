"""Every app record in memory, kept current by reading only what changed since the last look.

A coordinator or a worker loops over all apps often (the scheduler's tick, the app list, push
matching): with 10,000 apps a full reload reads and decodes every record, and any registry write
(a sync request's app update, an app created by another replica) would force one. So each app
write also notes, in one sorted set, the registry generation it produces
(`<p>:registry:app-changes`, member the app name, score that generation); a cache that last
looked at generation G asks only for the apps scored above G and re-reads those. The set is
trimmed to the last `WINDOW` generations; a cache older than the trim (the floor,
`<p>:registry:app-changes-floor`), and every cache after a bulk write such as a registry import
(which raises the floor), reloads everything. Every note is written inside the registry write's
own transaction (`fleet.control.registry.transact`), which WATCHes the generation, so the score
is exactly the generation that write produces.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from collections.abc import Sequence

from redis import Redis
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.registry import compact, records
from fleet.control.registry.records import AppRecord

WINDOW = 100_000  # generations of app changes kept for incremental refreshes


def _next_generation(redis: Redis, keys: Keys) -> int:
    """The generation the running transaction will produce (its WATCH pins the current one)."""
    raw = redis.get(keys.generation)
    return int(raw) + 1 if isinstance(raw, bytes) else 1


def note_change(redis: Redis, keys: Keys, pipe: Pipeline, name: str) -> None:
    """Inside a registry write: app `name` was created, replaced or deleted."""
    note_changes(redis, keys, pipe, [name])


def note_changes(redis: Redis, keys: Keys, pipe: Pipeline, names: Sequence[str]) -> None:
    """Inside a registry write: the apps `names` were created, replaced or deleted."""
    generation = _next_generation(redis, keys)
    pipe.zadd(keys.app_changes, dict.fromkeys(names, generation))
    if generation % 1000 == 0:
        floor = generation - WINDOW
        if floor > 0:
            pipe.zremrangebyscore(keys.app_changes, "-inf", floor)
            raw = redis.get(keys.app_changes_floor)
            if floor > (int(raw) if isinstance(raw, bytes) else 0):  # never below a reload's
                pipe.set(keys.app_changes_floor, floor)


def note_bulk_change(redis: Redis, keys: Keys, pipe: Pipeline) -> None:
    """Inside a registry write that changed apps without noting each: every cache reloads."""
    pipe.set(keys.app_changes_floor, _next_generation(redis, keys))


class AppCache:
    """The app records of one registry, by name, refreshed on demand (thread-safe)."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self._generation: int | None = None
        self._by_name: dict[str, AppRecord] = {}
        self._names: list[str] = []  # sorted
        self._ordered: list[AppRecord] | None = []  # None: to be rebuilt from the names
        # per consumer of `changes()`: the names changed since its last call; None: everything
        self._changed: dict[int, set[str] | None] = {}
        self._consumers = 0
        self._lock = threading.Lock()

    def apps(self) -> list[AppRecord]:
        """Every app, by name, as of now (a copy the caller may keep)."""
        raw = self.redis.get(self.keys.generation)
        generation = int(raw) if isinstance(raw, bytes) else 0
        with self._lock:
            if generation != self._generation:
                self._refresh(generation)
            if self._ordered is None:  # rebuilt when asked, not at every write
                self._ordered = [self._by_name[n] for n in self._names]
            return list(self._ordered)

    def get(self, name: str, generation: int) -> AppRecord | None:
        """The app named `name` as of `generation` (read by the caller) or newer, or None when
        it is not registered then."""
        with self._lock:
            if generation != self._generation:
                self._refresh(generation)
            return self._by_name.get(name)

    def consumer(self) -> int:
        """A new reader of `changes()` (its first call answers every app); `drop` it when done."""
        with self._lock:
            self._consumers += 1
            self._changed[self._consumers] = None
            return self._consumers

    def drop(self, consumer: int) -> None:
        with self._lock:
            self._changed.pop(consumer, None)

    def changes(self, consumer: int) -> tuple[dict[str, AppRecord | None], bool]:
        """What changed since `consumer`'s previous call: (name -> record, None for a deleted
        app; True when that is every app, the first time and after a reload), such as
        `fleet.control.routing.owners.OwnerMap` reads."""
        raw = self.redis.get(self.keys.generation)
        generation = int(raw) if isinstance(raw, bytes) else 0
        with self._lock:
            if generation != self._generation:
                self._refresh(generation)
            changed = self._changed.get(consumer)
            self._changed[consumer] = set()
            if changed is None:
                return dict(self._by_name), True
            return {name: self._by_name.get(name) for name in changed}, False

    def _refresh(self, generation: int) -> None:
        since = self._generation
        if since is not None and generation < since:
            # a generation below the last one seen: mostly a reader that looked before another
            # reader's newer look (what is held is newer: keep it); but when Redis says so too,
            # the registry was written again from an older point (restored into a new Redis, a
            # failover that lost writes), and the changes noted since say nothing about it
            raw = self.redis.get(self.keys.generation)
            now = int(raw) if isinstance(raw, bytes) else 0
            if now >= since:
                return
            self._reload()
            self._generation = now
            return
        floor_raw = self.redis.get(self.keys.app_changes_floor)
        floor = int(floor_raw) if isinstance(floor_raw, bytes) else 0
        if since is None or since < floor:
            self._reload()
        else:
            changed = self.redis.zrangebyscore(self.keys.app_changes, f"({since}", "+inf")
            self._update([m.decode() for m in changed])  # type: ignore[union-attr]
        self._generation = generation

    def _reload(self) -> None:
        names = sorted(m.decode() for m in self.redis.smembers(self.keys.apps))  # type: ignore[union-attr]
        raws = self.redis.mget([self.keys.app(n) for n in names]) if names else []
        self._by_name = {}
        for name, raw in zip(names, raws, strict=True):
            if isinstance(raw, bytes):
                record = _parse(raw)
                # keyed by the record's own string when equal: one copy of each name
                self._by_name[record.name if record.name == name else name] = record
        self._names = list(self._by_name)
        self._ordered = list(self._by_name.values())
        self._changed = dict.fromkeys(self._changed)

    def _update(self, names: list[str]) -> None:
        if not names:
            return
        for changed in self._changed.values():
            if changed is not None:
                changed.update(names)
        raws = self.redis.mget([self.keys.app(n) for n in names])
        for name, raw in zip(names, raws, strict=True):
            known = name in self._by_name
            if isinstance(raw, bytes):
                self._by_name[name] = _parse(raw)
                if not known:
                    bisect.insort(self._names, name)
            elif known:
                del self._by_name[name]
                del self._names[bisect.bisect_left(self._names, name)]
        self._ordered = None


def _parse(raw: bytes) -> AppRecord:
    return compact.compact(records.from_json(AppRecord, raw))


_shared: weakref.WeakValueDictionary[tuple[int, str], AppCache] = weakref.WeakValueDictionary()
_shared_lock = threading.Lock()


def shared(redis: Redis, keys: Keys) -> AppCache:
    """This process's one cache of the registry behind `redis` (the same client object) and
    `keys`' prefix: the store and the owner maps of a worker or a coordinator read the same
    records, so each app is held in memory once, not once per reader (a parsed record is
    about 1.2 KB; at 10,000 apps a second and third copy were most of a process's growth)."""
    key = (id(redis), keys.p)
    with _shared_lock:
        cache = _shared.get(key)
        if cache is None or cache.redis is not redis:
            cache = _shared[key] = AppCache(redis, keys)
        return cache
