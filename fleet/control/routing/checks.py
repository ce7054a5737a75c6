"""Quiet checks: periodic syncs of quiet instances, asked for and answered in batches.

Most periodic (interval) syncs find nothing to do (`worker.quiet`): the last sync was clean,
nothing touched the instance's objects since, and git still says the same. Carrying each of
those through an rq job (claim, lease, journal, status, finish, rq's own bookkeeping) cost many
times the check itself, so an interval request for an instance with no sync pending or running
is parked here instead, for its owner's worker to judge in batches (except the scheduler's
first request for an instance, which goes straight to a sync: `Dispatcher.request_sync`'s
`check_first`):

- `ask` (the dispatcher): one Lua call puts the instance into the owner's waiting checks,
  `<p>:checks:<worker>` (sorted by when it was asked) with its check id and intent in
  `<p>:check-intents:<worker>`, unless a sync is pending for it (then the caller takes the
  normal path and merges into that sync). A second ask while one waits merges into it.
- `take` (the worker): pop up to a batch of waiting checks, oldest first.
- `stamp` (the worker): for each instance found quiet, one compare-and-set in one Lua call for
  the whole batch writes the status with its `checked` stamp, only if the status is still the
  one the worker read and no sync is pending or holds the lease: a quiet check never overwrites
  what a sync wrote, and never claims a state a running sync is changing.
- `answer` / `answer_of`: what each check answered, for `Dispatcher.wait` (`<p>:check-result:
  <id>`, kept `RESULT_TTL`): the worker's answer, or the sync it was handed to (`followed_by`).
- `drain` (the coordinator's recovery): the checks of a worker that died, to be asked again as
  normal syncs of their new owners.

Nothing here writes to a cluster, and nothing delays a manual, webhook or self-heal sync: they
never enter this path, and a check that finds a sync pending leaves the instance to it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from redis import Redis

from fleet.control.keys import Keys
from fleet.control.routing.pending import Intent

log = logging.getLogger("gitfleet.queue")

RESULT_TTL = 600  # seconds an answer stays readable, as an rq job's result does

_ASK = """
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, ''} end
local have = redis.call('HGET', KEYS[3], ARGV[1])
if have then
  if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
    redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
  end
  redis.call('SADD', KEYS[4], ARGV[5])
  return {2, have}
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3] .. ' ' .. ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[5])
return {1, ARGV[3]}
"""

_TAKE = """
local members = {}
if ARGV[2] ~= '' then members[1] = ARGV[2] end
local more = tonumber(ARGV[1]) - #members
if more > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[1], more)
  for i = 1, #popped, 2 do members[#members + 1] = popped[i] end
