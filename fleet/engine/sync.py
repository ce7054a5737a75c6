"""One sync of one application to one cluster, stage by stage.

`run` reads like the design's stage list: 1 source, 2 render, 3 order, 4 diff (with ownership
and validation), 5 apply wave by wave with health gates, 6 prune, 7 record. Every stage is a
child span of the sync's root span. A failure anywhere becomes a `SyncResult` with the error
and its stage; nothing is written when the failure comes before the apply stage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from opentelemetry.trace import Span

from fleet.engine import prune
from fleet.engine.apply import Applier, Decision
from fleet.engine.caches import SyncCaches
from fleet.engine.contract import ResourceResult, SyncRequest, SyncResult
from fleet.engine.health import assess as health
from fleet.engine.inventory import InventoryEntry, InventoryStore
from fleet.engine.plan import order, tracking
from fleet.engine.plan.prepare import Boundaries, crd_scopes, prepare
from fleet.engine.prune import PrunePlan
from fleet.engine.syncstate import SyncState
from fleet.engine.waves import WaveRunner
from fleet.errors import ApplyError, FleetError, OwnershipConflict
from fleet.kube.client import KubeClient
from fleet.model import Action, Health, HealthStatus, Manifest, ObjectRef, SyncStatus
from fleet.telemetry import spans as telemetry

Progress = Callable[[str], None]
DELIBERATE_TRIGGERS = frozenset({"manual", "cli", "rollback"})


def run(
    request: SyncRequest, *, kube: KubeClient, caches: SyncCaches, progress: Progress | None = None
) -> SyncResult:
    """Sync `request` to the cluster behind `kube`; never raises a FleetError."""
    started = datetime.now(UTC)
    attrs = {"app": request.app, "cluster": kube.name, "trigger": request.trigger}
    with telemetry.stage("sync", **attrs) as span:
        state = SyncState(request=request, trace_id=telemetry.trace_id_of(span))
        applier = Applier(kube, force=request.force_conflicts)
        try:
            _stages(state, kube, caches, applier, progress)
        except FleetError as e:
            state.fail(e)
            telemetry.mark_failed(span, str(e))
        finally:
            applier.close()
        state.writes += applier.writes
        span.set_attribute("gitfleet.revision", state.revision)
        span.set_attribute("gitfleet.outcome", state.outcome())
    return state.result(started=started, finished=datetime.now(UTC))


@contextmanager
def _stage(state: SyncState, name: str, **attributes: Any) -> Iterator[Span]:
    """A stage span whose duration also lands in the sync record (for the stage histograms)."""
    started = time.monotonic()
    try:
        with telemetry.stage(name, **attributes) as span:
            yield span
    finally:
        state.stages[name] = round(time.monotonic() - started, 4)


def fingerprint_of(request: SyncRequest, render_key: str) -> str:
    """What the desired state depends on: the render (tree id, renderer, parameters, tool
    version) and the request's knobs. Equal fingerprints mean the same desired objects."""
    knobs = dataclasses.replace(
        request,
        trigger="",
        revision="",
        credentials=None,
        dry_run=False,
        timeout=0.0,
        fetch_max_age=0.0,
    )
    return hashlib.sha256(f"{render_key}|{knobs!r}".encode()).hexdigest()[:32]


@dataclasses.dataclass(frozen=True)
class Desired:
    """What stages 1 and 2 say about a request: its fingerprint, commit and render inputs."""

    fingerprint: str
    revision: str
    inputs: tuple[str, ...]


def desired_state(request: SyncRequest, *, caches: SyncCaches) -> Desired:
    """Stages 1 and 2 only (fetch, render from cache): the fingerprint a sync would record.
    Talks to git, never to the cluster, so a quiet periodic check costs no API request."""
    resolved = caches.source.resolve(
        request.repo,
        request.revision,
        credentials=request.credentials,
        max_age=request.fetch_max_age,
    )
    rendered = caches.renderer.render(caches.source, resolved, request.path, request.render)
    return Desired(fingerprint_of(request, rendered.cache_key), resolved.commit, rendered.inputs)


def preview(request: SyncRequest, *, kube: KubeClient, caches: SyncCaches) -> SyncState:
    """Stages 1-4 without writing: what a sync would change. Raises FleetError."""
    state = SyncState(request=dataclasses.replace(request, dry_run=True, prune=False))
    applier = Applier(kube, force=request.force_conflicts)
    try:
        _stages(state, kube, caches, applier, None)
    finally:
        applier.close()
    return state


