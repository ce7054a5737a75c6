"""Per-instance status, sync history, the last API operation, and the counters /metrics reads.

Workers write here after every sync, so nothing in this module takes part in the registry's
generation-guarded transactions (`fleet.control.registry.transact`): a status write never makes
an API request retry. A history record is pushed, trimmed and counted in one MULTI/EXEC, so the
counters behind /metrics always agree with the records that fed them, whichever coordinator
replica is scraped.

The records are typed (`fleet.control.registry.syncrecords`) and (de)serialised by pydantic;
`SyncLog` only stores, trims and counts them.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from redis import Redis
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.registry.syncrecords import (
    HISTORY,
    OPERATION,
    STATUS,
    InstanceStatus,
    Operation,
    SkipRecord,
    SyncRecord,
)
from fleet.control.registry.transact import now

DURATION_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class SyncLog:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    def set_status(self, app: str, cluster: str, status: InstanceStatus) -> None:
        """The current state of one instance, as the worker sees it, stamped `updated` now."""
        self.stage_status(self.redis, app, cluster, status)

    def stage_status(
        self, pipe: Redis | Pipeline, app: str, cluster: str, status: InstanceStatus
    ) -> None:
        """`set_status` as commands on `pipe` (a caller's MULTI/EXEC, e.g. a fenced write)."""
        stamped = replace(status, updated=datetime.fromisoformat(now()))
        pipe.hset(self.keys.status(app), cluster, STATUS.dump_json(stamped))

    def get_status(self, app: str, cluster: str) -> InstanceStatus | None:
        return parse_status(self.redis.hget(self.keys.status(app), cluster))

    def stage_get_status(self, pipe: Pipeline, app: str, cluster: str) -> None:
        """`get_status` as a command on `pipe`; `parse_status` reads its reply."""
        pipe.hget(self.keys.status(app), cluster)

    def many_statuses(self, instances: list[tuple[str, str]]) -> list[InstanceStatus | None]:
        return [parse_status(raw) for raw in self.raw_statuses(instances)]

    def raw_statuses(self, instances: list[tuple[str, str]]) -> list[bytes | None]:
        """The stored JSON of each (app, cluster)'s status, in one round trip: what a
        compare-and-set (`fleet.control.routing.checks`) compares against."""
        pipe = self.redis.pipeline(transaction=False)
        for app, cluster in instances:
            pipe.hget(self.keys.status(app), cluster)
        raws = pipe.execute() if instances else []
        return [raw if isinstance(raw, bytes) else None for raw in raws]

    def stamped(self, status: InstanceStatus, *, checked: datetime | None = None) -> bytes:
        """`status` as `stage_status` stores it (stamped `updated` now), for a caller that
        writes it itself; with `checked`, that stamp too (one copy of the status, not two)."""
        checked = status.checked if checked is None else checked
        return STATUS.dump_json(
            replace(status, updated=datetime.fromisoformat(now()), checked=checked)
        )

    def statuses(self, app: str) -> dict[str, InstanceStatus]:
        raw: dict[bytes, bytes] = self.redis.hgetall(self.keys.status(app))  # type: ignore[assignment]
        return {key.decode(): STATUS.validate_json(value) for key, value in raw.items()}

    def statuses_of(self, apps: list[str]) -> list[dict[str, InstanceStatus]]:
        """`statuses` of many apps in one round trip (a page of the app list)."""
        pipe = self.redis.pipeline(transaction=False)
        for app in apps:
            pipe.hgetall(self.keys.status(app))
        return [
            {key.decode(): STATUS.validate_json(value) for key, value in raw.items()}
            for raw in pipe.execute()
        ]

    def add_history(
        self, app: str, cluster: str, record: SyncRecord | SkipRecord, keep: int = 50
    ) -> None:
        """Keep a sync record (newest first, at most `keep`) and count it for the metrics."""
        pipe = self.redis.pipeline(transaction=True)
        self.stage_history(pipe, app, cluster, record, keep)
        pipe.execute()

    def stage_history(
        self,
        pipe: Pipeline,
        app: str,
        cluster: str,
        record: SyncRecord | SkipRecord,
        keep: int = 50,
    ) -> None:
        """`add_history` as commands on `pipe`, a MULTI/EXEC the caller executes."""
        key = self.keys.history(app, cluster)
        pipe.lpush(key, HISTORY.dump_json(record))
        pipe.ltrim(key, 0, keep - 1)
        self._count(pipe, record)

    def history(self, app: str, cluster: str, limit: int = 50) -> list[SyncRecord | SkipRecord]:
        key = self.keys.history(app, cluster)
        raw: list[bytes] = self.redis.lrange(key, 0, limit - 1)  # type: ignore[assignment]
        return [HISTORY.validate_json(item) for item in raw]

    def set_operation(self, app: str, operation: Operation) -> None:
        """The last operation requested through the API (sync, rollback, delete), stamped `at`
        now."""
        stamped = replace(operation, at=datetime.fromisoformat(now()))
        self.redis.set(self.keys.operation(app), OPERATION.dump_json(stamped))

    def get_operation(self, app: str) -> Operation | None:
        raw = self.redis.get(self.keys.operation(app))
        return OPERATION.validate_json(raw) if isinstance(raw, bytes) else None

    def _count(self, pipe: Pipeline, record: SyncRecord | SkipRecord) -> None:
        pipe.hincrby(self.keys.sync_counts, str(record.outcome), 1)
        seconds = record.seconds
        if seconds is not None:
            _observe(pipe, self.keys.sync_durations, seconds)
        stages = record.stages if isinstance(record, SyncRecord) else {}
        for stage, value in stages.items():
            _observe(pipe, self.keys.stage_durations(stage), value)

    def sync_counts(self) -> dict[str, int]:
        raw: dict[bytes, bytes] = self.redis.hgetall(self.keys.sync_counts)  # type: ignore[assignment]
        return {key.decode(): int(value) for key, value in raw.items()}

    def histogram(self, stage: str | None = None) -> dict[str, float]:
        """Raw buckets (non-cumulative) of whole syncs, or of one `stage` when given."""
        stored = self.keys.sync_durations if stage is None else self.keys.stage_durations(stage)
        raw: dict[bytes, bytes] = self.redis.hgetall(stored)  # type: ignore[assignment]
        return {key.decode(): float(value) for key, value in raw.items()}

    def stage_names(self) -> list[str]:
        prefix = self.keys.stage_durations("")
        names = self.redis.scan_iter(match=self.keys.stage_durations("*"), count=500)
        return sorted(n.decode().removeprefix(prefix) for n in names)


def parse_status(raw: Any) -> InstanceStatus | None:
    """A stored status (a reply of HGET), None when there is none."""
    return STATUS.validate_json(raw) if isinstance(raw, bytes) else None


def _observe(pipe: Pipeline, key: str, seconds: float) -> None:
    """Count `seconds` in its bucket and add it to the sum. No count is kept: it is the sum of
    the buckets (Prometheus's `_count` is the `+Inf` bucket), and eight more commands a sync."""
    bucket = next((str(b) for b in DURATION_BUCKETS if seconds <= b), "+Inf")
    pipe.hincrby(key, bucket, 1)
    pipe.hincrbyfloat(key, "sum", seconds)
