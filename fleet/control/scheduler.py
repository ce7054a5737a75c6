"""The coordinator's reconcile scheduler: who is due, when, and what a dead worker left behind.

Every second the active scheduler
1. requests an `interval` sync of every automated app instance that is due: last requested at
   `last`, due at `fleet.control.backoff.next_due(last, interval, jitter, key=instance)`, so each
   instance keeps a stable, deterministic offset and a fleet created in one second spreads
   out; an instance never requested is due at once, and asked for a sync rather than a quiet
   check (no check can find an instance never synced quiet). An instance whose sync windows block
   automated syncs is not requested (and not marked as requested, so it runs as soon as the
   window allows); the reason is kept in `<p>:scheduler:blocked` for people to read. One app's
   bad record never stops the tick: a sync window that cannot be evaluated (stored before the
   API probed windows), or anything else that fails while one app is considered, blocks that
   app alone, with the reason also written as its instances' status message;
2. pumps the deferred syncs that are due (retries, dependency waits), as workers also do;
3. moves the pending syncs of dead workers to the new owners (`Dispatcher.recover`);
4. advances the progressive rollouts one step (`fleet.control.rollouts.controller`).

Several coordinator replicas may run; one holds the lock `<p>:scheduler:lease:coordinator`
(a `fleet.control.routing.leases` lease renewed every tick, TTL several ticks), so a replica that
dies hands over within the TTL and two replicas never both dispatch. `tick(now)` is one step, so
tests drive it deterministically; `start()` / `stop()` run it in a thread for the process.

The API's lifespan runs it around its `yield` when its settings turn the scheduler on (the
`gitfleet api` process does): `with scheduling(store, dispatcher): yield`.

App sets, when it is given them, are never reconciled in the tick (their git fetches could
hold it): `start()` / `stop()` also run their own thread (`fleet.control.appsets.runner`, its
own lease), which bounds each set's time; the apps it generates are dispatched by the next tick.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from opentelemetry import propagate
from redis.typing import EncodableT, FieldT

from fleet.control.appsets.reconcile import AppSets
from fleet.control.appsets.runner import SET_DEADLINE, AppSetRunner
from fleet.control.backoff import next_due
from fleet.control.connection import TRANSIENT, Outage
from fleet.control.keys import Keys
from fleet.control.policy import window_block
from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import AppRecord, ClusterRecord
from fleet.control.registry.store import Store
from fleet.control.registry.syncrecords import InstanceStatus
from fleet.control.rollouts.controller import RolloutController
from fleet.control.rollouts.heads import GitHeads, Heads
from fleet.control.routing.dispatch import Dispatcher
from fleet.control.routing.leases import Lease
from fleet.control.routing.sharding import NoWorkers
from fleet.errors import FleetError
from fleet.model import Trigger
from fleet.telemetry import spans as telemetry

log = logging.getLogger("gitfleet.scheduler")

JITTER_SHARE = 0.1
LOCK_NAME = "coordinator"


@dataclass(frozen=True)
class TickReport:
    """What one tick did. `leader` is False when another replica holds the lock."""

    leader: bool
    dispatched: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)
    pumped: int = 0
    recovered: list[str] = field(default_factory=list)
    rollouts: list[str] = field(default_factory=list)


class Scheduler:
    def __init__(
        self,
        store: Store,
        dispatcher: Dispatcher,
        *,
        period: float = 1.0,
        lock_ttl: float = 10.0,
        recover_grace: float = 10.0,
        holder: str | None = None,
        appsets: AppSets | None = None,
        heads: Heads | None = None,
        set_deadline: float = SET_DEADLINE,
    ) -> None:
        self.store = store
        self.appsets = appsets  # reconciled in their own thread (`fleet.control.appsets`)
        self.appset_runner = (
            AppSetRunner(appsets, set_deadline=set_deadline) if appsets is not None else None
        )
        self.dispatcher = dispatcher
        self.period = period
        self.lock_ttl = lock_ttl
        self.recover_grace = recover_grace
        self.holder = holder or f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        keys = Keys(dispatcher.prefix)
        self.lock = Lease(store.redis, keys.scheduler_lease)
        self.last_key = keys.scheduler_last
        self.blocked_key = keys.scheduler_blocked
        self.rollouts = RolloutController(store, dispatcher, heads or GitHeads(store))
        # instance -> (interval, its jittered period): `next_due` hashes the instance's name,
        # which for 10,000 instances was a quarter of a tick; forgotten with the instance
        self._periods: dict[str, tuple[float, float]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one step -----------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> TickReport:
        now = time.time() if now is None else now
        if not self._lead():
            return TickReport(leader=False)
        try:
            clusters = self.store.list_clusters()  # one read for the dispatch and the rollouts
            dispatched, blocked = self._dispatch_due(now, clusters)
            pumped = len(self.dispatcher.pump(now))
            recovered = self.dispatcher.recover(now, grace=self.recover_grace)
            rollouts = self.rollouts.tick(now, clusters)
        except NoWorkers:
            log.warning("no live worker: nothing dispatched; start a worker")
            return TickReport(leader=True)
        return TickReport(True, dispatched, blocked, pumped, recovered, rollouts)

    def _lead(self) -> bool:
        lock = self.lock
        if lock.renew(LOCK_NAME, self.holder, self.lock_ttl):
            return True
        return lock.acquire(LOCK_NAME, self.holder, self.lock_ttl)

    def _dispatch_due(
        self, now: float, clusters: list[ClusterRecord]
    ) -> tuple[list[str], dict[str, str]]:
        last, at = self._last(), _utc(now)
        dispatched, blocked, current = [], {}, set()
        for app in self.store.list_apps_cached():
            if not app.sync_policy.automated or app.deleting:
                continue
            targets = self.store.instances(app, clusters)
            current |= {instance_key(app.name, c) for c in targets}
            due, reason = self._considered(app, targets, last, now, at)
            if reason:
                blocked.update({instance_key(app.name, c): reason for c in due})
            elif due:
                dispatched += self._request(app, due, last, now)
        self._remember_blocked(blocked)
        self._forget_gone(last, current)
        return dispatched, blocked

    def _considered(
        self, app: AppRecord, targets: list[str], last: dict[str, float], now: float, at: datetime
    ) -> tuple[list[str], str]:
        """The clusters where `app` is due, and why its windows block them ("" when not);
        whatever goes wrong with this one record blocks this app only. `at`: `now` as a date.
        An app with nothing due and no sync window is done without evaluating its windows,
        which could neither block it nor fail; with windows they are evaluated, due or not, so
        a record whose evaluation raises is blocked and noted at every tick, as before."""
        try:
            due = [c for c in targets if self._due(app, c, last, now)]
            if not due and not app.sync_policy.sync_windows:
                return due, ""
            block = window_block(app, Trigger.INTERVAL, at)
        except Exception as e:  # one app's record must never stop the tick for the others
            log.exception("app=%s cannot be scheduled", app.name)
            reason = f"not scheduled: app {app.name} cannot be evaluated ({e}); fix it with PUT"
            self._note(app, targets, reason)
            return targets, reason
        if not due or not block.reason:
            return due, ""
        if block.broken:
            self._note(app, due, block.reason)
        return due, block.reason

    def _note(self, app: AppRecord, clusters: list[str], message: str) -> None:
        """Make `message` the status message of each instance (written only when it changes,
        so a record that stays broken costs one read per tick)."""
        for cluster in clusters:
            status = self.store.get_status(app.name, cluster) or InstanceStatus()
            if status.message != message:
                self.store.set_status(app.name, cluster, replace(status, message=message))

    def _due(self, app: AppRecord, cluster: str, last: dict[str, float], now: float) -> bool:
        instance = instance_key(app.name, cluster)
        requested = last.get(instance)
        if requested is None:
            return True
        return requested + self._period(instance, app.sync_policy.interval_s) <= now

    def _period(self, instance: str, interval: float) -> float:
        """`next_due(0, interval, ...)` for `instance`, kept while its interval stays: `last`
        plus it is `next_due(last, ...)` to the last bit (the same float sum)."""
        known = self._periods.get(instance)
        if known is None or known[0] != interval:
            period = next_due(0.0, interval, jitter_share=JITTER_SHARE, key=instance)
            known = self._periods[instance] = (interval, period)
        return known[1]

    def _request(
        self, app: AppRecord, clusters: list[str], last: dict[str, float], now: float
    ) -> list[str]:
        done = []
        for cluster in clusters:
            # no quiet check for an instance the scheduler has no record of: one never
            # requested (or forgotten when it stopped being a target) is asked for a sync, whose
            # rq job still ends quietly if nothing changed. A newcomer to an app's rollout is
            # pinned to the stable revision by the worker (`RolloutStore.pin_for`)
            direct = instance_key(app.name, cluster) not in last
            with telemetry.stage("scheduler.interval", app=app.name, cluster=cluster):
                carrier: dict[str, str] = {}
                propagate.inject(carrier)
                try:
                    self.dispatcher.request_sync(
                        app.name,
                        cluster,
                        trigger=Trigger.INTERVAL,
                        carrier=carrier,
                        check_first=not direct,
                    )
                except NoWorkers:
                    raise
                except FleetError as e:
                    log.warning(
                        "app=%s cluster=%s interval sync not requested: %s", app.name, cluster, e
                    )
                    continue
            done.append(instance_key(app.name, cluster))
        if done:
            self.store.redis.hset(self.last_key, mapping=dict.fromkeys(done, now))
        return done

    def _forget_gone(self, last: dict[str, float], current: set[str]) -> None:
        gone = [instance for instance in last if instance not in current]
        if gone:
            self.store.redis.hdel(self.last_key, *gone)
        if len(self._periods) > len(current):
            self._periods = {i: p for i, p in self._periods.items() if i in current}

    def _last(self) -> dict[str, float]:
        raw: dict[bytes, bytes] = self.store.redis.hgetall(self.last_key)  # type: ignore[assignment]
        return {k.decode(): float(v) for k, v in raw.items()}

    def _remember_blocked(self, blocked: dict[str, str]) -> None:
        pipe = self.store.redis.pipeline(transaction=True)
        pipe.delete(self.blocked_key)
        if blocked:
            mapping: dict[FieldT, EncodableT] = {k: v for k, v in blocked.items()}
            pipe.hset(self.blocked_key, mapping=mapping)
        pipe.execute()

    # -- the thread ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="gitfleet-scheduler", daemon=True)
        self._thread.start()
        if self.appset_runner is not None:
            self.appset_runner.start()

    def stop(self) -> None:
        self._stop.set()
        if self.appset_runner is not None:
            self.appset_runner.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.lock.release(LOCK_NAME, self.holder)

    def _loop(self) -> None:
        pause = self.period
        outage = Outage(log, "scheduler")
        while not self._stop.wait(pause):
            started = time.monotonic()
            try:
                self.tick()
                outage.ok()
            except TRANSIENT as e:
                outage.failed(e)
            except Exception:
                log.exception("scheduler tick failed")
            pause = next_pause(self.period, time.monotonic() - started)


def next_pause(period: float, tick_seconds: float) -> float:
    """The wait before the next tick: the period, stretched so ticks take at most a fifth of
    the time. A tick reads every app; with 10,000 apps it costs a noticeable share of a core,
    and a scheduler that ran back to back would starve the API it shares a process with."""
    return max(period, 4.0 * tick_seconds)


def _utc(now: float) -> datetime:
    return datetime.fromtimestamp(now, UTC)


@contextmanager
def scheduling(
    store: Store,
    dispatcher: Dispatcher,
    appsets: AppSets | None = None,
    heads: Heads | None = None,
) -> Iterator[Scheduler]:
    """Run a scheduler in its thread for the block, and stop it (releasing the lock) after:
    the API lifespan's hook, with the dispatcher the lifespan opened."""
    scheduler = Scheduler(store, dispatcher, appsets=appsets, heads=heads)
    scheduler.start()
    try:
        yield scheduler
    finally:
        scheduler.stop()
