"""One pending sync per instance: the Redis record that merges triggers and orders follow-ups.

rq alone cannot say "there is already a sync of shop@eu waiting, fold this trigger into it":
`unique=True` refuses a duplicate job id while any job with that id exists, finished ones
included, and a finished job keeps its id for its result TTL. So each instance has one hash,
`<p>:pending:<instance>` (`fleet.control.keys`), which *is* the pending sync:

- `queued`: a job is in the owner's queue. New triggers merge into the hash (`requests` counts
  them); the job reads the winning intent when it starts, so it syncs the newest revision.
- `running`: a worker claimed it. A new trigger records a `followup` (one, however many
  triggers arrive), which `finish` enqueues when the running sync ends: exactly one more run.

Every transition is atomic on the hash: a WATCH/MULTI transaction, and the rq job is pushed
inside the same MULTI (rq accepts a pipeline), so a trigger can never see "queued" without a
job behind it, and two triggers can never both create a job. The two steps every sync takes
and that push no job, `claim` and a `finish` without follow-up, are small Lua scripts instead
(one round trip each, as atomic as the transaction).

Merging never lets a retry win over a fresh trigger, whichever came first: a retry repeats an
older request (its revision, its trace), and any newer sync serves it, so a retry merged into a
webhook keeps the webhook's revision and trace (and a trigger merged into a queued retry
replaces it). Among fresh triggers, the intent a person asked for wins over an automated one: a
queued manual sync at revision X is not turned into "sync the branch" by an interval tick
arriving after it. Between intents of the same kind, the newest wins. The intent that loses
is returned (`Requested.dropped`), so the dispatcher can close its trace with a span naming
the sync it was merged into.

Retries are cancelled by the syncs that serve them: a sync that starts, or succeeds, for an
instance removes its deferred syncs (`cancel_deferred`; at the start only when its claim saw
one waiting, and then, when it saw none, at its end whatever the outcome), and a retry that
still reaches a worker after a newer sync started is stale (`Intent.since`, checked by the
worker).

Deferred syncs (retries with backoff, dependency waits, a busy lease) wait in a sorted set by
due time; `due` pops them atomically, so any number of processes may pump it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import TypeAdapter
from redis import Redis, WatchError
from redis.client import Pipeline
from redis.typing import EncodableT, FieldT

from fleet.control.keys import Keys
from fleet.control.registry.syncrecords import AnyTrigger
from fleet.model import Trigger

log = logging.getLogger("gitfleet.queue")

_POP_DUE = """
local items = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local out = {}
for _, member in ipairs(items) do
  redis.call('ZREM', KEYS[1], member)
  out[#out + 1] = member
  out[#out + 1] = redis.call('HGET', KEYS[2], member) or ''
  redis.call('HDEL', KEYS[2], member)
end
return out
"""

# `claim` in one round trip: KEYS[1] the pending hash, KEYS[2] the deferred set; ARGV job id,
# worker, now, instance. The hash as it was (a flat field/value list) when the job's queued sync
# was marked running, with a last pseudo-field `deferred` ('1' when a deferred sync of the
# instance waits, else '0'); empty when the job may not run.
_CLAIM = """
if redis.call('HGET', KEYS[1], 'job') ~= ARGV[1] then
  return {}
end
if redis.call('HGET', KEYS[1], 'state') ~= 'queued' then
  return {}
end
local raw = redis.call('HGETALL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'running', 'worker', ARGV[2], 'started', ARGV[3])
raw[#raw + 1] = 'deferred'
raw[#raw + 1] = redis.call('ZSCORE', KEYS[2], ARGV[4]) and '1' or '0'
return raw
"""

# `finish` without a follow-up in one round trip: KEYS[1] the pending hash, KEYS[2] the index;
# ARGV job id, instance. 1 ended, 0 not this job's, 2 a follow-up waits (the WATCH path).
_FINISH_ALONE = """
if redis.call('HGET', KEYS[1], 'job') ~= ARGV[1] then
  return 0
end
if redis.call('HEXISTS', KEYS[1], 'followup') == 1 then
  return 2
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return 1
"""


@dataclass(frozen=True)
class Intent:
    """What a sync is asked to do. `revision` "" means the app's own revision; `carrier` is the
    W3C trace context of the request that caused it; `attempt` counts retries (0 = first try);
    `since`: for a retry, when the sync it repeats started (epoch seconds; 0 unknown), so a
    worker can tell that a newer sync already ran. An intent stored without a trigger (or an
    empty one) runs as a retry. `prune`: a person's choice for this one sync (True prune, False
    do not), None the app's `syncPolicy.prune`; a merge keeps the winning intent's own choice,
    so an automated sync never inherits a person's."""

    trigger: AnyTrigger = Trigger.RETRY
    revision: str = ""
    carrier: dict[str, str] = field(default_factory=dict)
    attempt: int = 0
    since: float = 0.0
    prune: bool | None = None

    @property
    def is_retry(self) -> bool:
        """A deferred repeat of an earlier intent (a failed sync, a dependency wait)."""
        return self.attempt > 0

    def to_json(self) -> str:
        return INTENT.dump_json(self).decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> Intent:
        return INTENT.validate_json(text or "{}")


INTENT: TypeAdapter[Intent] = TypeAdapter(Intent)


def merged(old: Intent, new: Intent) -> Intent:
    """The intent that wins: a fresh one over a retry, then a person's (`Trigger.by_person`)
    over any other, then a rollout step's over one a quiet check may answer
    (`Trigger.may_be_quiet`: the step's sync keeps its trigger and the rollout's trace; what
    an interval or webhook sync of the instance would run is its pin anyway), else the newest.
    The winner keeps its own `prune`: a newer person's choice replaces an older one, and an
    automated intent never takes a person's."""
    if old.is_retry != new.is_retry:
        return new if old.is_retry else old
    if old.trigger.by_person and not new.trigger.by_person:
        return old
    if old.trigger == Trigger.ROLLOUT and new.trigger.may_be_quiet:
        return old
    return new


def trace_of(carrier: dict[str, str]) -> str:
    """The trace id in a W3C carrier ("" without one)."""
    parts = carrier.get("traceparent", "").split("-")
    return parts[1] if len(parts) == 4 else ""


class Requested(NamedTuple):
    """What `PendingSyncs.request` did: the job that carries the sync, whether the request
    merged into one already pending, the intent that lost the merge (None if none did) and
    the one that won it."""

    job_id: str
    queue: str
    merged: bool
    dropped: Intent | None = None
    kept: Intent | None = None


@dataclass(frozen=True)
class Pending:
    """The parsed hash of one instance's pending sync."""

    job_id: str
    queue: str
    state: str
    intent: Intent
    requests: int
    worker: str = ""
    started: float = 0.0
    followup: dict[str, Any] | None = None
    deferred: bool = True  # a deferred sync of the instance may wait (`claim` tells for sure)

    @classmethod
    def parse(cls, raw: dict[bytes, bytes]) -> Pending | None:
        data = {k.decode(): v.decode() for k, v in raw.items()}
        if "job" not in data:
            return None
        return cls(
            job_id=data["job"],
            queue=data.get("queue", ""),
            state=data.get("state", ""),
            intent=Intent.from_json(data.get("intent", "")),
            requests=int(data.get("requests", "1")),
            worker=data.get("worker", ""),
            started=float(data.get("started") or 0.0),
            followup=json.loads(data["followup"]) if data.get("followup") else None,
            deferred=data.get("deferred") != "0",
        )

    def next_intent(self) -> Intent:
        """What to run when this sync must start over (its worker died): its own intent, or
        the follow-up's merged over it, since the interrupted one was never served."""
        if not self.followup:
            return self.intent
        return merged(self.intent, Intent.from_json(self.followup["intent"]))


def read(raw: dict[bytes, bytes], instance: str) -> Pending | None:
    """`Pending.parse`, except that a record gitfleet did not write (Redis is a trust boundary,
    SECURITY.md) reads as no pending sync, with a logged error: the next request replaces it,
    instead of every request and every worker failing on it for good."""
    try:
        pending = Pending.parse(raw)
        if pending is not None and pending.followup is not None:  # it must parse too
            pending.next_intent()
            int(pending.followup["requests"])
        return pending
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        log.error("the pending sync of %s in Redis is not one gitfleet wrote (%s)", instance, e)
        return None


Enqueue = Callable[[Pipeline, str, str, Intent], None]
"""(pipeline in MULTI, queue name, job id, intent): push the rq job for a pending sync."""


class PendingSyncs:
    def __init__(self, redis: Redis, *, prefix: str = "gitfleet") -> None:
        self.redis = redis
        self.prefix = prefix
        self.keys = Keys(prefix)
        self.index = self.keys.pending_index
        self.deferred = self.keys.deferred
        self.deferred_intents = self.keys.deferred_intents
        self._pop_due = redis.register_script(_POP_DUE)
        self._claim = redis.register_script(_CLAIM)
        self._finish_alone = redis.register_script(_FINISH_ALONE)

    def key(self, instance: str) -> str:
        return self.keys.pending(instance)

    def get(self, instance: str) -> Pending | None:
        raw: dict[bytes, bytes] = self.redis.hgetall(self.key(instance))  # type: ignore[assignment]
        return read(raw, instance)

    def instances(self) -> list[str]:
        return sorted(m.decode() for m in self.redis.smembers(self.index))  # type: ignore[union-attr]

    def _transaction(self, instance: str, step: Callable[[Pipeline, Pending | None], Any]) -> Any:
        key = self.key(instance)
        with self.redis.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    current = read(pipe.hgetall(key), instance)  # type: ignore[arg-type]
                    result = step(pipe, current)
                    pipe.execute()
                    return result
                except WatchError:
                    continue

    def request(
        self,
        instance: str,
        intent: Intent,
        *,
        queue: str,
        new_id: str,
        enqueue: Enqueue,
        now: float,
    ) -> Requested:
        """Create, merge into, or follow up the pending sync of `instance`."""
        key = self.key(instance)

        def step(pipe: Pipeline, current: Pending | None) -> Requested:
            pipe.multi()
            if current is None:
                self._queued(pipe, key, new_id, queue, intent, 1)
                pipe.hset(key, "created", now)
                pipe.sadd(self.index, instance)
                enqueue(pipe, queue, new_id, intent)
                return Requested(new_id, queue, False)
            if current.state == "queued":
                won = merged(current.intent, intent)
                pipe.hset(key, "intent", won.to_json())
                pipe.hincrby(key, "requests", 1)
                lost = current.intent if won is intent else intent
                return Requested(current.job_id, current.queue, True, lost, won)
            return self._follow_up(pipe, key, current, intent, new_id, queue)

        result: Requested = self._transaction(instance, step)
        return result

    def _follow_up(
        self, pipe: Pipeline, key: str, current: Pending, intent: Intent, new_id: str, queue: str
    ) -> Requested:
        previous = current.followup
        lost = won = None
        if previous is None:
            followup = {"job": new_id, "intent": intent.to_json(), "requests": 1}
        else:
            earlier = Intent.from_json(previous["intent"])
            won = merged(earlier, intent)
            lost = earlier if won is intent else intent
            followup = {**previous, "intent": won.to_json(), "requests": previous["requests"] + 1}
        pipe.hset(key, "followup", json.dumps(followup))
        return Requested(str(followup["job"]), queue, previous is not None, lost, won)

    def claim(self, instance: str, job_id: str, *, worker: str, now: float) -> Pending | None:
        """Mark the pending sync running by `worker` if `job_id` is still the one to run (one
        round trip: a Lua script checks and marks atomically, and says whether a deferred sync
        of the instance waits: `Pending.deferred`). A record gitfleet did not write reads as
        None (`read`), as before, though it is then left marked running: the next request
        replaces it either way."""
        keys = [self.key(instance), self.deferred]
        flat: list[bytes] = self._claim(keys=keys, args=[job_id, worker, now, instance])
        if not flat:
            return None
        return read(dict(zip(flat[::2], flat[1::2], strict=True)), instance)

    def finish(
        self, instance: str, job_id: str, *, queue: Callable[[], str], enqueue: Enqueue
    ) -> str | None:
        """End the running sync `job_id`; enqueue its follow-up on the queue `queue()` names if
        one was asked for. Returns the follow-up's job id. Without a follow-up (the usual end)
        this is one Lua script, and `queue` is not called; with one, a WATCH/MULTI transaction
        that pushes its rq job."""
        key = self.key(instance)
        alone = self._finish_alone(keys=[key, self.index], args=[job_id, instance])
        if int(alone) != 2:
            return None
        target = queue()

        def step(pipe: Pipeline, current: Pending | None) -> str | None:
            pipe.multi()
            if current is None or current.job_id != job_id:
                return None
            if current.followup is None:
                pipe.delete(key)
                pipe.srem(self.index, instance)
                return None
            follow = current.followup
            intent = Intent.from_json(follow["intent"])  # the running intent has been served
            self._queued(pipe, key, str(follow["job"]), target, intent, int(follow["requests"]))
            enqueue(pipe, target, str(follow["job"]), intent)
            return str(follow["job"])

        followed: str | None = self._transaction(instance, step)
        return followed

    def requeue(
        self,
        instance: str,
        expected: Pending,
        *,
        queue: str,
        new_id: str,
        enqueue: Enqueue,
        drop: Callable[[Pipeline, Pending], None],
    ) -> str | None:
        """Move a stranded pending sync (its worker died) to `queue`, if it is still `expected`.
        `drop` removes the old job inside the same transaction. Returns the new job id."""
        key = self.key(instance)

        def step(pipe: Pipeline, current: Pending | None) -> str | None:
            pipe.multi()
            if current != expected or current is None:
                return None
            job = str(current.followup["job"]) if current.followup else new_id
            drop(pipe, current)
            intent = current.next_intent()
            self._queued(pipe, key, job, queue, intent, current.requests)
            enqueue(pipe, queue, job, intent)
            return job

        moved: str | None = self._transaction(instance, step)
        return moved

    @staticmethod
    def _queued(
        pipe: Pipeline, key: str, job: str, queue: str, intent: Intent, requests: int
    ) -> None:
        fields: dict[FieldT, EncodableT] = {
            "job": job,
            "queue": queue,
            "state": "queued",
            "requests": requests,
            "intent": intent.to_json(),
        }
        pipe.hset(key, mapping=fields)
        pipe.hdel(key, "worker", "started", "followup")

    # -- deferred syncs -----------------------------------------------------------------------

    def defer(self, instance: str, intent: Intent, *, at: float) -> None:
        """Ask for a sync of `instance` at `at` (epoch seconds); an earlier ask keeps its time."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.zadd(self.deferred, {instance: at}, lt=True)
        pipe.hset(self.deferred_intents, instance, intent.to_json())
        pipe.execute()

    def cancel_deferred(self, instance: str) -> Intent | None:
        """Drop the deferred sync of `instance` (a sync serving it started); return its intent
        (None when none was deferred, or it was not one gitfleet wrote)."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.hget(self.deferred_intents, instance)
        pipe.zrem(self.deferred, instance)
        pipe.hdel(self.deferred_intents, instance)
        raw, removed, _ = pipe.execute()
        if not removed or not raw:
            return None
        try:
            return Intent.from_json(raw)
        except ValueError:
            return None

    def deferred_at(self, instance: str) -> float | None:
        score = self.redis.zscore(self.deferred, instance)
        return float(score) if score is not None else None

    def due(self, now: float, *, limit: int = 500) -> list[tuple[str, Intent]]:
        """Pop the deferred syncs due at `now`; each is returned to exactly one caller."""
        flat = self._pop_due(keys=[self.deferred, self.deferred_intents], args=[now, limit])
        due = []
        for member, raw in zip(flat[::2], flat[1::2], strict=True):
            try:
                due.append((member.decode(), Intent.from_json(raw)))
            except ValueError as e:  # not written by gitfleet: dropped, the others still run
                log.error(
                    "a deferred sync of %s in Redis is not one gitfleet wrote (%s)", member, e
                )
        return due
