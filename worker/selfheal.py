"""Self-heal on the worker: watch what this worker's apps manage, and sync on drift.

Every couple of seconds `refresh` works out which instances this worker owns (the shard map)
and which kinds their last sync reported; it then runs one watch per
(cluster, kind) on objects labelled `gitfleet.io/app` (`fleet.kube.watch`), shared by every app on
that cluster, and stops the watches nobody needs any more (or whose credentials changed).

Every event marks its instance touched, which is what lets a periodic sync of an untouched
instance skip the cluster entirely (`worker.quiet`). For apps with `self_heal`, an event
becomes a self-heal sync of the owning instance when `worker.drift` calls it drift and
the live object does not carry `gitfleet.io/self-heal: "false"` (the debugging bypass). The
sync is debounced: it waits until the object has been quiet for the delay, which doubles each
time the same object drifts again within the window, and after `fight_limit` heals the worker
stops healing that object and says so in the instance's status (another controller is fighting
over the field). The sync itself goes through the dispatcher, so it merges with any pending
sync and still honours the sync windows (self-heal is an automated trigger).

Each self-heal starts its own trace (`gitfleet.self-heal`, naming the drifted objects); the
sync joins it through the job, as an API-triggered sync joins the API's.

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
from dataclasses import dataclass, field

from opentelemetry import propagate

from fleet.control.registry.instances import instance_key, split_instance
from fleet.control.registry.records import AppRecord
from fleet.control.registry.syncrecords import ResourceRecord
from fleet.control.routing.sharding import NoWorkers
from fleet.engine.plan.tracking import APP_LABEL, is_self_heal_disabled
from fleet.errors import FleetError
from fleet.kube.watch import Event, Watch
from fleet.model import Manifest, ObjectRef, Trigger
from fleet.telemetry import spans as telemetry
from worker import status
from worker.drift import Fights, is_drift
from worker.runtime import Runtime

log = logging.getLogger("gitfleet.selfheal")

WatchKey = tuple[str, str, str]  # cluster, apiVersion, kind
FULL_RELOAD_EVERY = 60.0  # seconds between refreshes that re-read every status


@dataclass
class _Running:
    watch: Watch
    thread: threading.Thread


@dataclass
class _Due:
    at: float
    objects: set[str] = field(default_factory=set)


class SelfHeal:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        s = runtime.settings
        self.fights = Fights(base=s.debounce, limit=s.fight_limit, window=s.fight_window)
        self._watches: dict[WatchKey, _Running] = {}
        self._declared: dict[str, set[ObjectRef]] = {}
        self._due: dict[str, _Due] = {}
        self._gave_up: set[str] = set()
        self._heal: set[str] = set()  # instances whose app self-heals (the rest are watched only)
        self.touched: dict[str, float] = {}  # instance -> time of the last event on its objects
        self._lock = threading.Lock()
        self._healing_apps: set[str] = set()
        self._status_objects: dict[str, set[ObjectRef]] = {}  # instance -> from its status
        self._full_reload_at = 0.0
        self._declared_meanwhile: set[str] = set()  # declared while a refresh was reading
        self.seen: Counter[str] = Counter()  # events by verdict: drift, paused, ignored

    # -- what to watch ------------------------------------------------------------------------

    def refresh(self) -> None:
        """Start and stop watches to match the self-heal instances this worker owns."""
        declared = self._owned_declarations()
        wanted = {
            (split_instance(i)[1], r.api_version, r.kind)
            for i, refs in declared.items()
            for r in refs
        }
        heal = {i for i in declared if self._heals_instance(i)}
        with self._lock:
            self._declared = declared
            self._heal = heal
        for key in set(self._watches) - wanted:
            self._stop_watch(key)
        for key in wanted:
            self._ensure_watch(key)

    def _heals_instance(self, instance: str) -> bool:
        return instance in self._healing_apps

    def _owned_declarations(self) -> dict[str, set[ObjectRef]]:
        """instance -> the objects its last sync declared, for every instance this worker owns
        (self-heal apps heal from the events; the others use them for quiet periodic checks).

        Incremental, so a refresh stays cheap with thousands of apps: app records are re-read
        only when the registry generation moved (`Store.list_apps_cached`), and statuses only
        for instances this worker has not seen yet (its own syncs report theirs through
        `declare`). Every `FULL_RELOAD_EVERY` seconds every status is read again, which picks
        up statuses another worker wrote while an instance moved between shards."""
        try:
            shard = self.runtime.dispatcher.owners.current()
        except NoWorkers:
            return {}
        now = time.monotonic()
        full = now >= self._full_reload_at
        if full:
            self._full_reload_at = now + FULL_RELOAD_EVERY
        apps = {a.name: a for a in self.runtime.store.list_apps_cached()}
        owned = []
        healing = set()
        for instance, worker in shard.items():
            app, _ = split_instance(instance)
            record = apps.get(app)
            if worker == self.runtime.name and record and not record.deleting:
                owned.append(instance)
                if _heals(record):
                    healing.add(instance)
        with self._lock:
            self._declared_meanwhile = set()
            missing = owned if full else [i for i in owned if i not in self._status_objects]
        loaded = self._load_declared(missing)
        with self._lock:
            current, fresh = self._status_objects, self._declared_meanwhile
            self._status_objects = {
                i: current.get(i, set()) if i in fresh or i not in loaded else loaded[i]
                for i in owned
            }
            self._healing_apps = healing
            return dict(self._status_objects)

    def declare(self, instance: str, resources: Sequence[ResourceRecord]) -> None:
        """What this worker's own sync of `instance` just declared (saves a status read)."""
        with self._lock:
            self._status_objects[instance] = _declared_refs(resources)
            self._declared_meanwhile.add(instance)
            if instance in self._declared:
                self._declared[instance] = self._status_objects[instance]

    def _load_declared(self, instances: list[str]) -> dict[str, set[ObjectRef]]:
        statuses = self.runtime.store.many_statuses([split_instance(i) for i in instances])
        return {
            i: _declared_refs(found.resources if found is not None else ())
            for i, found in zip(instances, statuses, strict=True)
        }

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
        running = self._watches.pop(key, None)
        if running is not None:
            running.watch.stop()
            running.thread.join(timeout=5)

    def stop(self) -> None:
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
        app = ((event.obj.get("metadata") or {}).get("labels") or {}).get(APP_LABEL)
        if not app:
            return
        instance, ref = instance_key(str(app), cluster), ObjectRef.of(event.obj)
        with self._lock:
            declared = self._declared.get(instance)
            if declared is None:
                return
            self.touched[instance] = time.time() if now is None else now
            if instance not in self._heal:
                return
            verdict = _verdict(event, declared=ref in declared)
            self.seen[verdict] += 1
            if verdict == "drift":
                self._note_drift(instance, ref, time.time() if now is None else now)

    def _note_drift(self, instance: str, ref: ObjectRef, now: float) -> None:
        key = f"{instance}/{ref}"
        delay = self.fights.note(key, now)
        if delay is None:
            self._give_up(instance, ref, key)
            return
        due = self._due.setdefault(instance, _Due(now + delay))
        due.at = max(due.at, now + delay)
        due.objects.add(str(ref))

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
        for instance, due in ready.items():
            self._trigger(instance, sorted(due.objects))
        return sorted(ready)

    def _trigger(self, instance: str, objects: list[str]) -> None:
        app, cluster = split_instance(instance)
        attrs = {"app": app, "cluster": cluster, "objects": ", ".join(objects)}
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
    return app.sync_policy.self_heal and not app.deleting


def _verdict(event: Event, *, declared: bool) -> str:
    if is_self_heal_disabled(event.obj):
        return "paused"
    if is_drift(event.type, event.obj, event.old, declared=declared):
        return "drift"
    return "ignored"