end
local out = {}
for _, member in ipairs(members) do
  local entry = redis.call('HGET', KEYS[2], member)
  if entry then
    redis.call('HDEL', KEYS[2], member)
    out[#out + 1] = member
    out[#out + 1] = entry
  end
end
if redis.call('ZCARD', KEYS[1]) == 0 and redis.call('HLEN', KEYS[2]) == 0 then
  redis.call('SREM', KEYS[3], ARGV[3])
end
return out
"""

_DRAIN = """
local all = redis.call('HGETALL', KEYS[2])
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return all
"""

_STAMP = """
local ttl = ARGV[1]
local out = {}
for i = 0, #KEYS / 5 - 1 do
  local k, a = i * 5, i * 6 + 2
  local job = redis.call('HGET', KEYS[k + 2], 'job')
  if job then
    out[#out + 1] = job
  elseif redis.call('EXISTS', KEYS[k + 2]) == 1 or redis.call('EXISTS', KEYS[k + 3]) == 1 then
    out[#out + 1] = ''
  elseif redis.call('HGET', KEYS[k + 1], ARGV[a]) ~= ARGV[a + 1] then
    out[#out + 1] = ''
  else
    redis.call('HSET', KEYS[k + 1], ARGV[a], ARGV[a + 2])
    redis.call('SET', KEYS[k + 4], ARGV[a + 3], 'EX', ttl)
    if ARGV[a + 4] ~= '' then redis.call('HSET', KEYS[k + 5], ARGV[a + 4], ARGV[a + 5]) end
    out[#out + 1] = 1
  end
end
return out
"""


@dataclass(frozen=True)
class Asked:
    """A check waiting for the owner: `merged` when the ask joined one already waiting."""

    check_id: str
    merged: bool


@dataclass(frozen=True)
class Check:
    """One waiting check, as the worker takes it."""

    instance: str
    check_id: str
    intent: Intent


@dataclass(frozen=True)
class Stamp:
    """One compare-and-set of a quiet check: write `status` (JSON) into field `field` of hash
    `status_key` only if it still holds `expected`, and then the check's `answer` and the
    webhook note (`synced_key`/`synced_field` <- `synced`; "" key: none)."""

    check_id: str
    status_key: str
    field: str
    expected: bytes
    status: bytes
    answer: str
    pending_key: str
    lease_key: str
    synced_key: str = ""
    synced_field: str = ""
    synced: bytes = b""


@dataclass(frozen=True)
class Stamped:
    """What `stamp` did with one `Stamp`: `written`, or not, and then the job id of the sync
    pending for the instance ("" when none: the status changed, or a lease is held)."""

    written: bool
    pending_job: str = ""


class QuietChecks:
    def __init__(self, redis: Redis, *, prefix: str = "gitfleet") -> None:
        self.redis = redis
        self.keys = Keys(prefix)
        self._ask = redis.register_script(_ASK)
        self._take = redis.register_script(_TAKE)
        self._drain = redis.register_script(_DRAIN)
        self._stamp = redis.register_script(_STAMP)

    def ask(
        self, worker: str, instance: str, intent: Intent, *, check_id: str, now: float
    ) -> Asked | None:
        """Park a quiet check of `instance` for `worker`; None when a sync is pending for it
        (the caller requests a normal sync, which merges into that one)."""
        keys = [
            self.keys.pending(instance),
            self.keys.checks(worker),
            self.keys.check_intents(worker),
            self.keys.checks_index,
        ]
        args: list[str | float] = [instance, intent.to_json(), check_id, now, worker]
        code, entry = self._ask(keys=keys, args=args)
        if int(code) == 0:
            return None
        found = entry.decode() if isinstance(entry, bytes) else str(entry)
        return Asked(found.split(" ", 1)[0], int(code) == 2)

    def take(self, worker: str, limit: int, *, first: str = "") -> list[Check]:
        """Pop up to `limit` checks of `worker`, oldest first (`first`: one already popped
        from the sorted set, e.g. by a blocking BZPOPMIN, whose entry is taken too)."""
        keys = [self.keys.checks(worker), self.keys.check_intents(worker), self.keys.checks_index]
        flat = self._take(keys=keys, args=[limit, first, worker])
        return _checks(flat)

    def drain(self, worker: str) -> list[Check]:
        """Every check still waiting for `worker` (one that died), removed."""
        keys = [self.keys.checks(worker), self.keys.check_intents(worker), self.keys.checks_index]
        return _checks(self._drain(keys=keys, args=[worker]))

    def workers(self) -> list[str]:
        """The workers that may have checks waiting."""
        return sorted(m.decode() for m in self.redis.smembers(self.keys.checks_index))  # type: ignore[union-attr]

    def stamp(self, stamps: list[Stamp]) -> list[Stamped]:
        """Every compare-and-set of `stamps`, in one round trip."""
        if not stamps:
            return []
        keys: list[str] = []
        args: list[Any] = [RESULT_TTL]
        for s in stamps:
            answer_key = self.keys.check_result(s.check_id)
            keys += [s.status_key, s.pending_key, s.lease_key, answer_key, s.synced_key or "-"]
            args += [s.field, s.expected, s.status, s.answer, s.synced_field, s.synced]
        out = self._stamp(keys=keys, args=args)
        return [_stamped(value) for value in out]

    def answer(self, answers: dict[str, dict[str, Any]]) -> None:
        """Keep what each check (by id) answered, in one round trip."""
        if not answers:
            return
        pipe = self.redis.pipeline(transaction=False)
        for check_id, body in answers.items():
            pipe.set(self.keys.check_result(check_id), json.dumps(body), ex=RESULT_TTL)
        pipe.execute()

    def answer_of(self, check_id: str) -> dict[str, Any] | None:
        raw = self.redis.get(self.keys.check_result(check_id))
        if not isinstance(raw, bytes):
            return None
        body = json.loads(raw)
        return body if isinstance(body, dict) else None


def followed_by(job_id: str) -> dict[str, Any]:
    """The answer of a check handed to a normal sync: that sync's job answers for it."""
    return {"followed_by": job_id}


def _stamped(value: Any) -> Stamped:
    if value == 1:
        return Stamped(True)
    return Stamped(False, value.decode() if isinstance(value, bytes) else str(value or ""))


def _checks(flat: list[bytes]) -> list[Check]:
    """The checks in a flat [instance, entry, ...] reply; an entry gitfleet did not write
    (Redis is a trust boundary) is dropped with a logged error, and the others still run."""
    found = []
    for member, entry in zip(flat[::2], flat[1::2], strict=True):
        check_id, _, intent = entry.decode().partition(" ")
        try:
            found.append(Check(member.decode(), check_id, Intent.from_json(intent or "{}")))
        except ValueError as e:
            log.error("a quiet check of %s in Redis is not one gitfleet wrote (%s)", member, e)
    return found
