"""Ask the workers for syncs: route each instance to its owner's queue, one pending sync each.

The API, the scheduler and the workers (retries, self-heal) all go through `Dispatcher`:

- `request_sync` finds the owner of `app@cluster` (`fleet.control.routing.owners.OwnerMap`), then
  creates, merges into, or follows up the instance's pending sync (`fleet.control.routing.pending`),
  pushing an rq job onto `<p>-shard-<worker>` (`fleet.control.keys.Queues`) only when a new run
  is really needed. No live worker is a `NoWorkers` error, which is retryable: the request can
  be repeated once a worker registers.
- An interval request for an instance with no sync pending is a quiet check
  (`fleet.control.routing.checks`): parked for its owner's worker, which judges such checks in
  batches and hands those that are not quiet to the normal path above. Its `JobRef` names the
  check (`check-...`), and `wait` follows it to the sync it was handed to, if any. The
  scheduler's first request for an instance skips the check (`check_first=False`): a check of
  an instance never synced can only hand it on, for one more round trip through Redis.
- Dry runs (diffs) are read-only and never merge: each is its own job on the owner's queue, so
  a diff answers for the state it was asked about and never turns into a write.
- `claim` / `finish` are the worker's half of the pending-sync protocol; `defer` / `pump` hold
  syncs that must wait (retries, dependencies, a busy lease); `recover` moves work stranded by
  a dead worker (used by the coordinator's scheduler, `fleet.control.scheduler`).

Jobs are JSON and name one of gitfleet's own job functions (`fleet.control.routing.payloads`):
Redis is a trust boundary, and a worker refuses anything else. TTLs are set on purpose: results live
10 minutes (long enough for a diff to be read), failures a day (rq's default is a year, and
the sync record in the store is what people read).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from opentelemetry import context, propagate
from redis import Redis
from redis.client import Pipeline
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from fleet.control.keys import Keys, Queues
from fleet.control.registry.instances import instance_key, split_instance
from fleet.control.routing import checks, payloads
from fleet.control.routing.checks import QuietChecks
from fleet.control.routing.leases import Lease
from fleet.control.routing.owners import OwnerMap, safe_id
from fleet.control.routing.payloads import PREVIEW_JOB, SYNC_JOB
from fleet.control.routing.pending import Intent, Pending, PendingSyncs, trace_of
from fleet.control.routing.sharding import NoWorkers
from fleet.model import Trigger
from fleet.telemetry import spans as telemetry

__all__ = ["PREVIEW_JOB", "SYNC_JOB", "Dispatcher", "JobRef"]
RESULT_TTL = 600
FAILURE_TTL = 24 * 3600
JOB_TIMEOUT = 900
_FAILED = {JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED}


@dataclass(frozen=True)
class JobRef:
    """The job that will carry a requested sync. `merged`: the request joined a sync that was
    already pending instead of creating a new run."""

    job_id: str
    queue: str
    merged: bool


RECOVERY_MARGIN = 2.0  # seconds past a dead holder's lease deadline before its sync moves


def _merged_span(instance: str, dropped: Intent, job_id: str, into_trace: str) -> None:
    """A span in the dropped intent's trace that says which sync (job, trace) it was merged
    into."""
    if not dropped.carrier:
        return
    app, cluster = split_instance(instance)
    attributes = {
        "app": app,
        "cluster": cluster,
        "trigger": str(dropped.trigger),
        "revision": dropped.revision,
        "attempt": dropped.attempt,
        "merged_into_job": job_id,
        "merged_into_trace": into_trace,
    }
    token = context.attach(propagate.extract(dropped.carrier))
    try:
        with telemetry.stage("sync.merged", **attributes):
            pass
    finally:
        context.detach(token)


class Dispatcher:
    def __init__(
        self,
        redis: Redis,
        *,
        prefix: str = "gitfleet",
        job_timeout: int = JOB_TIMEOUT,
        quiet_checks: bool = True,
    ) -> None:
        """`quiet_checks`: interval requests go to the owner's batched quiet checks (off:
        each is an rq job, as every other request)."""
        self.redis = redis
        self.prefix = prefix
        self.job_timeout = job_timeout
        self.quiet_checks = quiet_checks
        self.checks = QuietChecks(redis, prefix=prefix)
        self.owners = OwnerMap(redis, prefix=prefix)
        self.pending = PendingSyncs(redis, prefix=prefix)
        self.queues = Queues(prefix)
        keys = Keys(prefix)
        self.leases = Lease(redis, keys.lease, keys.fence)

    # -- naming -------------------------------------------------------------------------------

    def queue_name(self, worker: str) -> str:
        return self.queues.shard(worker)

    def worker_of(self, queue: str) -> str:
        return self.queues.worker_of(queue)

    def queue_for(self, instance: str) -> str:
        """The owner's queue; `NoWorkers` (retryable) when no worker is live."""
        try:
            return self.queue_name(self.owners.owner(instance))
        except NoWorkers as e:
            raise NoWorkers(
                f"cannot sync {instance}: no live workers (prefix {self.prefix}). Start one "
                "with `gitfleet worker`, then retry"
            ) from e

    @staticmethod
    def new_job_id(kind: str, instance: str) -> str:
        return f"{kind}-{safe_id(instance)}-{uuid.uuid4().hex[:12]}"

    # -- requests -----------------------------------------------------------------------------

    def request_sync(
        self,
        app: str,
        cluster: str,
        *,
        trigger: Trigger,
        revision: str | None = None,
        dry_run: bool = False,
        carrier: dict[str, str] | None = None,
        prune: bool | None = None,
        check_first: bool = True,
    ) -> JobRef:
        """`prune`: a person's choice for this sync only (None: the app's syncPolicy.prune);
        `check_first` False: an interval request goes straight to a sync, not a quiet check."""
        intent = Intent(trigger, revision or "", dict(carrier or {}), prune=prune)
        instance = instance_key(app, cluster)
        if dry_run:
            return self._preview(instance, intent)
        if self.quiet_checks and check_first and trigger == Trigger.INTERVAL:
            asked = self._quiet_check(instance, intent)
            if asked is not None:
                return asked
        return self.request_intent(instance, intent)

    def _quiet_check(self, instance: str, intent: Intent) -> JobRef | None:
        """Park an interval request as a quiet check of the owner; None when a sync is
        pending for the instance (the request merges into it instead)."""
        queue = self.queue_for(instance)
        check_id = self.new_job_id("check", instance)
        worker = self.worker_of(queue)
        asked = self.checks.ask(worker, instance, intent, check_id=check_id, now=time.time())
        return JobRef(asked.check_id, queue, asked.merged) if asked is not None else None

    def request_intent(self, instance: str, intent: Intent) -> JobRef:
        """Create, merge into or follow up the pending sync of `instance`. When a merge drops
        one intent, its trace ends with a `gitfleet.sync.merged` span naming the sync (job and
        trace) it was merged into, so every trace id handed to a caller says what became of
        its request."""
        queue = self.queue_for(instance)
        requested = self.pending.request(
            instance,
            intent,
            queue=queue,
            new_id=self.new_job_id("sync", instance),
            enqueue=self._enqueue_sync(instance),
            now=time.time(),
        )
        if requested.dropped is not None:
            kept = trace_of(requested.kept.carrier) if requested.kept is not None else ""
            _merged_span(instance, requested.dropped, requested.job_id, kept)
        return JobRef(requested.job_id, requested.queue, requested.merged)

    def _preview(self, instance: str, intent: Intent) -> JobRef:
        queue = payloads.queue(self.queue_for(instance), self.redis)
        job = queue.enqueue_call(
            PREVIEW_JOB,
            args=(instance, intent.to_json()),
            job_id=self.new_job_id("diff", instance),
            timeout=self.job_timeout,
            result_ttl=RESULT_TTL,
            failure_ttl=RESULT_TTL,
            ttl=RESULT_TTL,
            meta={"otel": intent.carrier},
            description=f"diff {instance}",
        )
        return JobRef(job.id, queue.name, False)

    def _enqueue_sync(self, instance: str) -> Any:
        def enqueue(pipe: Pipeline, queue_name: str, job_id: str, intent: Intent) -> None:
            queue = payloads.queue(queue_name, self.redis)
            job = queue.create_job(
                SYNC_JOB,
                args=(instance,),
                job_id=job_id,
                timeout=self.job_timeout,
                result_ttl=RESULT_TTL,
                failure_ttl=FAILURE_TTL,
                meta={"otel": intent.carrier},
                description=f"sync {instance} ({intent.trigger})",
            )
            queue.enqueue_job(job, pipeline=pipe)

        return enqueue

    def wait(self, job: JobRef, timeout: float) -> dict[str, Any] | None:
        """The job's return value once it finished; an error dict if it failed; None if it has
        not finished within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self._result(job.job_id)
            if found is not None or time.monotonic() >= deadline:
                return found
            time.sleep(0.1)

    def _result(self, job_id: str) -> dict[str, Any] | None:
        if job_id.startswith("check-"):
            answer = self.checks.answer_of(job_id)
            followed = answer.get("followed_by") if answer is not None else None
            return self._result(str(followed)) if followed else answer
        try:
            job = payloads.fetch(job_id, self.redis)
        except NoSuchJobError:
            return None
        status = job.get_status()
        if status == JobStatus.FINISHED:
            value = job.return_value()
            return value if isinstance(value, dict) else {"result": value}
        if status in _FAILED:
            lines = (job.exc_info or "").strip().splitlines()
            reason = lines[-1] if lines else str(status)
            return {"error": f"job {job_id} {status}: {reason}", "resources": []}
        return None

    # -- the worker's half --------------------------------------------------------------------

    def claim(self, instance: str, job_id: str, *, worker: str) -> Pending | None:
        return self.pending.claim(instance, job_id, worker=worker, now=time.time())

    def finish(self, instance: str, job_id: str, *, fallback_queue: str) -> str | None:
        """End a claimed sync; its follow-up (if any) goes to the instance's current owner,
        looked up only when there is one."""

        def queue() -> str:
            try:
                return self.queue_for(instance)
            except NoWorkers:  # not even the finishing worker is live: keep the queue it had
                return fallback_queue

        return self.pending.finish(
            instance, job_id, queue=queue, enqueue=self._enqueue_sync(instance)
        )

    def defer(self, instance: str, intent: Intent, *, delay: float) -> None:
        self.pending.defer(instance, intent, at=time.time() + delay)

    def cancel_deferred(self, instance: str, *, served_by: str = "") -> Intent | None:
        """Drop the deferred sync (a retry, a dependency wait) of `instance`, which the sync of
        trace `served_by` now serves; the dropped intent's trace gets a `gitfleet.sync.merged`
        span naming that sync's trace."""
        dropped = self.pending.cancel_deferred(instance)
        if dropped is not None and trace_of(dropped.carrier) != served_by:
            _merged_span(instance, dropped, "", served_by)
        return dropped

    def pump(self, now: float) -> list[JobRef]:
        """Request every deferred sync that is due at `now`. Without a live worker, what was
        popped is deferred again by a second and `NoWorkers` raised, so nothing is lost."""
        due = self.pending.due(now)
        refs = []
        for index, (instance, intent) in enumerate(due):
            try:
                refs.append(self.request_intent(instance, intent))
            except NoWorkers:
                for later, kept in due[index:]:
                    self.pending.defer(later, kept, at=now + 1.0)
                raise
        return refs

    def hand_back(self, instance: str, job_id: str) -> bool:
        """Give back the sync `job_id` this worker claimed but will not finish (it is shutting
        down): queue it again for the instance's owner, as `recover` does for a dead worker's,
        without waiting for its lease to expire. False when the sync is no longer this job's,
        or no worker is live (then `recover` moves it once one is)."""
        current = self.pending.get(instance)
        if current is None or current.job_id != job_id or current.state != "running":
            return False

        def drop(pipe: Pipeline, old: Pending) -> None:  # the running job stays rq's to end
            pipe.lrem(payloads.queue(old.queue, self.redis).key, 0, old.job_id)

        try:
            queue = self.queue_for(instance)
        except NoWorkers:
            return False
        moved = self.pending.requeue(
            instance,
            current,
            queue=queue,
            new_id=self.new_job_id("sync", instance),
            enqueue=self._enqueue_sync(instance),
            drop=drop,
        )
        return moved is not None

    # -- recovery (the coordinator's scheduler) -----------------------------------------------

    def recover(
        self, now: float, *, grace: float = 10.0, margin: float = RECOVERY_MARGIN
    ) -> list[str]:
        """Move pending syncs stranded by dead workers; return the instances moved.

        Queued in the queue of a worker that is no longer live (or whose job vanished): moved
        to the current owner. Running, claimed more than `grace` seconds ago, with the
        instance's lease expired at least `margin` seconds past its last deadline (Redis
        clock): its worker died or froze mid-sync, so it runs again on the owner. The margin
        lets a frozen holder that wakes up see its lease lost (its guard) before a new holder
        starts; its writes are fenced anyway (`routing.leases`).
        """
        live = set(self.owners.live())
        moved = self._recover_checks(live)
        for instance in self.pending.instances():
            current = self.pending.get(instance)
            stranded = current is not None and self._stranded(
                instance, current, live, now, grace, margin
            )
            if stranded and current is not None and self._move(instance, current):
                moved.append(instance)
        return moved

    def _recover_checks(self, live: set[str]) -> list[str]:
        """The quiet checks left waiting for workers that are gone, asked again as normal
        syncs (each routed to its instance's owner now)."""
        moved: list[str] = []
        answers: dict[str, dict[str, Any]] = {}
        if not live:  # nowhere to move them yet: they wait for the next recovery
            return moved
        for worker in self.checks.workers():
            if worker in live:
                continue
            for check in self.checks.drain(worker):
                ref = self.request_intent(check.instance, check.intent)
                answers[check.check_id] = checks.followed_by(ref.job_id)
                moved.append(check.instance)
        self.checks.answer(answers)
        return moved

    def _stranded(
        self, instance: str, p: Pending, live: set[str], now: float, grace: float, margin: float
    ) -> bool:
        if p.state == "queued":
            dead = self.worker_of(p.queue) not in live
            return dead or not Job.exists(p.job_id, connection=self.redis)
        if p.state == "running":
            if now - p.started <= grace:
                return False
            expired = self.leases.expired_for(instance)
            return expired is not None and expired >= margin
        return False

    def _move(self, instance: str, stranded: Pending) -> bool:
        def drop(pipe: Pipeline, old: Pending) -> None:
            pipe.lrem(payloads.queue(old.queue, self.redis).key, 0, old.job_id)
            pipe.delete(Job.key_for(old.job_id))

        moved = self.pending.requeue(
            instance,
            stranded,
            queue=self.queue_for(instance),
            new_id=self.new_job_id("sync", instance),
            enqueue=self._enqueue_sync(instance),
            drop=drop,
        )
        return moved is not None
