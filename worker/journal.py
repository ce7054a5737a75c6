"""A journal of the syncs each worker ran: instance, job, worker, start and end.

Tests (and a person debugging the shard map) need to know more than the last status: how many
times an instance really synced, on which worker, and whether two runs ever overlapped. Each
sync job appends one JSON entry to `<p>:journal` after its lease is released; the list is
trimmed to the newest `KEEP` entries so it never grows without bound. Start and end are wall
clock (epoch seconds) taken while the lease was held.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from pydantic import TypeAdapter
from redis import Redis

from fleet.control.keys import Keys
from fleet.control.registry.syncrecords import AnyTrigger
from fleet.model import Outcome

KEEP = 10_000


@dataclass(frozen=True)
class Entry:
    """instance: `app@cluster`. outcome: how `attempt` ended (succeeded, failed, skipped,
    unchanged, waiting or deleted). requests: how many triggers this one run answered (merged
    ones included)."""

    instance: str
    job_id: str
    worker: str
    start: float
    end: float
    trigger: AnyTrigger
    outcome: Outcome
    requests: int = 1


_ENTRY = TypeAdapter(Entry)


class Journal:
    def __init__(self, redis: Redis, *, prefix: str = "gitfleet") -> None:
        self.redis = redis
        self.key = Keys(prefix).journal

    def record(self, entry: Entry) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.rpush(self.key, _ENTRY.dump_json(entry))
        pipe.ltrim(self.key, -KEEP, -1)
        pipe.execute()

    def entries(self) -> list[Entry]:
        raw: list[bytes] = self.redis.lrange(self.key, 0, -1)  # type: ignore[assignment]
        return [_ENTRY.validate_json(item) for item in raw]


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