def _stages(
    state: SyncState,
    kube: KubeClient,
    caches: SyncCaches,
    applier: Applier,
    progress: Progress | None,
) -> None:
    req = state.request
    deadline = time.monotonic() + req.timeout
    # 1. source: fetch and pin the revision
    with _stage(state, "source", repo=req.repo, revision=req.revision) as span:
        resolved = caches.source.resolve(
            req.repo, req.revision, credentials=req.credentials, max_age=req.fetch_max_age
        )
        state.revision = resolved.commit
        span.set_attribute("gitfleet.commit", resolved.commit)
    # 2. render: manifests from the app's path (cached by tree id)
    with _stage(state, "render", path=req.path) as span:
        rendered = caches.renderer.render(caches.source, resolved, req.path, req.render)
        state.rendered = not rendered.cached
        state.fingerprint = fingerprint_of(req, rendered.cache_key)
        state.inputs = rendered.inputs
        span.set_attributes(
            {"gitfleet.cached": rendered.cached, "gitfleet.objects": len(rendered.objects)}
        )
    # 3. order: namespaces, ownership marks, project boundaries, phases, waves, tiers
    with _stage(state, "order") as span:
        objects = _prepare(state, kube, list(rendered.objects))
        plan = order.plan(objects)
        span.set_attribute("gitfleet.waves", len(plan.waves))
    inventory_store = InventoryStore(kube)
    inventory = inventory_store.load(req.app)
    _guard_empty(state, objects, inventory)
    # 4. diff: live state, ownership, local comparison confirmed and validated by dry-run
    with _stage(state, "diff") as span:
        decisions = _diff(state, kube, applier, plan, objects)
        state.diffed = True
        span.set_attribute("gitfleet.out_of_sync", sum(d.apply for d in decisions.values()))
    if req.dry_run:
        state.record_preview(decisions, plan)
        _prune(
            state,
            kube,
            plan,
            inventory,
            deadline=deadline,
            progress=None,
            execute=False,
            index=caches.labelled,
        )
        return
    # 5. apply: wave by wave, each waiting for health before the next
    with _stage(state, "apply") as span:
        WaveRunner(state, kube, applier, decisions, progress=progress).run(plan, deadline=deadline)
        span.set_attribute("gitfleet.writes", applier.writes)
    # 6. prune: what this app owned before and no longer declares
    with _stage(state, "prune", enabled=req.prune) as span:
        pruned = _prune(
            state,
            kube,
            plan,
            inventory,
            deadline=deadline,
            progress=progress,
            index=caches.labelled,
        )
        span.set_attribute("gitfleet.pruned", len(pruned.delete) if req.prune else 0)
    # 7. record: the inventory in the cluster, so the next sync knows what it owns
    with _stage(state, "record"):
        _record(state, inventory_store, plan, inventory, pruned)


def _prepare(state: SyncState, kube: KubeClient, objects: list[Manifest]) -> list[Manifest]:
    req = state.request
    scopes = crd_scopes(objects)

    def scope_of(api_version: str, kind: str) -> bool | None:
        group = api_version.rpartition("/")[0]
        if (group, kind) in scopes:
            return scopes[(group, kind)]
        return kube.is_namespaced(api_version, kind) if kube.has_kind(api_version, kind) else None

    bounds = Boundaries(req.allowed_namespaces, req.allowed_cluster_kinds)
    return prepare(
        objects,
        app=req.app,
        namespace=req.namespace,
        scope_of=scope_of,
        revision=state.revision,
        boundaries=bounds,
    )


def _guard_empty(
    state: SyncState, objects: list[Manifest], inventory: list[InventoryEntry] | None
) -> None:
    if objects or not inventory or state.request.allow_empty:
        return
    raise ApplyError(
        f"the render of {state.request.path} is empty but app {state.request.app} owns "
        f"{len(inventory)} object(s) in the cluster; refusing to sync so nothing is pruned. "
        "Use --allow-empty if the app should really be empty"
    )


def _diff(
    state: SyncState,
    kube: KubeClient,
    applier: Applier,
    plan: order.SyncPlan,
    objects: list[Manifest],
) -> dict[ObjectRef, Decision]:
    left_out = _hook_refs(plan) | set(plan.skipped)
    resources = [o for o in objects if ObjectRef.of(o) not in left_out]
    refs = [ObjectRef.of(o) for o in resources]
    servable = {r for r in refs if kube.has_kind(r.api_version, r.kind)}
    live = applier.fetch_live(refs, servable)
    _check_ownership(state, live)
    new_namespaces = _namespaces_to_create(state, kube, resources, live)
    items = [
        (obj, live[ref], ref in servable and ref.namespace not in new_namespaces)
        for obj, ref in zip(resources, refs, strict=True)
    ]
    decisions = applier.decide_all(items, state.request.ignore)
    if state.request.trigger not in DELIBERATE_TRIGGERS:
        _respect_self_heal_pause(state, decisions)
    Applier.validate_all(decisions)
    return {d.ref: d for d in decisions}


