"""Per-application leases in Redis: at most one sync of an application at a time.

The shard map says which worker *should* sync an application, but maps change while syncs run:
during a join or leave, the old and the new owner may both believe the application is theirs.
The lease is what makes that safe. A sync takes `<p>:lease:<app@cluster>` (`Keys.lease`) with
SET NX PX before it touches the cluster and keeps renewing it while it runs; another worker
finds it taken and backs off.

- Only the holder may renew or release. Each is a compare-and-act, so it runs as a small Lua
  script: a GET followed by a separate PEXPIRE/DEL could act on a lease that expired and was
  taken by someone else in between.
- Expiry is Redis's PX TTL, measured by the Redis server alone, so worker clocks never matter.
- `Lease.held` renews in a background thread every ttl/3. A renewal that is refused means the
  lease expired or was taken: the holder is told through `HeldLease.lost` / `check()`, and
  leaving the block raises `LeaseLost`, so the loss is never silent. A Redis error during a
  renewal is retried on the next tick for as long as the lease can still be valid.

The sync pipeline never imports this module; the worker wraps a sync in `held`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from redis import Redis, RedisError

from fleet.errors import FleetError

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class LeaseBusy(FleetError):
    """Another holder has the application's lease; retry after it finishes."""

    stage = "lease"
    retryable = True


class LeaseLost(FleetError):
    """The lease expired or was taken while we held it; another sync may have run alongside."""

    stage = "lease"
    retryable = True


def _millis(ttl: float) -> int:
    if ttl <= 0:
        raise ValueError(f"ttl: must be positive seconds, got {ttl}")
    return max(1, round(ttl * 1000))


class Lease:
    """Leases by name, each stored under the key `key_of(name)` gives: `Keys.lease` for
    application instances, `Keys.scheduler_lease` for the scheduler's lock."""

    def __init__(self, redis: Redis, key_of: Callable[[str], str]) -> None:
        self.redis = redis
        self.key_of = key_of
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    def key(self, app: str) -> str:
        return self.key_of(app)

    def acquire(self, app: str, holder: str, ttl: float) -> bool:
        """Take the lease for `ttl` seconds if nobody holds it."""
        return bool(self.redis.set(self.key(app), holder, nx=True, px=_millis(ttl)))

    def renew(self, app: str, holder: str, ttl: float) -> bool:
        """Reset the lease's expiry to `ttl` seconds from now, only if `holder` still holds it."""
        return bool(self._renew(keys=[self.key(app)], args=[holder, _millis(ttl)]))

    def release(self, app: str, holder: str) -> bool:
        """Give the lease up, only if `holder` holds it; False when someone else does."""
        return bool(self._release(keys=[self.key(app)], args=[holder]))

    def holder(self, app: str) -> str | None:
        value = self.redis.get(self.key(app))
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    @contextmanager
    def held(self, app: str, holder: str, ttl: float) -> Iterator[HeldLease]:
        """Hold the lease for the duration of the block, renewing it every ttl/3.

        Raises `LeaseBusy` when someone else holds it, and `LeaseLost` on leaving the block
        when the lease was lost meanwhile (unless the block itself raised).
        """
        asked = time.monotonic()
        if not self.acquire(app, holder, ttl):
            raise LeaseBusy(f"{app}: lease is held by {self.holder(app) or 'another holder'}")
        keeper = HeldLease(self, app, holder, ttl, valid_until=asked + ttl)
        keeper.start()
        try:
            yield keeper
        finally:
            keeper.stop()
            self.release(app, holder)
        keeper.check()


class HeldLease:
    """A lease kept alive by a background thread; ask `lost` or call `check()` between steps."""

    def __init__(
        self, lease: Lease, app: str, holder: str, ttl: float, *, valid_until: float
    ) -> None:
        self.lease = lease
        self.app = app
        self.holder = holder
        self.ttl = ttl
        self.cause: BaseException | None = None
        self._valid_until = valid_until
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep, name=f"lease-{app}", daemon=True)

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def check(self) -> None:
        """Raise `LeaseLost` if the lease was lost; call it before each irreversible step."""
        if self.lost:
            why = f": {self.cause}" if self.cause else ""
            raise LeaseLost(f"{self.app}: lease of {self.holder} was lost{why}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _keep(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            asked = time.monotonic()
            renewed = self._renew_once()
            if renewed:
                self._valid_until, self.cause = asked + self.ttl, None
            elif renewed is False or time.monotonic() >= self._valid_until:
                self._lost.set()
                return

    def _renew_once(self) -> bool | None:
        """True when renewed, False when refused, None when Redis could not be asked."""
        try:
            return self.lease.renew(self.app, self.holder, self.ttl)
        except RedisError as e:
            self.cause = e
            return None
