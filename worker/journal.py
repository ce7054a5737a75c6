"""A journal of the syncs each worker ran: instance, job, worker, start and end.

Tests (and a person debugging the shard map) need to know more than the last status: how many
times an instance really synced, on which worker, and whether two runs ever overlapped. Each
sync job appends one JSON entry to `<prefix>:journal` after its lease is released; the list is
trimmed to the newest `KEEP` entries so it never grows without bound. Start and end are wall
clock (epoch seconds) taken while the lease was held.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict, dataclass
from typing import Any

from redis import Redis

KEEP = 10_000


@dataclass(frozen=True)
class Entry:
    """instance: `app@cluster`. outcome: succeeded, failed, skipped, waiting or deleted.
    requests: how many triggers this one run answered (merged ones included)."""

    instance: str
    job_id: str
    worker: str
    start: float
    end: float
    trigger: str
    outcome: str
    requests: int = 1


class Journal:
    def __init__(self, redis: Redis, *, prefix: str = "gitfleet") -> None:
        self.redis = redis
        self.key = f"{prefix}:journal"

    def record(self, entry: Entry) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.rpush(self.key, json.dumps(asdict(entry)))
        pipe.ltrim(self.key, -KEEP, -1)
        pipe.execute()

    def entries(self) -> list[Entry]:
        raw: list[bytes] = self.redis.lrange(self.key, 0, -1)  # type: ignore[assignment]
        return [Entry(**_fields(json.loads(item))) for item in raw]


def _fields(data: dict[str, Any]) -> dict[str, Any]:
    known = Entry.__dataclass_fields__
    return {k: v for k, v in data.items() if k in known}


def overlaps(entries: list[Entry]) -> list[tuple[Entry, Entry]]:
    """Pairs of entries of the same instance whose [start, end] intervals intersect."""
    found = []
    by_instance: dict[str, list[Entry]] = {}
    for entry in entries:
        by_instance.setdefault(entry.instance, []).append(entry)
    for runs in by_instance.values():
        ordered = sorted(runs, key=lambda e: e.start)
        found += [(a, b) for a, b in itertools.pairwise(ordered) if b.start < a.end]
    return found
