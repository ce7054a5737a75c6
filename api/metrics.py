"""Prometheus metrics, read from Redis at scrape time.

The coordinator is stateless and may run as several replicas, so nothing is counted in this
process: every figure comes from Redis when /metrics is scraped, and every replica reports the
same numbers. Sync counts and duration histograms are fed by the sync records the workers add
(`fleet.control.registry.status`, updated in the same transaction as the history); app statuses,
queue depths and the shard map are read as they are now.

- gitfleet_syncs_total{result}                   syncs recorded, by succeeded/failed
- gitfleet_sync_duration_seconds                 histogram of whole syncs
- gitfleet_stage_duration_seconds{stage}         histogram per stage, when records carry `stages`
- gitfleet_apps{sync_status,health}              applications by folded status (`api.views`)
- gitfleet_queue_depth{queue}                    jobs waiting in each RQ queue (one per shard)
- gitfleet_worker_apps{worker}                   app instances (app@cluster, the unit of sharding)
                                                 the shard map gives each live worker
- gitfleet_workers, gitfleet_clusters            live workers, registered clusters
- gitfleet_commit_to_healthy_seconds{app,cluster}  histogram from a commit's push (webhook
                                                 receipt, or the sync that found it) to the
                                                 instance Synced and Healthy at it
                                                 (`fleet.control.commitclock`): one series set
                                                 per app instance, deleted apps left out
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from rq import Queue

from api.views import summaries
from fleet.control.commitclock import CommitClock
from fleet.control.commitclock import cumulative as commit_buckets
from fleet.control.registry.instances import split_instance
from fleet.control.registry.status import DURATION_BUCKETS
from fleet.control.registry.store import Store
from fleet.control.routing.owners import OwnerMap
from fleet.control.routing.sharding import NoWorkers


class FleetCollector(Collector):
    def __init__(self, store: Store) -> None:
        self.store = store
        self.owners = OwnerMap(store.redis, prefix=store.keys.p)

    def collect(self) -> Iterator[Metric]:
        yield self._syncs()
        yield self._histogram("gitfleet_sync_duration_seconds", "Sync duration")
        yield self._stages()
        yield self._apps()
        yield self._queues()
        yield from self._workers()
        yield self._commit_to_healthy()

    def _syncs(self) -> Metric:
        family = CounterMetricFamily(
            "gitfleet_syncs", "Syncs recorded, by result", labels=["result"]
        )
        for result, count in sorted(self.store.log.sync_counts().items()):
            family.add_metric([result], count)
        return family

    def _histogram(self, name: str, doc: str) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, doc)
        family.add_metric([], *cumulative(self.store.log.histogram()))
        return family

    def _stages(self) -> Metric:
        family = HistogramMetricFamily(
            "gitfleet_stage_duration_seconds", "Duration of each sync stage", labels=["stage"]
        )
        for stage in self.store.log.stage_names():
            raw = self.store.log.histogram(stage)
            family.add_metric([stage], *cumulative(raw))
        return family

    def _commit_to_healthy(self) -> Metric:
        family = HistogramMetricFamily(
            "gitfleet_commit_to_healthy_seconds",
            "Seconds from a commit's push to the instance being Synced and Healthy at it",
            labels=["app", "cluster"],
        )
        apps = {app.name for app in self.store.list_apps_cached()}
        for instance, raw in CommitClock(self.store.redis, self.store.keys).histograms().items():
            app, cluster = split_instance(instance)
            if app in apps:
                family.add_metric([app, cluster], *commit_buckets(raw))
        return family

    def _apps(self) -> Metric:
        counts: Counter[tuple[str, str]] = Counter()
        for app in summaries(self.store, self.store.list_apps_cached()):
            counts[(str(app.sync_status), str(app.health))] += 1
        family = GaugeMetricFamily(
            "gitfleet_apps",
            "Applications by sync status and health",
            labels=["sync_status", "health"],
        )
        for (sync, health), count in sorted(counts.items()):
            family.add_metric([sync, health], count)
        return family

    def _queues(self) -> Metric:
        family = GaugeMetricFamily(
            "gitfleet_queue_depth", "Jobs waiting per queue", labels=["queue"]
        )
        for queue in sorted(Queue.all(connection=self.store.redis), key=lambda q: q.name):
            family.add_metric([queue.name], queue.count)
        return family

    def _workers(self) -> Iterator[Metric]:
        live = self.owners.live()
        yield GaugeMetricFamily("gitfleet_workers", "Live workers", value=len(live))
        yield GaugeMetricFamily(
            "gitfleet_clusters", "Registered clusters", value=len(self.store.list_clusters())
        )
        family = GaugeMetricFamily("gitfleet_worker_apps", "Apps per worker", labels=["worker"])
        try:
            shard = self.owners.current()
        except NoWorkers:
            shard = {}
        per_worker = Counter(shard.values())
        for worker in live:
            family.add_metric([worker], per_worker[worker])
        yield family


def cumulative(raw: dict[str, float]) -> tuple[list[tuple[str, float]], float]:
    """Prometheus buckets (cumulative, ending in +Inf) and the sum, from stored counts."""
    buckets, total = [], 0.0
    for bound in [str(b) for b in DURATION_BUCKETS] + ["+Inf"]:
        total += raw.get(bound, 0.0)
        buckets.append((bound, total))
    return buckets, raw.get("sum", 0.0)


def registry_for(store: Store) -> CollectorRegistry:
    """A registry of our own, so several apps in one process (tests) never collide."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(store))
    return registry