def _respect_self_heal_pause(state: SyncState, decisions: list[Decision]) -> None:
    """Automated syncs leave alone a live object annotated `gitfleet.io/self-heal: "false"`
    (someone is debugging it); a deliberate sync by a person still applies it."""
    for d in decisions:
        if d.apply and d.live is not None and tracking.is_self_heal_disabled(d.live):
            d.apply, d.dry_run_error, d.replace = False, "", False
            d.skip_reason = 'self-heal paused by annotation gitfleet.io/self-heal: "false"'
            state.drift_left = True


def _check_ownership(state: SyncState, live: dict[ObjectRef, Manifest | None]) -> None:
    conflicts = []
    for ref, obj in live.items():
        owner = tracking.owner_of(obj) if obj is not None else None
        if owner and owner != state.request.app:
            conflicts.append((ref, owner))
    if conflicts:
        for ref, owner in conflicts:
            state.add(ref, 0, Action.FAILED, Health.UNKNOWN, f"tracked by app {owner}")
        raise OwnershipConflict(
            "objects owned by another application were not applied: "
            + "; ".join(f"{ref} is tracked by app {owner}" for ref, owner in conflicts)
        )


def _namespaces_to_create(
    state: SyncState,
    kube: KubeClient,
    resources: list[Manifest],
    live: dict[ObjectRef, Manifest | None],
) -> set[str]:
    """Namespaces that do not exist yet: declared in the render, or created on request."""
    declared = {r.name for r, o in live.items() if r.kind == "Namespace" and o is None}
    target = state.request.namespace
    if state.request.create_namespace and target not in declared:
        ns_ref = ObjectRef("", "v1", "Namespace", "", target)
        if ns_ref not in live and kube.get(ns_ref) is None:
            state.create_namespace = target
            declared.add(target)
    return declared


def _prune(
    state: SyncState,
    kube: KubeClient,
    plan: order.SyncPlan,
    inventory: list[InventoryEntry] | None,
    *,
    deadline: float,
    progress: Progress | None,
    execute: bool = True,
    index: prune.LabelledIndex | None = None,
) -> PrunePlan:

    desired = {s.ref for w in plan.waves for s in w.steps}
    hooks = _hook_refs(plan)
    kinds = {(r.api_version, r.kind) for r in desired if r not in hooks}
    kinds |= {(e.ref.api_version, e.ref.kind) for e in inventory or []}
    labelled = prune.find_labelled(
        kube, state.request.app, sorted(kinds), index=index, desired=desired
    )
    live: dict[ObjectRef, Manifest | None] = {
        ObjectRef.of(o): o for o in labelled if ObjectRef.of(o) not in desired
    }
    live.update(
        prune.read_live(kube, inventory=inventory or [], labelled=labelled, desired=desired)
    )
    pruning = prune.plan(
        app=state.request.app,
        inventory=inventory or [],
        labelled=labelled,
        desired=desired,
        live=live,
        allowed_kinds=state.request.prune_kinds_allowed,
    )
    for ref, reason in pruning.kept:
        state.add(ref, 0, Action.SKIPPED, Health.HEALTHY, f"not pruned: {reason}")
    if not (state.request.prune and execute):
        for ref, wave in pruning.delete:
            state.add(ref, wave, Action.SKIPPED, Health.HEALTHY, "requires pruning (use --prune)")
            state.pending_prune = True
        return pruning
    outcomes = prune.execute(
        kube, pruning, timeout=max(deadline - time.monotonic(), 1.0), on_progress=progress
    )
    for outcome in outcomes:
        state.add(outcome.ref, outcome.wave, Action.PRUNED, Health.MISSING, outcome.message)
        state.writes += 1
    return pruning


def _hook_refs(plan: order.SyncPlan) -> set[ObjectRef]:
    return {s.ref for w in plan.waves for s in w.steps if s.is_hook}


def _record(
    state: SyncState,
    store: InventoryStore,
    plan: order.SyncPlan,
    inventory: list[InventoryEntry] | None,
    pruning: PrunePlan,
) -> None:
    entries = {s.ref: s.wave for w in plan.waves for s in w.steps if not s.is_hook}
    if not state.request.prune:
        entries.update({ref: wave for ref, wave in pruning.delete})
    new = sorted((InventoryEntry(ref, wave) for ref, wave in entries.items()), key=_entry_key)
    old = sorted(inventory or [], key=_entry_key)
    if new != old:
        store.save(state.request.app, new)
        state.writes += 1


def _entry_key(entry: InventoryEntry) -> tuple[str, ...]:
    r = entry.ref
    return (r.group, r.kind, r.namespace, r.name, r.version, str(entry.wave))


def final_health(statuses: dict[ObjectRef, HealthStatus]) -> Health:
    return health.worst(statuses.values()) if statuses else Health.HEALTHY


__all__ = ["ResourceResult", "SyncResult", "SyncStatus", "run"]
