"""The commit-to-healthy clock: seconds from a commit being pushed to an instance being Synced
and Healthy at it, as a histogram per app and cluster for /metrics.

The clock of a revision starts when the fleet first learnt of it:

- a push webhook's receipt (`pushed`, called by `api.routes.webhooks` for the push's `after`
  commit; `<p>:commit-clock:pushed:<repo>`, revision -> Unix time, the first receipt kept);
- else the start of the sync that first found it (an interval poll, a manual sync).

`observe` runs after a worker writes an instance's status (`worker.status.write_sync`): when the
status names a revision the instance's clock does not hold yet, the clock restarts at that
revision's start; when the status is Synced and Healthy and the clock has not stopped, it stops
and the elapsed seconds go into `<p>:commit-clock:stats:<app@cluster>` (bucket counts, `sum`,
`count`), listed in `<p>:commit-clock:stats`. One observation per instance and revision.

Cardinality: one histogram series set (12 buckets + sum + count) per app instance (app x
cluster); a fleet of 1,000 instances exports 14,000 series. The series of a deleted app are left
out of /metrics (`api.metrics`); its few Redis hashes stay until the prefix is cleared.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from redis import Redis
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.registry.instances import instance_key
from fleet.model import Health, SyncStatus

BUCKETS = (5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0)
PUSH_TTL = 7 * 24 * 3600  # seconds a push's receipt time is kept


@dataclass(frozen=True)
class Clock:
    revision: str
    since: float
    stopped: bool = False


class CommitClock:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    def pushed(self, repos: Iterable[str], revision: str, at: float | None = None) -> None:
        """A push naming `revision` of each normalized repo in `repos` was received at `at`."""
        at = time.time() if at is None else at
        pipe = self.redis.pipeline(transaction=False)
        for repo in repos:
            key = self.keys.commit_clock(f"pushed:{repo}")
            pipe.hsetnx(key, revision, at)
            pipe.expire(key, PUSH_TTL)
        pipe.execute()

    def read_clock(self, pipe: Pipeline, app: str, cluster: str) -> None:
        """Stage the read `observe` makes on `pipe`; pass `(its reply,)` as `read`."""
        pipe.hget(self.keys.commit_clock(f"since:{app}"), cluster)

    def observe(
        self,
        app: str,
        cluster: str,
        *,
        repo: str,
        revision: str,
        sync_status: SyncStatus,
        health: Health,
        started: datetime | None,
        read: tuple[bytes | None] | None = None,
    ) -> float | None:
        """Advance the instance's clock after a status write; the seconds observed, if any.
        `read`: the reply of `read_clock`, read before the write (None: read here)."""
        if not revision:
            return None
        since_key = self.keys.commit_clock(f"since:{app}")
        raw = read[0] if read is not None else self.redis.hget(since_key, cluster)
        clock = Clock(**json.loads(raw)) if isinstance(raw, bytes) else None
        known = clock
        if clock is None or clock.revision != revision:
            pushed = self.redis.hget(self.keys.commit_clock(f"pushed:{repo}"), revision)
            start = started.timestamp() if started else time.time()
            since = float(pushed) if isinstance(pushed, bytes) else start
            clock = Clock(revision, min(since, start))
        healthy = sync_status == SyncStatus.SYNCED and health == Health.HEALTHY
        if clock == known and (clock.stopped or not healthy):
            return None  # nothing new: no write
        seconds = None
        pipe = self.redis.pipeline(transaction=True)
        if healthy and not clock.stopped:
            seconds = max(0.0, time.time() - clock.since)
            clock = Clock(clock.revision, clock.since, True)
            instance = instance_key(app, cluster)
            stats = self.keys.commit_clock(f"stats:{instance}")
            bucket = next((str(b) for b in BUCKETS if seconds <= b), "+Inf")
            pipe.sadd(self.keys.commit_clock("stats"), instance)
            pipe.hincrby(stats, bucket, 1)
            pipe.hincrbyfloat(stats, "sum", seconds)
            pipe.hincrby(stats, "count", 1)
        pipe.hset(since_key, cluster, json.dumps(clock.__dict__))
        pipe.execute()
        return seconds

    def histograms(self) -> dict[str, dict[str, float]]:
        """instance (app@cluster) -> raw (non-cumulative) bucket counts, `sum` and `count`."""
        instances = sorted(m.decode() for m in self.redis.smembers(self.keys.commit_clock("stats")))  # type: ignore[union-attr]
        pipe = self.redis.pipeline(transaction=False)
        for instance in instances:
            pipe.hgetall(self.keys.commit_clock(f"stats:{instance}"))
        raws = pipe.execute() if instances else []
        return {
            instance: {k.decode(): float(v) for k, v in raw.items()}
            for instance, raw in zip(instances, raws, strict=True)
        }


def cumulative(raw: dict[str, float]) -> tuple[list[tuple[str, float]], float]:
    """Prometheus buckets (cumulative, ending in +Inf) and the sum, from stored counts."""
    buckets, total = [], 0.0
    for bound in [str(b) for b in BUCKETS] + ["+Inf"]:
        total += raw.get(bound, 0.0)
        buckets.append((bound, total))
    return buckets, raw.get("sum", 0.0)
