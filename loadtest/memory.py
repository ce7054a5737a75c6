"""Phase 7a: memory per cached live object, in the workers and in one watch cache alone.

The workers keep every live object their self-heal watches see (`fleet.kube.watch.Watch`, one per
cluster and kind, holding a compact form of each object, packed: `Packer`). Their RSS is sampled,
with the number of objects those caches hold, when a quarter of the cold sync is done and again
after it, so the fixed costs a fresh process pays at its first syncs (imports, connection pools,
the git pack) fall outside the difference. The same cache is also built here, in the bench
process, under tracemalloc: the Python heap one cached object takes, without anything else
around it.

The headline `bytes_per_cached_object` is the tracemalloc figure: it is what the issue asks
about, the memory a cached live object costs. The RSS figure
(`worker_rss_bytes_per_cached_object`) is reported beside it because a person sizing a worker
needs it, but it also holds the worker's other per-app state (app records, statuses, the owner
map, parsed git trees, allocator slack), which grows with the apps, not with cached objects.
"""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc

from fleet.control.registry.instances import split_instance
from fleet.control.routing.owners import OwnerMap
from fleet.engine.plan.tracking import APP_LABEL
from fleet.kube.watch import Watch
from loadtest.context import Run, wait_until
from loadtest.fleetrun import PREFIX
from loadtest.probes import rss_bytes

SAMPLE_AT = 0.25  # share of the cold sync done when the first sample is taken


class MemorySampler:
    """Worker RSS and the live objects each worker's watches cache, sampled once a quarter of
    the cold sync is done and again at its end: the growth between the two samples over the
    objects added to the caches is the memory per cached object, without the fixed costs a
    fresh process pays at its first syncs (imports, connection pools, the git pack)."""

    def __init__(self, run: Run, *, settle: float) -> None:
        self.run = run
        self.settle = settle
        self.first: dict[str, tuple[int, int]] | None = None

    def progress(self, done: int, total: int) -> None:
        if self.first is None and done >= SAMPLE_AT * total:
            self.first = self.sample()

    def sample(self) -> dict[str, tuple[int, int]]:
        """worker -> (RSS bytes, live objects its watches cache)."""
        run = self.run
        labelled = {
            name: len(kube.list("v1", "ConfigMap", label_selector=APP_LABEL))
            for name, kube in run.clients.items()
        }
        owners = OwnerMap(run.fleet.redis, prefix=PREFIX).current()
        found = {}
        for name, proc in run.fleet.workers().items():
            clusters = {split_instance(i)[1] for i, w in owners.items() if w == name}
            found[name] = (rss_bytes(proc.pid), sum(labelled[c] for c in clusters))
        return found

    def finish(self) -> None:
        run = self.run
        time.sleep(self.settle)
        last, first = self.sample(), self.first or {}
        ratios, per_worker = [], {}
        for name, (rss, cached) in last.items():
            rss0, cached0 = first.get(name, (rss, cached))
            per_worker[name] = {"rss": [rss0, rss], "cached_objects": [cached0, cached]}
            if cached > cached0:
                ratios.append((rss - rss0) / (cached - cached0))
        unit = "bytes of worker RSS growth per live object added to its watch caches (all of a "
        unit += "worker's per-app state: app records, statuses, owner map, git trees, watch cache)"
        run.add("worker_rss_bytes_per_cached_object", sum(ratios) / max(len(ratios), 1), unit)
        first_cluster = run.entries[0]["name"]
        expected = len(run.clients[first_cluster].list("v1", "ConfigMap", label_selector=APP_LABEL))
        traced = watch_cache_bytes(run, first_cluster, expected)
        unit = "bytes (tracemalloc of one fleet.kube.watch.Watch cache, built in the bench process)"
        run.add("bytes_per_cached_object", traced, unit)
        run.details["memory"] = {"per_worker": per_worker, "sampled_at_share": SAMPLE_AT}


def watch_cache_bytes(run: Run, cluster: str, expected: int) -> float:
    """Python heap held per object by a `fleet.kube.watch.Watch` cache of `cluster`'s objects."""
    kube = run.clients[cluster]
    resource = kube.resource_for("v1", "ConfigMap")
    watch = Watch(kube.config, resource, label_selector=APP_LABEL)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    thread = threading.Thread(target=watch.run, args=(lambda event: None,), daemon=True)
    thread.start()
    try:
        what = f"a watch cache of {expected} objects"
        wait_until(lambda: len(watch.cache) >= expected, timeout=300, what=what, period=0.1)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - base
        return used / max(len(watch.cache), 1)
    finally:
        tracemalloc.stop()
        watch.stop()
        thread.join(timeout=10)
