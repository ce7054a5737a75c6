"""Quiet checks in batches: the worker's side of `fleet.control.routing.checks`.

One thread per worker (`QuietChecker`) looks every `POLL_S` for interval requests parked for
its instances (one Lua call, nothing else while none waits) and judges up to `BATCH` at a time
(`judge_batch`):

1. the registry as one batch reads it: app records from the in-memory app cache, the
   clusters and the shard map once, each project and its age key once;
2. every status of the batch in one pipeline;
3. per instance, the conditions of `worker.quiet` (`loud`: last sync clean, watches quiet
   since it started; `same`: the desired fingerprint unchanged), where the desired state of a
   (repository, revision) is resolved once per batch, and an instance's request, render
   lookup and fingerprint are made again only when the records they come from or the commit
   changed (`Desires`);
4. one compare-and-set per quiet instance, all in one round trip (`QuietChecks.stamp`): the
   `checked` stamp is written only over the very status that was read, and only while no
   sync is pending for the instance and no lease is held on it.

What is not quiet goes to the normal path, exactly as an rq job of today would run it: an
instance another worker owns, a status that changed under the check (the compare-and-set
refused it), a dirty or changed instance, and anything a full sync treats specially (a
deleting app, automated sync off, a sync window, a required plan, dependencies). An app or
cluster deleted meanwhile is skipped. A sync found pending answers for the check. Nothing
here talks to a cluster.

Each batch is one `gitfleet.quiet.checks` span with its counts, not one span per instance; the
status stamp and the webhook note (`fleet.control.pushes`) are those the rq path writes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fleet.control.connection import TRANSIENT
from fleet.control.plans import requires_plan
from fleet.control.policy import blocked_reason, check_source, request_for
from fleet.control.pushes import SYNCED, SyncedAt, spec_of
from fleet.control.registry.instances import clusters_for, split_instance
from fleet.control.registry.records import AppRecord, ClusterRecord, ProjectRecord
from fleet.control.registry.repos import normalize_repo
from fleet.control.registry.syncrecords import STATUS, InstanceStatus
from fleet.control.routing.checks import Check, Stamp, followed_by
from fleet.control.routing.sharding import NoWorkers
from fleet.engine import sync
from fleet.engine.contract import SyncRequest
from fleet.engine.fingerprint import fingerprint_of
from fleet.engine.limits import Limits
from fleet.engine.source.cache import Resolved
from fleet.errors import FleetError
from fleet.model import Outcome, Trigger
from fleet.telemetry import spans as telemetry
from worker import quiet
from worker.jobs import pinned_revision
from worker.runtime import Runtime
from worker.status import Answer

log = logging.getLogger("gitfleet.quiet")

BATCH = 200
POLL_S = 0.1  # how often the waiting checks are looked at: a check waits at most this long
# `Desires` forgets the instances this worker no longer checks (apps gone, instances moved to
# another worker) once it holds this many, and again each time its size has doubled since
SWEEP_AT = 4096


class Skip(Exception):
    """The instance is gone (its app deleted, or no longer deployed to the cluster)."""


class Full(Exception):
    """The instance needs the normal path; the message says why (logged at debug level)."""


@dataclass
class Registry:
    """What one batch reads of the registry, each record once."""

    runtime: Runtime
    apps: dict[str, AppRecord]
    clusters: dict[str, ClusterRecord]
    owners: dict[str, str]
    projects: dict[str, ProjectRecord] = dataclasses.field(default_factory=dict)
    age_keys: dict[str, str] = dataclasses.field(default_factory=dict)
    sources: set[tuple[str, str]] = dataclasses.field(default_factory=set)

    @classmethod
    def read(cls, runtime: Runtime) -> Registry:
        store = runtime.store
        apps = {a.name: a for a in store.list_apps_cached()}
        clusters = {c.name: c for c in store.list_clusters()}
        return cls(runtime, apps, clusters, runtime.dispatcher.owners.current())

    def project(self, name: str) -> ProjectRecord:
        if name not in self.projects:
            self.projects[name] = self.runtime.store.get_project(name)
        return self.projects[name]

    def check_source(self, app: AppRecord, project: ProjectRecord) -> None:
        """`policy.check_source` once per (repository URL, project) in the batch."""
        key = (app.source.repo, project.name)
        if key not in self.sources:
            check_source(app, project, self.runtime.remotes)
            self.sources.add(key)

    def age_key(self, project: str) -> str:
        if project not in self.age_keys:
            self.age_keys[project] = self.runtime.store.age_keys.key_for(project)
        return self.age_keys[project]


@dataclass(frozen=True, slots=True)
class _Known:
    """What the last check of an instance found: the values its request was built from
    (`Desires.of`), where that request pointed (repository, revision, the project's limits),
    the commit that resolved to, and the desired state there."""

    made_of: tuple[Any, ...]
    at: tuple[str, str, Limits]
    resolved: Resolved
    desired: sync.Desired


class Desires:
    """Desired states for a batch: each (repository, revision) resolved once per batch, and
    each instance's request built, its render looked up and its fingerprint computed again
    only when what they are made of changed: the records and values `request_for` reads, or
    the commit (a commit never changes, so neither does what it renders to). The memo holds
    one entry per instance, about 0.5 KB, so a new commit replaces entries instead of adding
    them, and `begin` drops those of instances the worker no longer checks."""

    def __init__(self) -> None:
        self._known: dict[str, _Known] = {}
        self._sweep_at = SWEEP_AT
        self._resolved: dict[tuple[str, str], Resolved] = {}
        self._specs: dict[str, tuple[AppRecord, str]] = {}

    def begin(self, registry: Registry) -> None:
        """A new batch: resolve again; when it is time, forget instances not this worker's and
        the specs of apps gone."""
        self._resolved.clear()
        if len(self._known) >= self._sweep_at:
            name, owners, apps = registry.runtime.name, registry.owners, registry.apps
            for instance in list(self._known):
                if owners.get(instance) != name or split_instance(instance)[0] not in apps:
                    del self._known[instance]
            for app in [a for a in self._specs if a not in apps]:
                del self._specs[app]
            self._sweep_at = max(SWEEP_AT, 2 * len(self._known))

    def __len__(self) -> int:
        """Instances remembered."""
        return len(self._known)

    def of(
        self,
        runtime: Runtime,
        instance: str,
        app: AppRecord,
        made_of: tuple[Any, ...],
        build: Callable[[], SyncRequest],
    ) -> tuple[sync.Desired, str]:
        """The desired state of `instance` and the revision its request asks (FleetError when
        it cannot be read). `build` makes the request; `made_of` holds every value it is a
        pure function of, compared by value, so equal values mean an equal request. The app's
        git credentials are read only when its repository must be fetched."""
        known = self._known.get(instance)
        if known is not None and known.made_of == made_of:
            resolved = self._resolve(runtime, app, *known.at)
            if resolved == known.resolved:
                return known.desired, known.at[1]
        request = build()
        at = (request.repo, request.revision, request.limits)
        resolved = self._resolve(runtime, app, *at)
        rendered = runtime.caches.renderer.render(
            runtime.caches.source, resolved, request.path, request.render, limits=request.limits
        )
        fingerprint = fingerprint_of(request, rendered.cache_key)
        desired = sync.Desired(fingerprint, resolved.commit, rendered.inputs)
        self._known[instance] = _Known(made_of, at, resolved, desired)
        return desired, request.revision

    def _resolve(
        self, runtime: Runtime, app: AppRecord, repo: str, revision: str, limits: Limits
    ) -> Resolved:
        if (repo, revision) not in self._resolved:
            self._resolved[repo, revision] = runtime.caches.source.resolve(
                repo,
                revision,
                credentials=runtime.store.git_credentials_for(app),
                max_age=quiet.FETCH_MAX_AGE,
                limits=limits,
            )
        return self._resolved[repo, revision]

    def spec(self, app: AppRecord) -> str:
        """`spec_of(app)`, computed once per app record."""
        known = self._specs.get(app.name)
        if known is None or known[0] is not app:
            known = self._specs[app.name] = (app, spec_of(app))
        return known[1]


@dataclass
class Verdicts:
    """What the reads of one batch decided: the compare-and-sets to try (`stamps`), the
    checks already answered (`answers`, by check id), those for the normal path (`full`)."""

    batch: list[Check]
    stamps: list[Stamp] = dataclasses.field(default_factory=list)
    answers: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    full: list[Check] = dataclasses.field(default_factory=list)
    counts: Counter[str] = dataclasses.field(default_factory=Counter)


def judge_batch(runtime: Runtime, batch: list[Check], desires: Desires) -> Counter[str]:
    """Answer every check of `batch` (see the module doc); the counts of what became of them."""
    with telemetry.stage("quiet.checks", worker=runtime.name, checks=len(batch)) as span:
        verdicts = judge(runtime, batch, desires)
        settle(runtime, verdicts)
        for what, count in verdicts.counts.items():
            span.set_attribute(f"gitfleet.{what}", count)
    return verdicts.counts


def judge(runtime: Runtime, batch: list[Check], desires: Desires) -> Verdicts:
    """Steps 1-3 of the module doc: read, and decide what each check needs."""
    registry = Registry.read(runtime)
    desires.begin(registry)
    raws = runtime.store.log.raw_statuses([split_instance(c.instance) for c in batch])
    verdicts = Verdicts(batch)
    for check, raw in zip(batch, raws, strict=True):
        try:
            verdicts.stamps.append(_quiet(registry, desires, check, raw))
        except Skip as e:
            verdicts.counts["skipped"] += 1
            body = Answer.of(Outcome.SKIPPED, instance=check.instance, message=str(e)).body
            verdicts.answers[check.check_id] = body
        except (Full, FleetError) as e:
            log.debug("instance=%s full sync: %s", check.instance, e)
            verdicts.full.append(check)
    return verdicts


def settle(runtime: Runtime, verdicts: Verdicts) -> None:
    """Step 4: the compare-and-sets; then the normal path for what is not quiet (or was
    refused), and every answer."""
    counts, answers, full = verdicts.counts, verdicts.answers, verdicts.full
    by_id = {c.check_id: c for c in verdicts.batch}
    done = runtime.dispatcher.checks.stamp(verdicts.stamps)
    for stamp, stamped in zip(verdicts.stamps, done, strict=True):
        if stamped.written:
            counts["quiet"] += 1
        elif stamped.pending_job:  # a sync pending for the instance answers for this check
            counts["served"] += 1
            answers[stamp.check_id] = followed_by(stamped.pending_job)
        else:  # the status changed under the check, or a lease is held: a full sync decides
            counts["refused"] += 1
            full.append(by_id[stamp.check_id])
    for check in full:
        try:
            ref = runtime.dispatcher.request_intent(check.instance, check.intent)
        except NoWorkers:
            log.warning("instance=%s interval sync dropped: no live worker", check.instance)
            continue
        answers[check.check_id] = followed_by(ref.job_id)
    counts["full"] += len(full)
    runtime.dispatcher.checks.answer(answers)


def _quiet(registry: Registry, desires: Desires, check: Check, raw: bytes | None) -> Stamp:
    """The compare-and-set that answers `check` when its instance is quiet; raises Skip (the
    instance is gone), Full or FleetError (it needs the normal path)."""
    runtime, instance = registry.runtime, check.instance
    name, cluster = split_instance(instance)
    app = registry.apps.get(name)
    if app is None:
        raise Skip(f"no app named {name}")
    if cluster not in clusters_for(app, list(registry.clusters.values())):
        raise Skip(f"app {name} no longer deploys to cluster {cluster}")
    owner = registry.owners.get(instance)
    if owner != runtime.name:
        raise Full(f"owned by {owner}")
    project = registry.project(app.project)
    _plain(app, project, cluster, check)
    status = STATUS.validate_json(raw) if raw is not None else None
    why = quiet.loud(runtime, instance, status)
    if why or status is None or status.last_sync is None:
        raise Full(why)
    registry.check_source(app, project)
    intent, labels = check.intent, registry.clusters[cluster].labels if app.post_build else None
    age_key, pin = registry.age_key(project.name), pinned_revision(runtime, app, cluster)
    # helm parameters are a dict, whose equality ignores order, but the request keeps their
    # order (a later `--set` wins): their items go in as a tuple, which compares in order (the
    # store writes records with sorted keys, so today a record read back is always sorted)
    helm_set = tuple(app.source.helm.parameters.items())
    made_of = (app, helm_set, project, cluster, labels, age_key, pin, intent.trigger, intent.prune)
    desired, revision = desires.of(
        runtime,
        instance,
        app,
        made_of,
        lambda: _request(registry, app, project, cluster, check, labels, age_key, pin),
    )
    pinned = revision if app.rollout is not None else ""  # `_plain`: no asked revision
    same, why = quiet.same(desired, status.last_sync, pinned=pinned)
    if same is None or raw is None:
        raise Full(why)
    return _stamp(runtime, desires, app, cluster, check, raw, status, same)


def _plain(app: AppRecord, project: ProjectRecord, cluster: str, check: Check) -> None:
    """Raise Full when the rq path would do anything but sync (`worker.jobs.attempt`): a
    teardown, a superseded trigger, a window's skip, a plan gate, a dependency wait."""
    intent, policy = check.intent, app.sync_policy
    if intent.trigger != Trigger.INTERVAL or intent.is_retry or intent.revision:
        raise Full(f"a {intent.trigger} request")
    if app.deleting or not policy.automated or app.depends_on:
        raise Full("deleting, automated sync off, or dependencies to wait for")
    reason = blocked_reason(app, intent.trigger, datetime.now(UTC))
    if reason or requires_plan(project, cluster):
        raise Full(reason or "a plan is required")


def _request(
    registry: Registry,
    app: AppRecord,
    project: ProjectRecord,
    cluster: str,
    check: Check,
    labels: Mapping[str, str] | None,
    age_key: str,
    pinned: str,
) -> SyncRequest:
    """What `worker.jobs._request` builds, without credentials (read only for a fetch); each
    argument it reads is in the `made_of` of `_quiet`."""
    request = request_for(
        app,
        project,
        cluster,
        trigger=check.intent.trigger,
        revision=pinned or None,
        require_impersonation=registry.runtime.settings.require_impersonation,
        cluster_labels=labels,
        age_key=age_key,
        prune=check.intent.prune,
    )
    return quiet.periodic(request)


def _stamp(
    runtime: Runtime,
    desires: Desires,
    app: AppRecord,
    cluster: str,
    check: Check,
    raw: bytes,
    status: InstanceStatus,
    desired: sync.Desired,
) -> Stamp:
    keys, stamp = runtime.store.log.keys, datetime.now(UTC)
    answer = Answer.of(Outcome.UNCHANGED, app=app.name, cluster=cluster, checked=stamp.isoformat())
    synced = SyncedAt(desired.revision, desired.inputs, desires.spec(app))
    return Stamp(
        check_id=check.check_id,
        status_key=keys.status(app.name),
        field=cluster,
        expected=raw,
        status=runtime.store.log.stamped(status, checked=stamp),
        answer=json.dumps(answer.body),
        pending_key=keys.pending(check.instance),
        lease_key=keys.lease(check.instance),
        synced_key=keys.synced(normalize_repo(app.source.repo)),
        synced_field=check.instance,
        synced=SYNCED.dump_json(synced),
    )


class QuietChecker:
    """The thread that drains this worker's quiet checks, a batch at a time."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.desires = Desires()
        self.checked: Counter[str] = Counter()  # what became of the checks, for tests and logs
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="quiet-checks", daemon=True)

    def start(self) -> QuietChecker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.drain()
            except TRANSIENT as e:  # the housekeeper reports the outage, once per process
                log.debug("worker=%s quiet checks wait for Redis: %s", self.runtime.name, e)
                self._stop.wait(1.0)
            except Exception:
                log.exception("worker=%s quiet checks failed", self.runtime.name)
                self._stop.wait(1.0)

    def drain(self) -> None:
        """Wait `POLL_S`, then judge batches of waiting checks until none is left."""
        if self._stop.wait(POLL_S):
            return
        checks, name = self.runtime.dispatcher.checks, self.runtime.name
        batch = checks.take(name, BATCH)
        while batch:
            self.checked.update(judge_batch(self.runtime, batch, self.desires))
            if len(batch) < BATCH or self._stop.is_set():
                return
            batch = checks.take(name, BATCH)
