"""Per-instance status, sync history, the last API operation, and the counters /metrics reads.

Workers write here after every sync, so nothing in this module takes part in the registry's
generation-guarded transactions (`fleet.control.keys.transact`): a status write never makes an
API request retry. A history record is pushed, trimmed and counted in one MULTI/EXEC, so the
counters behind /metrics always agree with the records that fed them, whichever coordinator
replica is scraped.

A sync record is `SyncResult.to_json()` plus what the worker knows: `cluster`, `trigger`, and,
when available, `stages` ({stage: seconds}) and `result` (`succeeded` / `failed`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from redis import Redis
from redis.client import Pipeline

from fleet.control.keys import Keys, now

DURATION_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class SyncLog:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    def set_status(self, app: str, cluster: str, status: dict[str, Any]) -> None:
        """The current state of one instance, as the worker sees it.

        Expected keys: sync_status, health, revision, last_sync (the last sync record, with its
        trace_id), resources (per-object results), message. `updated` is added here."""
        self.redis.hset(self.keys.status(app), cluster, json.dumps({**status, "updated": now()}))

    def get_status(self, app: str, cluster: str) -> dict[str, Any] | None:
        raw = self.redis.hget(self.keys.status(app), cluster)
        return json.loads(raw) if isinstance(raw, bytes) else None

    def many_statuses(self, instances: list[tuple[str, str]]) -> list[dict[str, Any] | None]:
        pipe = self.redis.pipeline(transaction=False)
        for app, cluster in instances:
            pipe.hget(self.keys.status(app), cluster)
        raws = pipe.execute() if instances else []
        return [json.loads(raw) if isinstance(raw, bytes) else None for raw in raws]

    def statuses(self, app: str) -> dict[str, dict[str, Any]]:
        raw: dict[bytes, bytes] = self.redis.hgetall(self.keys.status(app))  # type: ignore[assignment]
        return {key.decode(): json.loads(value) for key, value in raw.items()}

    def add_history(self, app: str, cluster: str, record: dict[str, Any], keep: int = 50) -> None:
        """Keep a sync record (newest first, at most `keep`) and count it for the metrics."""
        key = self.keys.history(app, cluster)
        pipe = self.redis.pipeline(transaction=True)
        pipe.lpush(key, json.dumps(record))
        pipe.ltrim(key, 0, keep - 1)
        self._count(pipe, record)
        pipe.execute()

    def history(self, app: str, cluster: str, limit: int = 50) -> list[dict[str, Any]]:
        key = self.keys.history(app, cluster)
        raw: list[bytes] = self.redis.lrange(key, 0, limit - 1)  # type: ignore[assignment]
        return [json.loads(item) for item in raw]

    def set_operation(self, app: str, operation: dict[str, Any]) -> None:
        """The last operation requested through the API (sync, rollback, delete)."""
        self.redis.set(self.keys.operation(app), json.dumps({**operation, "at": now()}))

    def get_operation(self, app: str) -> dict[str, Any] | None:
        raw = self.redis.get(self.keys.operation(app))
        return json.loads(raw) if isinstance(raw, bytes) else None

    def _count(self, pipe: Pipeline, record: dict[str, Any]) -> None:
        pipe.hincrby(self.keys.stats("syncs"), sync_result(record), 1)
        seconds = sync_seconds(record)
        if seconds is not None:
            _observe(pipe, self.keys.stats("duration:sync"), seconds)
        stages = record.get("stages")
        for stage, value in (stages if isinstance(stages, dict) else {}).items():
            if isinstance(value, int | float):
                _observe(pipe, self.keys.stats(f"duration:stage:{stage}"), float(value))

    def sync_counts(self) -> dict[str, int]:
        raw: dict[bytes, bytes] = self.redis.hgetall(self.keys.stats("syncs"))  # type: ignore[assignment]
        return {key.decode(): int(value) for key, value in raw.items()}

    def histogram(self, name: str) -> dict[str, float]:
        """Raw buckets of `duration:sync` or `duration:stage:<stage>` (non-cumulative)."""
        raw: dict[bytes, bytes] = self.redis.hgetall(self.keys.stats(name))  # type: ignore[assignment]
        return {key.decode(): float(value) for key, value in raw.items()}

    def stage_names(self) -> list[str]:
        prefix = self.keys.stats("duration:stage:")
        names = self.redis.scan_iter(match=f"{prefix}*", count=500)
        return sorted(n.decode().removeprefix(prefix) for n in names)


def sync_result(record: dict[str, Any]) -> str:
    """`succeeded` or `failed`, from a sync record."""
    if record.get("result"):
        return str(record["result"])
    ok = not record.get("error") and record.get("sync_status") == "Synced"
    return "succeeded" if ok else "failed"


def sync_seconds(record: dict[str, Any]) -> float | None:
    if isinstance(record.get("duration_s"), int | float):
        return float(record["duration_s"])
    try:
        started = datetime.fromisoformat(str(record["started"]))
        finished = datetime.fromisoformat(str(record["finished"]))
    except (KeyError, ValueError):
        return None
    return (finished - started).total_seconds()


def _observe(pipe: Pipeline, key: str, seconds: float) -> None:
    bucket = next((str(b) for b in DURATION_BUCKETS if seconds <= b), "+Inf")
    pipe.hincrby(key, bucket, 1)
    pipe.hincrbyfloat(key, "sum", seconds)
    pipe.hincrby(key, "count", 1)
