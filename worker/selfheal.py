"""Self-heal on the worker: watch what this worker's apps manage, and sync on drift.

Every couple of seconds `refresh` works out which instances this worker owns (the shard map)
and which kinds their last sync reported; it then runs one watch per
(cluster, kind) on objects labelled `gitfleet.io/app` (`fleet.kube.watch`), shared by every app on
that cluster, and stops the watches nobody has needed for ten minutes (hooks' kinds come and
go with the syncs that run them) or whose credentials changed. A kind this worker's own sync
declares for the first time is watched at once (`declare`).

Every event that is not gitfleet's own write marks its instance touched, which is what lets a
periodic sync of an untouched instance skip the cluster entirely (`worker.quiet`). The sync's
own writes and deletions never count, as drift or as activity: its applies (`worker.drift`),
its hooks (created and deleted every run), objects being deleted, and DELETED events that
arrive while this worker syncs the instance, which are judged once the sync says what it
declared (`begin` / `declare`): an object it pruned, or deleted and created again, is its own
doing; a declared object still missing is drift.

Drift (`worker.drift`: a declared field another manager took, named per field with the
manager, `/scale` writes included) is recorded in the instance's status for every watched app
(`InstanceStatus.drift`), minus the managers the app's ignore rules name (an HPA). It becomes
a self-heal sync only for apps with automated sync and `self_heal` on, as in Argo CD: an app
whose automated sync is off (a rollback turns it off) keeps what a person pinned, and its
drift is only reported. Nor does a live object carrying `gitfleet.io/self-heal: "false"` (the
debugging bypass) heal. The sync is debounced: it waits until the object has been quiet for
the delay, which doubles each time the same object drifts again within the window, and after
`fight_limit` heals the worker stops healing that object and says so in the instance's status
(another controller is fighting over the field). The sync itself goes through the dispatcher,
so it merges with any pending sync and still honours the sync windows (self-heal is an
automated trigger).

Each self-heal starts its own trace (`gitfleet.self-heal`, naming the drifted objects, and each
drifted field with the manager that changed it); the sync joins it through the job, as an
API-triggered sync joins the API's.

The watch caches are not handed to the sync engine yet: `fleet.engine.sync.run` reads live objects
through `KubeClient.get`, and a cache lagging by one event would make the diff skip a needed
apply. Reusing them needs a cache-aware client that falls back to GET on a miss.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from opentelemetry import propagate

from fleet.control.registry.instances import instance_key, split_instance
from fleet.control.registry.records import AppRecord
from fleet.control.registry.syncrecords import DriftRecord, ResourceRecord, declared_refs
from fleet.control.routing.sharding import NoWorkers
from fleet.engine.plan.hooks import HOOK_ID_LABEL
from fleet.engine.plan.order import is_hook
from fleet.engine.plan.tracking import APP_LABEL, is_self_heal_disabled
from fleet.errors import FleetError
from fleet.kube.watch import Event, Watch
from fleet.model import Manifest, ObjectRef, Trigger
from fleet.telemetry import spans as telemetry
from worker import status
from worker.drift import Fights, Judgement, judge
from worker.runtime import Runtime

log = logging.getLogger("gitfleet.selfheal")

WatchKey = tuple[str, str, str]  # cluster, apiVersion, kind
FULL_RELOAD_EVERY = 60.0  # seconds between refreshes that re-read every status
STATUS_CHUNK = 500
"""Statuses a refresh reads per round trip. A one-object app's status is about 1.3 KB of JSON:
reading all of a worker's 5,000 at once held about 6.5 MB of replies at the peak of every full
reload, which the allocator kept, so the worker's memory grew with the apps by more than what
it keeps of them."""
WATCH_LINGER = 600.0  # seconds an unneeded watch keeps running before it is stopped


@dataclass
class _Running:
    watch: Watch
    thread: threading.Thread


@dataclass
class _Due:
    at: float
    objects: set[str] = field(default_factory=set)
    changes: set[str] = field(default_factory=set)  # "<object> <field> changed by <manager>"


class SelfHeal:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        s = runtime.settings
        self.fights = Fights(base=s.debounce, limit=s.fight_limit, window=s.fight_window)
        self._watches: dict[WatchKey, _Running] = {}
        self._declared: dict[str, AbstractSet[ObjectRef]] = {}
        self._due: dict[str, _Due] = {}
        self._gave_up: set[str] = set()
        self._heal: set[str] = set()  # instances whose app self-heals (the rest are watched only)
        self.touched: dict[str, float] = {}  # instance -> time of the last event on its objects
        self._lock = threading.Lock()
        self._healing_apps: set[str] = set()
        self._status_objects: dict[str, AbstractSet[ObjectRef]] = {}  # instance -> from its status
        self._full_reload_at = 0.0
        self._shard_stamp: object = None  # the shard map's stamp at the last full refresh
        self._wanted: set[WatchKey] = set()  # the watches the declared objects need
        self._declared_meanwhile: set[str] = set()  # declared while a refresh was reading
        self._ignored: dict[str, frozenset[str]] = {}  # instance -> managers its app ignores
        self._syncing: dict[str, list[Event]] = {}  # instance -> deletions seen during its sync
        self._reports: dict[str, list[DriftRecord]] = {}  # drift to record in the status
        self._gave_up_on: dict[str, str] = {}  # instance -> why self-heal stopped
        self._unneeded: dict[WatchKey, float] = {}  # watch -> since when nobody needs it
        self._watch_lock = threading.RLock()  # starting and stopping watches
        # events by verdict: drift, paused, ignored (an ignored manager's), activity (no drift),
        # own (gitfleet's writes), hook
        self.seen: Counter[str] = Counter()

    # -- what to watch ------------------------------------------------------------------------

    def refresh(self, now: float | None = None) -> None:
        """Start and stop watches to match the instances this worker owns. A watch nobody needs
        is stopped only after `WATCH_LINGER` seconds: the kinds an instance declares come and go
        with its hooks (a Job hook is reported by the syncs that run hooks only), and a watch
        restarted for each would keep the next periodic check from being quiet."""
        stamp = time.monotonic() if now is None else now
        declared = self._owned_declarations()
        if declared is None:  # the shard map has not moved: the kinds wanted are as they were
            with self._lock:
                wanted = set(self._wanted)
        else:
            wanted = {
                (split_instance(i)[1], r.api_version, r.kind)
                for i, refs in declared.items()
                for r in refs
            }
            heal = {i for i in declared if self._heals_instance(i)}
            with self._lock:
                self._declared = declared
                self._heal = heal
                self._wanted = wanted
        # every refresh: a watch that failed to start is tried again, one whose cluster
        # credentials changed restarts, one nobody needs any more lingers, then stops
        with self._watch_lock:
            for key in set(self._watches) - wanted:
                since = self._unneeded.setdefault(key, stamp)
                if stamp - since >= WATCH_LINGER:
                    self._stop_watch(key)
            for key in wanted:
                self._unneeded.pop(key, None)
                self._ensure_watch(key)

    def _heals_instance(self, instance: str) -> bool:
        return instance in self._healing_apps

    def _owned_declarations(self) -> dict[str, AbstractSet[ObjectRef]] | None:
        """instance -> the objects its last sync declared, for every instance this worker owns
        (self-heal apps heal from the events; the others use them for quiet periodic checks);
        None when neither the registry nor the live workers changed since the last refresh.

        Incremental, so a refresh stays cheap with thousands of apps: nothing is read while the
        shard map's stamp (registry generation, live workers) stays as it was, app records are
        re-read only when the registry generation moved (`Store.list_apps_cached`), and statuses
        only for instances this worker has not seen yet (its own syncs report theirs through
        `declare`). Every `FULL_RELOAD_EVERY` seconds every status is read again, which picks
        up statuses another worker wrote while an instance moved between shards."""
        now = time.monotonic()
        full = now >= self._full_reload_at
        try:
            shard_stamp, shard = self.runtime.dispatcher.owners.current_if_changed(
                None if full else self._shard_stamp
            )
        except NoWorkers:
            self._shard_stamp = None
            return {}
        if shard is None:
            return None
        if full:
            self._full_reload_at = now + FULL_RELOAD_EVERY
        apps = {a.name: a for a in self.runtime.store.list_apps_cached()}
        owned = []
        healing = set()
        ignored = {}
        for instance, worker in shard.items():
            app, _ = split_instance(instance)
            record = apps.get(app)
            if worker == self.runtime.name and record and not record.deleting:
                owned.append(instance)
                ignored[instance] = _ignored_managers(record)
                if _heals(record):
                    healing.add(instance)
        with self._lock:
            self._declared_meanwhile = set()
            missing = owned if full else [i for i in owned if i not in self._status_objects]
        loaded = self._load_declared(missing)
        with self._lock:
            current, fresh = self._status_objects, self._declared_meanwhile
            self._status_objects = {
                i: current.get(i, frozenset()) if i in fresh or i not in loaded else loaded[i]
                for i in owned
            }
            self._healing_apps = healing
            self._ignored = ignored
            self._shard_stamp = shard_stamp  # the next refresh may skip until the map moves
            return dict(self._status_objects)

    def begin(self, instance: str) -> None:
        """This worker starts syncing `instance`: hold the deletions its watches see until the
        sync says what it declared (`declare`), so its prunes and recreates are not drift."""
        with self._lock:
            self._syncing[instance] = []

    def declare(self, instance: str, resources: Sequence[ResourceRecord]) -> None:
        """What this worker's own sync of `instance` just declared (saves a status read); ends
        the sync that `begin` started."""
        cluster = split_instance(instance)[1]
        with self._lock:
            refs = self._status_objects[instance] = _declared_refs(resources)
            self._declared_meanwhile.add(instance)
            watched = instance in self._declared
            if watched:
                self._declared[instance] = refs
        if watched:  # a kind new to this worker is watched now, not at the next refresh
            keys = {(cluster, r.api_version, r.kind) for r in refs}
            with self._lock:
                self._wanted |= keys
            with self._watch_lock:
                for key in keys - set(self._watches):
                    self._ensure_watch(key)
        self.end(instance)

    def end(self, instance: str, now: float | None = None) -> None:
        """The sync of `instance` that `begin` started is over (idempotent): each deletion seen
        meanwhile is drift only if the object is declared now and did not come back (the
        sync's prunes and recreates are its own)."""
        with self._lock:
            held = self._syncing.pop(instance, None)
            declared = self._declared.get(instance)
        cluster = split_instance(instance)[1]
        for event in held or ():
            ref = ObjectRef.of(event.obj)
            if declared is None or ref not in declared or self._is_back(cluster, ref):
                continue
            self._judged(instance, ref, judge(event.type, event.obj, None, declared=True), now)

    def _is_back(self, cluster: str, ref: ObjectRef) -> bool:
        """Whether a deleted object exists again (a recreate): the watch's cache, else the
        cluster (the ADDED event may trail the sync's end by a moment)."""
        running = self._watches.get((cluster, ref.api_version, ref.kind))
        if running is not None and running.watch.get(ref.namespace, ref.name) is not None:
            return True
        try:
            return self.runtime.kube_for(cluster).get(ref) is not None
        except FleetError as e:
            log.warning("cluster=%s cannot read %s: %s", cluster, ref, e)
            return False

    def _load_declared(self, instances: list[str]) -> dict[str, AbstractSet[ObjectRef]]:
        """What each instance's stored status declares, read `STATUS_CHUNK` at a time."""
        found: dict[str, AbstractSet[ObjectRef]] = {}
        for start in range(0, len(instances), STATUS_CHUNK):
            chunk = instances[start : start + STATUS_CHUNK]
            raws = self.runtime.store.log.raw_statuses([split_instance(i) for i in chunk])
            for instance, raw in zip(chunk, raws, strict=True):
                # a status that declares nothing shares one empty set
                found[instance] = declared_refs(raw) if raw is not None else frozenset()
        return found

    def _ensure_watch(self, key: WatchKey) -> None:
        cluster, api_version, kind = key
        try:
            kube = self.runtime.kube_for(cluster)
            resource = kube.resource_for(api_version, kind)
        except FleetError as e:
            log.warning("cluster=%s cannot watch %s: %s", cluster, kind, e)
            return
        running = self._watches.get(key)
        if running is not None and running.watch.config == kube.config:
            return
        if running is not None:
            self._stop_watch(key)
        watch = Watch(kube.config, resource, label_selector=APP_LABEL, index_label=APP_LABEL)
        thread = threading.Thread(
            target=watch.run,
            args=(lambda event: self.on_event(cluster, event),),
            name=f"watch-{cluster}-{kind}",
            daemon=True,
        )
        self._watches[key] = _Running(watch, thread)
        thread.start()

    def _stop_watch(self, key: WatchKey) -> None:
        self._unneeded.pop(key, None)
        running = self._watches.pop(key, None)
        if running is not None:
            running.watch.stop()
            running.thread.join(timeout=5)

    def stop(self) -> None:
        with self._watch_lock:
            for key in list(self._watches):
                self._stop_watch(key)

    def watch_cache(self, cluster: str, api_version: str, kind: str) -> Watch | None:
        running = self._watches.get((cluster, api_version, kind))
        return running.watch if running else None

    def labelled(
        self, cluster: str, api_version: str, kind: str, app: str
    ) -> list[Manifest] | None:
        """`fleet.engine.prune.LabelledIndex`: the objects of `app` this worker's watch of the kind
        holds, so a sync's prune needs no label LIST; None when no watch is in step."""
        running = self._watches.get((cluster, api_version, kind))
        return running.watch.labelled(app) if running else None

    def not_quiet_since(self, instance: str, kinds: set[tuple[str, str]], since: float) -> str:
        """Why the instance's live objects may differ from what the sync that started at
        `since` left (and saw); "" when every kind of it has been watched without a gap since
        before `since` and no event touched its objects after it."""
        cluster = split_instance(instance)[1]
        for api_version, kind in kinds:
            running = self._watches.get((cluster, api_version, kind))
            watch = running.watch if running else None
            if watch is None:
                return f"no watch of {kind} on {cluster}"
            if not watch.in_step:
                return f"the watch of {kind} on {cluster} is catching up"
            if (watch.listed_at or since) >= since:
                return f"the watch of {kind} on {cluster} started after the last sync"
        with self._lock:
            if instance not in self._declared:
                return "not among this worker's watched instances yet"
            touched = self.touched.get(instance, 0.0)
        if touched >= since:
            return f"an event touched its objects {touched - since:.3f}s after the last sync began"
        return ""

    # -- events -------------------------------------------------------------------------------

    def on_event(self, cluster: str, event: Event, now: float | None = None) -> None:
        labels = (event.obj.get("metadata") or {}).get("labels") or {}
        app = labels.get(APP_LABEL)
        if not app:
            return
        if HOOK_ID_LABEL in labels or is_hook(event.obj):
            with self._lock:
                self.seen["hook"] += 1  # each sync creates and deletes its own hooks
            return
        instance, ref = instance_key(str(app), cluster), ObjectRef.of(event.obj)
        with self._lock:
            declared = self._declared.get(instance)
            if declared is None:
                return
            held = self._syncing.get(instance)
            if event.type == "DELETED" and held is not None:
                held.append(event)  # judged when the sync ends (`end`)
                return
            ignore = self._ignored.get(instance, frozenset())
        judgement = judge(
            event.type, event.obj, event.old, declared=ref in declared, ignore_managers=ignore
        )
        if is_self_heal_disabled(event.obj) and judgement.is_drift:
            with self._lock:
                self.seen["paused"] += 1
                self.touched[instance] = time.time() if now is None else now
            return
        self._judged(instance, ref, judgement, now)

    def _judged(
        self, instance: str, ref: ObjectRef, judgement: Judgement, now: float | None
    ) -> None:
        """Count one judged event: touch the instance, report its drift, heal if the app does
        (as its record says now: a rollback may be newer than the last refresh)."""
        stamp = time.time() if now is None else now
        heals = judgement.is_drift and self._still_heals(instance)
        with self._lock:
            self.seen[_verdict(judgement)] += 1
            if not judgement.activity:
                return
            self.touched[instance] = stamp
            if not judgement.is_drift:
                return
            records = _records(ref, judgement, stamp, heals)
            self._reports.setdefault(instance, []).extend(records)
            if heals:
                self._note_drift(instance, ref, stamp, {r.describe() for r in records})

    def _note_drift(
        self, instance: str, ref: ObjectRef, now: float, changes: set[str] | None = None
    ) -> None:
        key = f"{instance}/{ref}"
        delay = self.fights.note(key, now)
        if delay is None:
            self._give_up(instance, ref, key)
            return
        due = self._due.setdefault(instance, _Due(now + delay))
        due.at = max(due.at, now + delay)
        due.objects.add(str(ref))
        due.changes |= changes or set()

    def _give_up(self, instance: str, ref: ObjectRef, key: str) -> None:
        if key in self._gave_up:
            return
        self._gave_up.add(key)
        s = self.runtime.settings
        message = (
            f"self-heal stopped for {ref}: it drifted {self.fights.count(key)} times within "
            f"{s.fight_window:g}s, so another controller is likely fighting gitfleet over its "
            'fields; fix the other writer or set gitfleet.io/self-heal: "false" on the object'
        )
        log.warning("instance=%s %s", instance, message)
        self._gave_up_on[instance] = message
        app, cluster = split_instance(instance)
        status.note(self.runtime.store, app, cluster, message)

    # -- triggering ---------------------------------------------------------------------------

    def flush(self, now: float) -> list[str]:
        """Request a self-heal sync for every instance whose debounce delay has passed."""
        with self._lock:
            ready = {i: d for i, d in self._due.items() if d.at <= now}
            for instance in ready:
                del self._due[instance]
            self.fights.forget(now)
            self._gave_up = {k for k in self._gave_up if self.fights.count(k)}
            self._gave_up_on = {
                i: why
                for i, why in self._gave_up_on.items()
                if any(k.startswith(f"{i}/") for k in self._gave_up)
            }
            reports, self._reports = self._reports, {}
            stopped = dict(self._gave_up_on)
        heals = {i: self._still_heals(i) for i in set(reports) | set(ready)}
        for instance, records in reports.items():
            if not heals[instance]:  # the policy changed since the last refresh (a rollback)
                records = [replace(r, self_heal=False) for r in records]
            self._report(instance, records, stopped.get(instance, ""))
        for instance, due in ready.items():
            if heals[instance]:
                self._trigger(instance, sorted(due.objects), sorted(due.changes))
        return sorted(i for i in ready if heals[i])

    def _still_heals(self, instance: str) -> bool:
        """Whether the app of `instance` self-heals now (its record, read again: a rollback or
        a policy change may be newer than the last refresh)."""
        with self._lock:
            if instance not in self._heal:
                return False
        try:
            return _heals(self.runtime.store.get_app(split_instance(instance)[0]))
        except FleetError:
            return False

    def _report(self, instance: str, records: list[DriftRecord], stopped: str = "") -> None:
        """Write the drift into the instance's status (the last drift of each field wins);
        `stopped`: why self-heal gave up on some object of it, which stays first."""
        latest = {(r.kind, r.namespace, r.name, r.field): r for r in records}
        drift = tuple(latest.values())
        healing = any(r.self_heal for r in drift)
        then = "self-heal will revert it" if healing else "not reverted: self-heal is off"
        message = "drift: " + "; ".join(r.describe() for r in drift) + f" ({then})"
        if stopped:
            message = f"{stopped}. Last {message}"
        app, cluster = split_instance(instance)
        log.info("instance=%s %s", instance, message)
        try:
            status.note_drift(self.runtime.store, app, cluster, drift, message)
        except FleetError as e:
            log.warning("instance=%s drift not recorded: %s", instance, e)

    def _trigger(self, instance: str, objects: list[str], changes: Sequence[str] = ()) -> None:
        app, cluster = split_instance(instance)
        attrs = {
            "app": app,
            "cluster": cluster,
            "objects": ", ".join(objects),
            "drift": "; ".join(changes),  # each field and the manager that changed it
        }
        with telemetry.stage("self-heal", **attrs):
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            try:
                self.runtime.dispatcher.request_sync(
                    app, cluster, trigger=Trigger.SELF_HEAL, carrier=carrier
                )
            except FleetError as e:
                log.warning("instance=%s self-heal not requested: %s", instance, e)
        log.info("instance=%s self-heal requested for drift of %s", instance, ", ".join(objects))


def _declared_refs(resources: Sequence[ResourceRecord]) -> set[ObjectRef]:
    return {r.ref for r in resources if r.declared and r.kind}


def _heals(app: AppRecord) -> bool:
    """Self-heal needs automated sync too (Argo CD's `automated.selfHeal`): with automated sync
    off (a rollback turns it off) what a person pinned stays until a person moves it."""
    policy = app.sync_policy
    return policy.automated and policy.self_heal and not app.deleting and not policy.suspended


def _verdict(judgement: Judgement) -> str:
    if judgement.is_drift:
        return "drift"
    if judgement.ignored:
        return "ignored"  # changed by a manager the app ignores (an HPA)
    return "activity" if judgement.activity else "own"


def _ignored_managers(app: AppRecord) -> frozenset[str]:
    return frozenset(m for rule in app.sync_policy.ignore_differences for m in rule.managers)


def _records(ref: ObjectRef, judgement: Judgement, at: float, heals: bool) -> list[DriftRecord]:
    stamp = datetime.fromtimestamp(at, UTC)
    return [
        DriftRecord(
            group=ref.group,
            kind=ref.kind,
            namespace=ref.namespace,
            name=ref.name,
            field=change.field,
            manager=change.manager,
            operation=change.operation,
            subresource=change.subresource,
            at=stamp,
            self_heal=heals,
        )
        for change in judgement.drift
    ]
