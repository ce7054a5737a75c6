"""Which workers are alive: a registry of heartbeats with a TTL in Redis, and the shard map over it.

A worker registers with a TTL and heartbeats well within it (say every ttl/3). A worker that
stops heartbeating (crash, partition, SIGKILL) drops out once its TTL passes, and `shard_map`
hands its applications to the others; the per-application lease (`fleet.control.routing.leases`)
keeps a slow old owner and the new one from syncing the same application at once.

Layout (`fleet.control.keys`): one sorted set `<p>:workers` whose score is each worker's
*deadline* in milliseconds, and one `<p>:worker:<name>` string with the worker's metadata
(JSON), which expires on its own. We chose this over per-worker keys with EXPIRE plus a set of
names because:

- Listing live workers is one ZRANGEBYSCORE over deadlines instead of SMEMBERS plus an EXISTS
  per worker, and a stale name never lingers in an index that nothing cleans up.
- Storing the deadline, not the last-seen time, lets each worker choose its own TTL.
- Every timestamp comes from the Redis server's TIME inside a Lua script, so clock skew between
  workers and the coordinator cannot make a live worker look dead or a dead one alive.

A heartbeat from a worker that already expired is refused (it returns False) rather than quietly
reviving it: its applications may already be owned by others, so it must `register` again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from redis import Redis

from fleet.control.keys import Keys
from fleet.control.routing.sharding import DEFAULT_LOAD_FACTOR, assign

_NOW_MS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

_REGISTER = (
    _NOW_MS
    + """
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
return 1
"""
)

_HEARTBEAT = (
    _NOW_MS
    + """
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not deadline or tonumber(deadline) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""
)

_PRUNED_LIVE = (
    _NOW_MS
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
"""
)
_LIVE = _PRUNED_LIVE + "return live\n"


_LIVE_AND_GET = _PRUNED_LIVE + "return {live, redis.call('GET', KEYS[2])}\n"


def _keys(worker: str, prefix: str) -> list[str]:
    if not worker:
        raise ValueError("worker: the name must not be empty")
    keys = Keys(prefix)
    return [keys.workers, keys.worker(worker)]


def _millis(ttl: float) -> int:
    if ttl <= 0:
        raise ValueError(f"ttl: must be positive seconds, got {ttl}")
    return max(1, round(ttl * 1000))


def register(
    redis: Redis,
    worker: str,
    *,
    ttl: float,
    meta: Mapping[str, Any],
    prefix: str = "gitfleet",
) -> None:
    """Add (or re-add) `worker` as live for `ttl` seconds, with `meta` (JSON-serialisable)."""
    script = redis.register_script(_REGISTER)
    script(keys=_keys(worker, prefix), args=[worker, _millis(ttl), json.dumps(dict(meta))])


def heartbeat(redis: Redis, worker: str, *, ttl: float, prefix: str = "gitfleet") -> bool:
    """Extend a live worker by `ttl` seconds; False if it had expired or was never registered."""
    script = redis.register_script(_HEARTBEAT)
    return bool(script(keys=_keys(worker, prefix), args=[worker, _millis(ttl)]))


def deregister(redis: Redis, worker: str, *, prefix: str = "gitfleet") -> bool:
    """Remove `worker` at once (a clean shutdown); False if it was not registered."""
    workers_key, meta_key = _keys(worker, prefix)
    pipe = redis.pipeline()
    pipe.zrem(workers_key, worker)
    pipe.delete(meta_key)
    removed, _ = pipe.execute()
    return bool(removed)


def live_workers(redis: Redis, *, prefix: str = "gitfleet") -> list[str]:
    """Names of the workers whose TTL has not passed, sorted; expired entries are pruned."""
    script = redis.register_script(_LIVE)
    return list(worker_names(script(keys=[Keys(prefix).workers], args=[])))


def live_workers_and(
    redis: Redis, key: str, *, prefix: str = "gitfleet"
) -> tuple[tuple[str, ...], bytes | None]:
    """`live_workers` and the value of string `key`, in one script call: one round trip (a
    pipeline would add redis-py's SCRIPT EXISTS before every execute)."""
    script = redis.register_script(_LIVE_AND_GET)
    names, value = script(keys=[Keys(prefix).workers, key], args=[])
    return worker_names(names), value if isinstance(value, bytes) else None


def worker_names(reply: Any) -> tuple[str, ...]:
    """The sorted names in a reply of the live-workers script."""
    return tuple(sorted(n.decode() if isinstance(n, bytes) else str(n) for n in reply))


def worker_meta(redis: Redis, worker: str, *, prefix: str = "gitfleet") -> dict[str, Any] | None:
    """The metadata a live worker registered with, or None once it expired or left."""
    raw = redis.get(Keys(prefix).worker(worker))
    if raw is None:
        return None
    meta: dict[str, Any] = json.loads(raw)
    return meta


def shard_map(
    redis: Redis,
    apps: Sequence[str],
    *,
    c: float = DEFAULT_LOAD_FACTOR,
    prefix: str = "gitfleet",
) -> dict[str, str]:
    """Assign `apps` to the live workers (`fleet.control.routing.sharding.assign`); NoWorkers if
    none is live."""
    return assign(apps, live_workers(redis, prefix=prefix), c=c)
