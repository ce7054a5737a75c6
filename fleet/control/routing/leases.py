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
- `Lease.held` renews every ttl/3, from one background thread per `Lease` that renews every
  lease held through it (`Renewer`; a thread per sync cost a worker a thread start and join
  for every sync, most of which end before their first renewal). A renewal that is refused means the
  lease expired or was taken: the holder is told through `HeldLease.lost` / `check()`, and
  leaving the block raises `LeaseLost`, so the loss is never silent. A Redis error during a
  renewal is retried on the next tick for as long as the lease can still be valid.

Fencing (instance leases, `fence_of` given): each acquisition increments a per-instance counter
(`Keys.fence`, a hash: `token`, and `until`, the lease's deadline in Redis milliseconds) in the
same script that takes the lease, so every holder has a token greater than every earlier one.
Renewal and `current` succeed only while the lease names the holder *and* the counter still
equals its token. The worker hands the engine `HeldLease.guard`, which the engine calls before
its inventory claim, the Namespaces and CRDs validation writes, each tier of a wave, each batch
of deletes and its record, and at each poll of a health wait; the token itself is written
into the in-cluster inventory (compared by the API server through `resourceVersion`) and
checked in the same Lua script that makes the status write (`HeldLease.fenced`, one atomic
step), so a holder that was paused past its deadline cannot write after a newer one did.
Recovery waits `expired_for` past the deadline.

The sync pipeline never imports this module; the worker wraps a sync in `held`.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from redis import Redis, RedisError
from redis.client import Pipeline

from fleet.errors import FleetError, LeaseLost

log = logging.getLogger("gitfleet.leases")

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

# Fenced leases: KEYS[1] the lease, KEYS[2] the fence hash; ARGV holder, ttl ms[, token].
_NOW_MS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

_ACQUIRE_FENCED = (
    _NOW_MS
    + """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
local token = redis.call('HINCRBY', KEYS[2], 'token', 1)
redis.call('HSET', KEYS[2], 'until', now + tonumber(ARGV[2]))
return token
"""
)

_RENEW_FENCED = (
    _NOW_MS
    + """
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('HGET', KEYS[2], 'token') == ARGV[3] then
  redis.call('HSET', KEYS[2], 'until', now + tonumber(ARGV[2]))
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
)

_CURRENT = """
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('HGET', KEYS[2], 'token') == ARGV[2] then
  return 1
end
return 0
"""

# `HeldLease.fenced`: KEYS[1] the lease[, KEYS[2] the fence hash]; ARGV holder, token, then
# each command as its argument count followed by its arguments, run only while current.
_FENCED_WRITE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if #KEYS > 1 and redis.call('HGET', KEYS[2], 'token') ~= ARGV[2] then
  return 0
end
local i = 3
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + n))
  i = i + n + 1
end
return 1
"""

_ADVANCE = """
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('HGET', KEYS[2], 'token') == ARGV[2] then
  redis.call('HSET', KEYS[2], 'token', ARGV[3])
  return 1
end
return 0
"""

_EXPIRED_FOR = (
    _NOW_MS
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
local deadline = redis.call('HGET', KEYS[2], 'until')
if not deadline then
  return -2
end
return now - tonumber(deadline)
"""
)


class LeaseBusy(FleetError):
    """Another holder has the application's lease; retry after it finishes."""

    stage = "lease"
    retryable = True


def _millis(ttl: float) -> int:
    if ttl <= 0:
        raise ValueError(f"ttl: must be positive seconds, got {ttl}")
    return max(1, round(ttl * 1000))


class Renewer:
    """One daemon thread that renews each lease held through a `Lease` every ttl/3 of its own,
    started with the first lease and idle (waiting, no CPU) while none is held.

    `remove` returns only once no renewal of that lease is under way, so nothing renews a
    lease after its holder stopped it and released it (a late refusal would mark it lost). The
    renewals run one after another: a Redis slow to answer one is slow for all, and a lease
    whose renewal is late past its deadline counts as lost (`HeldLease.lost`), as before."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[HeldLease, float] = {}  # next renewal, monotonic seconds
        self._busy: HeldLease | None = None  # the lease being renewed right now
        self._thread: threading.Thread | None = None

    def add(self, held: HeldLease) -> None:
        with self._cond:
            self._due[held] = time.monotonic() + held.ttl / 3
            if self._thread is None or not self._thread.is_alive():  # first, or if it ever ended
                self._thread = threading.Thread(target=self._run, name="lease-renewer", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def remove(self, held: HeldLease) -> None:
        with self._cond:
            self._due.pop(held, None)
            while self._busy is held:
                self._cond.wait()

    def holding(self) -> int:
        """How many leases it renews now."""
        with self._cond:
            return len(self._due)

    def _run(self) -> None:
        with self._cond:
            while True:
                if not self._due:
                    self._cond.wait()
                    continue
                held, at = min(self._due.items(), key=lambda item: item[1])
                delay = at - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                self._busy = held
                self._cond.release()
                try:
                    again = held.renew_due()
                finally:
                    self._cond.acquire()
                    self._busy = None
                    self._cond.notify_all()
                if again and held in self._due:
                    self._due[held] = time.monotonic() + held.ttl / 3
                else:
                    self._due.pop(held, None)


class Lease:
    """Leases by name, each stored under the key `key_of(name)` gives: `Keys.lease` for
    application instances (fenced: `fence_of` is `Keys.fence`), `Keys.scheduler_lease` for the
    scheduler's lock (unfenced, token 0)."""

    def __init__(
        self,
        redis: Redis,
        key_of: Callable[[str], str],
        fence_of: Callable[[str], str] | None = None,
    ) -> None:
        self.redis = redis
        self.key_of = key_of
        self.fence_of = fence_of
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)
        self._acquire_fenced = redis.register_script(_ACQUIRE_FENCED)
        self._renew_fenced = redis.register_script(_RENEW_FENCED)
        self._current = redis.register_script(_CURRENT)
        self._expired_for = redis.register_script(_EXPIRED_FOR)
        self._advance = redis.register_script(_ADVANCE)
        self._fenced_write = redis.register_script(_FENCED_WRITE)
        self.renewer = Renewer()

    def key(self, app: str) -> str:
        return self.key_of(app)

    def take(self, app: str, holder: str, ttl: float) -> int | None:
        """Take the lease for `ttl` seconds if nobody holds it: its fencing token (0 when the
        lease is unfenced), or None when someone else holds it."""
        if self.fence_of is None:
            return 0 if self.acquire(app, holder, ttl) else None
        keys = [self.key(app), self.fence_of(app)]
        token = int(self._acquire_fenced(keys=keys, args=[holder, _millis(ttl)]))
        return token or None

    def acquire(self, app: str, holder: str, ttl: float) -> bool:
        """Take the lease for `ttl` seconds if nobody holds it (fenced leases: see `take`)."""
        if self.fence_of is not None:
            return self.take(app, holder, ttl) is not None
        return bool(self.redis.set(self.key(app), holder, nx=True, px=_millis(ttl)))

    def renew(self, app: str, holder: str, ttl: float, token: int = 0) -> bool:
        """Reset the lease's expiry to `ttl` seconds from now, only if `holder` still holds it
        (and, when fenced, `token` is still the newest)."""
        if self.fence_of is None:
            return bool(self._renew(keys=[self.key(app)], args=[holder, _millis(ttl)]))
        keys = [self.key(app), self.fence_of(app)]
        return bool(self._renew_fenced(keys=keys, args=[holder, _millis(ttl), token]))

    def current(self, app: str, holder: str, token: int) -> bool:
        """Whether `holder` still holds the lease with `token` as the newest fencing token."""
        if self.fence_of is None:
            return self.holder(app) == holder
        keys = [self.key(app), self.fence_of(app)]
        return bool(self._current(keys=keys, args=[holder, token]))

    def token(self, app: str) -> int:
        """The newest fencing token handed out for `app` (0: never, or an unfenced lease)."""
        if self.fence_of is None:
            return 0
        raw = self.redis.hget(self.fence_of(app), "token")
        return int(raw) if raw is not None else 0

    def expired_for(self, app: str) -> float | None:
        """Seconds since the lease's last deadline passed, by the Redis clock: None while it
        is held; infinity when free with no deadline known (unfenced, or never taken)."""
        if self.fence_of is None:
            return None if self.holder(app) is not None else math.inf
        keys = [self.key(app), self.fence_of(app)]
        millis = int(self._expired_for(keys=keys))
        if millis == -1:
            return None
        return math.inf if millis == -2 else max(millis, 0) / 1000

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
        """Hold the lease for the duration of the block, renewing it every ttl/3 (`Renewer`).

        Raises `LeaseBusy` when someone else holds it, and `LeaseLost` on leaving the block
        when the lease was lost meanwhile (unless the block itself raised).
        """
        asked = time.monotonic()
        token = self.take(app, holder, ttl)
        if token is None:
            raise LeaseBusy(f"{app}: lease is held by {self.holder(app) or 'another holder'}")
        keeper = HeldLease(self, app, holder, ttl, valid_until=asked + ttl, token=token)
        keeper.start()
        try:
            yield keeper
        finally:
            keeper.stop()
            self.release(app, holder)
        keeper.check()


class HeldLease:
    """A lease kept alive by its `Lease`'s renewer thread between `start` and `stop`; ask `lost`
    or call `check()` between steps.

    `guard` (the engine's `SyncGuard`) is `check()` plus asking Redis whether the token is
    still current; `fenced` runs a Redis write only while it is."""

    def __init__(
        self,
        lease: Lease,
        app: str,
        holder: str,
        ttl: float,
        *,
        valid_until: float,
        token: int = 0,
    ) -> None:
        self.lease = lease
        self.app = app
        self.holder = holder
        self.ttl = ttl
        self.token = token
        self.cause: BaseException | None = None
        self._valid_until = valid_until
        self._lost = threading.Event()

    @property
    def lost(self) -> bool:
        """Lost: a renewal was refused, or the lease's deadline passed without one (a paused
        process sees this as soon as it runs again, before its renewal thread does)."""
        if not self._lost.is_set() and time.monotonic() >= self._valid_until:
            self._lost.set()
        return self._lost.is_set()

    def check(self) -> None:
        """Raise `LeaseLost` if the lease was lost; call it before each irreversible step."""
        if self.lost:
            why = f": {self.cause}" if self.cause else ""
            raise LeaseLost(f"{self.app}: lease of {self.holder} was lost{why}")

    def __call__(self, step: str) -> None:
        """The engine's guard: raise `LeaseLost` before `step` unless the lease is ours and its
        fencing token the newest (asks Redis; a Redis error counts only once the deadline
        passes)."""
        self.check()
        try:
            current = self.lease.current(self.app, self.holder, self.token)
        except RedisError:
            return
        if not current:
            self._lost.set()
            raise LeaseLost(
                f"{self.app}: lease token {self.token} of {self.holder} is no longer current "
                f"before {step}: another worker took the instance over; nothing more written"
            )

    def advance(self, past: int) -> None:
        """Move our token past `past`, a token found in the cluster greater than any Redis has
        handed out: Redis's counter was reset (a registry restored into a new Redis). Only the
        current holder may (LeaseLost otherwise), so no other sync runs meanwhile."""
        lease = self.lease
        if lease.fence_of is None or past < self.token:
            return
        keys = [lease.key(self.app), lease.fence_of(self.app)]
        if not lease._advance(keys=keys, args=[self.holder, self.token, past + 1]):
            self._lost.set()
            raise LeaseLost(f"{self.app}: lease token {self.token} is no longer current")
        self.token = past + 1

    def fenced(self, write: Callable[[Pipeline], None]) -> None:
        """Run the commands `write` stages on a pipeline only if the lease is still ours with
        our token: `LeaseLost` otherwise. The check and the commands run in one Lua script, so
        they are one atomic step and one round trip (a WATCH, a check and a MULTI/EXEC took
        three). `write` only stages commands: their replies are not returned."""
        self.check()
        lease = self.lease
        keys = [lease.key(self.app)] + ([lease.fence_of(self.app)] if lease.fence_of else [])
        with lease.redis.pipeline(transaction=False) as pipe:
            write(pipe)
            args: list[Any] = [self.holder, self.token]
            for command, _options in pipe.command_stack:
                args += [len(command), *command]
        if lease._fenced_write(keys=keys, args=args):
            return
        self._lost.set()
        raise LeaseLost(
            f"{self.app}: lease token {self.token} of {self.holder} is no longer current: "
            "the status and history of this sync were not written"
        )

    def start(self) -> None:
        """Renew it every ttl/3 from now on."""
        self.lease.renewer.add(self)

    def stop(self) -> None:
        """No more renewals (none is under way once this returns)."""
        self.lease.renewer.remove(self)

    def renew_due(self) -> bool:
        """One renewal, when it is due (the renewer calls it); False once the lease is lost:
        refused, or Redis could not be asked until its deadline passed."""
        asked = time.monotonic()
        renewed = self._renew_once()
        if renewed:
            self._valid_until, self.cause = asked + self.ttl, None
            return True
        if renewed is False or time.monotonic() >= self._valid_until:
            self._lost.set()
            return False
        return True

    def _renew_once(self) -> bool | None:
        """True when renewed, False when refused, None when Redis could not be asked (or the
        renewal failed otherwise: logged, and never allowed to end the renewer's thread, which
        keeps every lease of its `Lease`)."""
        try:
            return self.lease.renew(self.app, self.holder, self.ttl, self.token)
        except RedisError as e:
            self.cause = e
            return None
        except Exception as e:
            log.exception("renewing the lease of %s failed; trying again next time", self.app)
            self.cause = e
            return None


__all__ = ["HeldLease", "Lease", "LeaseBusy", "LeaseLost", "Renewer"]
