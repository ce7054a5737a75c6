"""One sync of one application to one cluster, stage by stage.

`run` follows the design's stage list, numbered as in `_stages`: 1 source, 2 render, 3 order,
4 diff (with ownership, and the server-side dry-run of the whole sync, hooks included:
`fleet.engine.validate`), 5 apply wave by wave with health gates, 6 prune, 7 record. Every stage
is a child span of the sync's root span. A failure anywhere becomes a `SyncResult` with the
error and its stage; nothing is written when the failure comes before the apply stage, except
the Namespaces and CRDs of the sync that other objects could not be dry-run without. After a
failed wave, later waves and prune do not run; the result lists what was not applied and what
was left to prune, and says so in its message.

A newer revision requested while a wave waits on health (`SyncRequest.newer`) cancels the wait
and `run` re-plans the whole sync at that commit, in the same root span, which records the
cancellation as an event (`fleet.engine.supersede`); the result's message says what was
cancelled for which revision.

The inventory (`fleet.engine.inventory`) is read before stage 4 and its fencing token checked,
so a stale lease holder stops before its first write. A fenced first sync
(`SyncRequest.first_sync`) presumes there is none and confirms that before its first write
instead: by claiming it (a create the API server refuses when one exists) as the apply stage
starts, or by reading it before validation writes a Namespace or CRD. A refused claim reads
the inventory, checks its token, and goes on with it as if it had read it first (prune and
record use it); only a legacy inventory (no uid), whose ids would have changed what stage 4
decided, runs the stages again with it. Nothing is written before, so a wrong presumption
costs requests only.

Stages return a `StageReport` of what they did (`fleet.engine.report`); this module keeps the
reports in order, with each stage's duration, and folds them into the `SyncResult` at the end.

Two clients when a project acts as a ServiceAccount: `kube` impersonates it and makes every
write (dry runs included) and every read that decides ownership; `own`, the cluster's registered
credentials, keeps gitfleet's own records (the inventory in `gitfleet-system`) and lists objects
by label to find prune candidates, each of which is then read again through `kube` before
anything is decided. Without impersonation both are the same client.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from opentelemetry.trace import Span

from fleet.engine import prune, syncplan
from fleet.engine.apply import Applier, Decision, diff_live
from fleet.engine.caches import SyncCaches
from fleet.engine.contract import ResourceResult, SyncRequest, SyncResult
from fleet.engine.fingerprint import fingerprint_of
from fleet.engine.health import assess as health
from fleet.engine.inventory import Inventory, InventoryEntry, InventoryExists, InventoryStore
from fleet.engine.plan import order
from fleet.engine.plan.hooks import is_instance, runs_hooks
from fleet.engine.plan.prepare import crd_scopes, prepare
from fleet.engine.plan.references import key_of
from fleet.engine.plan.tracking import Ownership
from fleet.engine.prune import PrunePlan
from fleet.engine.render.cache import RenderResult
from fleet.engine.report import StageReport, fold, merge_resources
from fleet.engine.supersede import MAX_REPLANS, NewerRevision, RevisionWatch
from fleet.engine.validate import validate_sync
from fleet.engine.waves import WaveRunner
from fleet.errors import ApplyError, FleetError, LeaseLost, OwnershipConflict, UsageError
from fleet.kube.client import KubeClient
from fleet.model import Action, Health, Manifest, ObjectRef, SyncStatus
from fleet.telemetry import spans as telemetry

Progress = Callable[[str], None]
_CLAIM = "the inventory claim"


def run(
    request: SyncRequest,
    *,
    kube: KubeClient,
    caches: SyncCaches,
    progress: Progress | None = None,
    own: KubeClient | None = None,
) -> SyncResult:
    """Sync `request` to the cluster behind `kube`; never raises a FleetError. `own`: the
    cluster's own client when `kube` impersonates (see the module docstring)."""
    started = datetime.now(UTC)
    attrs = {"app": request.app, "cluster": kube.name, "trigger": request.trigger}
    ledger = _Ledger()
    error: FleetError | None = None
    with telemetry.stage("sync", **attrs) as span:
        trace_id = telemetry.trace_id_of(span)
        applier = Applier(kube, force=request.force_conflicts, boundaries=request.boundaries)
        try:
            clients = Clients(kube, own or kube)
            for replans in range(MAX_REPLANS + 1):
                last = replans == MAX_REPLANS  # the last plan runs to its end
                asked = dataclasses.replace(request, newer=None) if last else request
                before = applier.writes
                try:
                    run_id = "" if replans else trace_id
                    _stages(asked, clients, caches, applier, progress, ledger, run_id=run_id)
                    break
                except NewerRevision as newer:
                    ledger = _replanned(ledger, newer, applier.writes - before, span)
                    # the cancelled plan may have claimed the inventory: read it from now on
                    request = dataclasses.replace(request, revision=newer.commit, first_sync=False)
        except FleetError as e:
            error = e
            telemetry.mark_failed(span, str(e))
        finally:
            applier.close()
        span.set_attribute("gitfleet.revision", _revision(ledger.reports))
        span.set_attribute("gitfleet.outcome", f"failed ({error.stage})" if error else "succeeded")
    return fold(
        request,
        ledger.reports,
        error=error,
        seconds=ledger.seconds,
        trace_id=trace_id,
        started=started,
        finished=datetime.now(UTC),
    )


@dataclasses.dataclass(frozen=True)
class _Ledger:
    """The reports of one sync's stages in stage order, and how long each stage took."""

    reports: list[StageReport] = dataclasses.field(default_factory=list)
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    def add(self, report: StageReport) -> None:
        """Keep a stage's report; if the stage stopped on an error, the sync stops here."""
        self.reports.append(report)
        if report.error is not None:
            raise report.error


@contextmanager
def _stage(ledger: _Ledger, name: str, **attributes: Any) -> Iterator[Span]:
    """A stage span whose duration also lands in the sync record (for the stage histograms)."""
    started = time.monotonic()
    try:
        with telemetry.stage(name, **attributes) as span:
            yield span
    finally:
        ledger.seconds[name] = round(time.monotonic() - started, 4)


def _replanned(ledger: _Ledger, newer: NewerRevision, writes: int, span: Span) -> _Ledger:
    """A fresh ledger for the sync re-planned at `newer.commit`, which starts with what the
    cancelled plans did: their writes and a note saying what was cancelled, for which
    revision (the reports before the first stage's, which always names its revision)."""
    old = _revision(ledger.reports)
    note = f"{newer}; the sync re-planned at {newer.commit[:12]} (it was at {old[:12]})"
    span.add_event(
        "gitfleet.wait_cancelled",
        {
            "gitfleet.cancelled_revision": old,
            "gitfleet.newer_revision": newer.commit,
            "gitfleet.reason": str(newer),
        },
    )
    span.set_attribute("gitfleet.superseded", old)
    earlier = itertools.takewhile(lambda r: not r.revision and r.note, ledger.reports)
    return _Ledger([*earlier, StageReport(writes=writes, note=note)], ledger.seconds)


def _revision(reports: list[StageReport]) -> str:
    return next((r.revision for r in reports if r.revision), "")


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
        limits=request.limits,
    )
    rendered = caches.renderer.render(
        caches.source, resolved, request.path, request.render, limits=request.limits
    )
    return Desired(fingerprint_of(request, rendered.cache_key), resolved.commit, rendered.inputs)


@dataclasses.dataclass(frozen=True)
class Preview:
    """What a sync would do: the decision for each desired object, and each object's entry as
    a dry run reports it (including the objects that would need pruning)."""

    decisions: Mapping[ObjectRef, Decision]
    results: Mapping[ObjectRef, ResourceResult]


def preview(
    request: SyncRequest, *, kube: KubeClient, caches: SyncCaches, own: KubeClient | None = None
) -> Preview:
    """Stages 1-4 without writing: what a sync would change. Raises FleetError."""
    ledger = _Ledger()
    applier = Applier(kube, force=request.force_conflicts, boundaries=request.boundaries)
    dry_run = dataclasses.replace(request, dry_run=True, prune=False)
    try:
        decisions = _stages(dry_run, Clients(kube, own or kube), caches, applier, None, ledger)
    finally:
        applier.close()
    return Preview(decisions, merge_resources(ledger.reports))


@dataclasses.dataclass(frozen=True)
class Clients:
    """`kube` acts for the app (as its ServiceAccount, if any); `own` keeps gitfleet's records."""

    kube: KubeClient
    own: KubeClient

    def check(self, req: SyncRequest) -> None:
        """Refuse a client that does not act as the request's ServiceAccount: a caller that
        forgot it would otherwise write with the cluster's full credentials."""
        acting = self.kube.config.impersonate
        if acting != req.service_account:
            wanted = req.service_account or "the cluster's own credentials"
            raise UsageError(
                f"app {req.app} acts as {wanted} on {self.kube.name}, but the client given "
                f"acts as {acting or 'the cluster credentials'}: build it with "
                "ClusterConfig.acting_as",
                cluster=self.kube.name,
            )


class _ReadInventory(Exception):
    """A sync that presumed its app had no inventory found a legacy one, or met an object whose
    legacy id such an inventory might list (nothing written yet): run the stages again,
    reading the inventory first."""


def _stages(
    req: SyncRequest,
    clients: Clients,
    caches: SyncCaches,
    applier: Applier,
    progress: Progress | None,
    ledger: _Ledger,
    *,
    run_id: str = "",
) -> dict[ObjectRef, Decision]:
    """Run the stages, keeping each one's report in `ledger`; return stage 4's decisions.
    `run_id` (the trace id) and a random part name this run's generateName hooks: a retry
    or a merged trigger may share a trace, never a name."""
    reports, seconds = len(ledger.reports), dict(ledger.seconds)
    try:
        return _run_stages(req, clients, caches, applier, progress, ledger, run_id=run_id)
    except _ReadInventory:  # nothing written: forget this run's reports, keep earlier notes
        del ledger.reports[reports:]
        ledger.seconds.clear()
        ledger.seconds.update(seconds)
        again = dataclasses.replace(req, first_sync=False)
        return _run_stages(again, clients, caches, applier, progress, ledger, run_id=run_id)


def _run_stages(
    req: SyncRequest,
    clients: Clients,
    caches: SyncCaches,
    applier: Applier,
    progress: Progress | None,
    ledger: _Ledger,
    *,
    run_id: str = "",
) -> dict[ObjectRef, Decision]:
    deadline = time.monotonic() + req.timeout
    clients.check(req)
    kube = clients.kube
    # 1. source: fetch and pin the revision
    with _stage(ledger, "source", repo=req.repo, revision=req.revision) as span:
        resolved = caches.source.resolve(
            req.repo,
            req.revision,
            credentials=req.credentials,
            max_age=req.fetch_max_age,
            fetched_since=req.fetched_since,
            limits=req.limits,
        )
        ledger.add(StageReport(revision=resolved.commit))
        span.set_attribute("gitfleet.commit", resolved.commit)
    # 2. render: manifests from the app's path (cached by tree id)
    with _stage(ledger, "render", path=req.path) as span:
        rendered = caches.renderer.render(
            caches.source, resolved, req.path, req.render, limits=req.limits
        )
        ledger.add(_rendered(req, rendered))
        span.set_attributes(
            {"gitfleet.cached": rendered.cached, "gitfleet.objects": len(rendered.objects)}
        )
    # 3. order: namespaces, ownership marks, project boundaries, phases, waves, tiers
    with _stage(ledger, "order") as span:
        run_id = f"{run_id}/{uuid.uuid4().hex}"
        objects = _prepare(req, kube, list(rendered.objects), revision=resolved.commit, run=run_id)
        plan = order.plan(objects)
        span.set_attribute("gitfleet.waves", len(plan.waves))
    inventory_store = InventoryStore(clients.own)
    presumed = _presumes_no_inventory(req, objects)  # read (or claimed) before the first write
    stored = None if presumed else _read_inventory(req, inventory_store)
    inventory = _own_inventory(req, stored)
    ownership = _ownership(req, plan, stored, inventory)
    _guard_empty(req, objects, inventory)

    def confirm(step: str) -> None:
        """Before the first write: read the inventory presumed absent, or claim it. Validation
        checks the lease itself right before it calls this, so only the claim checks here."""
        nonlocal presumed, stored, inventory
        if not presumed:
            return
        presumed = False
        if step == _CLAIM:
            req.check_lease(step)
            try:
                stored = inventory_store.claim(req.owner, _entries(plan), fence=req.fence)
                applier.writes += 1  # counted in a re-plan's note too
                ledger.add(StageReport(writes=1))
                return
            except InventoryExists:
                pass
        stored = _read_inventory(req, inventory_store)
        inventory = _own_inventory(req, stored)
        # this app's inventory after all: prune and record use it from here on; only a legacy
        # one (no uid) would have changed a decision (its ids count as ours): decide again
        if stored is not None and inventory is not None and not stored.uid:
            raise _ReadInventory(str(inventory_store.ref(req.app)))

    # 4. diff: live state, ownership, local comparison confirmed and validated by dry-run
    with _stage(ledger, "diff") as span:
        compared = _compared(plan, objects)
        fresh = _not_in(compared, inventory)
        diffed = diff_live(req, applier, compared, ownership, likely_new=fresh)
        if presumed and isinstance(diffed.report.error, OwnershipConflict):
            # perhaps a legacy id the inventory not read would have listed: decide with it
            raise _ReadInventory(str(inventory_store.ref(req.app)))
        ledger.add(diffed.report)
        decisions = diffed.decisions
        span.set_attribute("gitfleet.out_of_sync", sum(d.apply for d in decisions.values()))
        applies = bool(diffed.create_namespace) or any(d.apply for d in decisions.values())
        planned = StageReport()
        if req.dry_run or req.plan_check is not None or req.prune_budget.limited:
            # what the sync would do, checked against a stored plan and the prune budget
            # before anything is written (the validation below may write Namespaces and CRDs)
            with _stage(ledger, "plan"):
                pruning = _plan_prune(
                    req, clients, plan, ownership, inventory, index=caches.labelled
                )
                planned = _checked_plan(req, resolved.commit, decisions, plan, pruning)
        if not runs_hooks(req.trigger, applies=applies, retry=req.retry):
            plan = order.without_hooks(plan)  # an automated sync of an app in sync runs no hooks
        # the whole sync, hooks included, passes a server-side dry-run before the first write
        checked = validate_sync(
            req,
            applier,
            diffed,
            hooks=_hook_objects(plan),
            waves=_waves(plan),
            deadline=deadline,
            before_writes=lambda: confirm("the Namespaces and CRDs the dry-run needs"),
        )
        ledger.add(checked.report)
    if req.dry_run:
        ledger.add(planned)
        ledger.add(_would_apply(decisions, plan))
        ledger.add(_prune(req, kube, pruning, deadline=deadline, progress=None, execute=False))
        return decisions
    # 5. apply: wave by wave, each waiting for health before the next
    with _stage(ledger, "apply") as span:
        confirm(_CLAIM)
        ownership = _ownership(req, plan, stored, inventory)
        waves = WaveRunner(
            kube,
            applier,
            decisions,
            ownership=ownership,
            progress=progress,
            guard=req.check_lease,
            superseded=RevisionWatch(req, caches, resolved.commit),
            health=req.health,
        )
        try:
            applied: StageReport | NewerRevision = waves.run(
                plan, deadline=deadline, create_namespace=checked.create_namespace
            )
        except NewerRevision as newer:  # no failure: `run` re-plans at the newer commit
            span.set_attribute("gitfleet.cancelled", str(newer))
            applied = newer
        span.set_attribute("gitfleet.writes", applier.writes)
        if isinstance(applied, StageReport):
            if applied.error is not None and not isinstance(applied.error, LeaseLost):
                ledger.add(_prune_not_run(req, clients, plan, ownership, inventory, caches))
            ledger.add(applied)
    if isinstance(applied, NewerRevision):
        raise applied
    # 6. prune: what this app owned before and no longer declares
    # (the lease is checked before each batch of deletes, in `prune.execute`, not here: the
    # stage's reads write nothing, and the record below checks it again)
    with _stage(ledger, "prune", enabled=req.prune) as span:
        pruning = _plan_prune(req, clients, plan, ownership, inventory, index=caches.labelled)
        if req.prune:  # again: the cluster may have changed while the waves ran
            _check_budget(req, pruning, declared=_declared(plan))
        ledger.add(_prune(req, kube, pruning, deadline=deadline, progress=progress))
        span.set_attribute("gitfleet.pruned", len(pruning.delete) if req.prune else 0)
    # 7. record: the inventory in the cluster, so the next sync knows what it owns
    with _stage(ledger, "record"):
        req.check_lease("record")
        ledger.add(_record(req, inventory_store, plan, stored, pruning))
    return decisions


def _rendered(req: SyncRequest, rendered: RenderResult) -> StageReport:
    return StageReport(
        rendered=not rendered.cached,
        fingerprint=fingerprint_of(req, rendered.cache_key),
        inputs=rendered.inputs,
    )


def _prepare(
    req: SyncRequest, kube: KubeClient, objects: list[Manifest], *, revision: str, run: str = ""
) -> list[Manifest]:
    """Stage 3's first half. Scope comes from the cluster's discovery; only a kind it does not
    serve yet takes its scope from a CRD this sync applies (`prepare.crd_scopes`)."""
    scopes = crd_scopes(objects, req.boundaries)

    def scope_of(api_version: str, kind: str) -> bool | None:
        if kube.has_kind(api_version, kind):
            return kube.is_namespaced(api_version, kind)
        return scopes.get((api_version.rpartition("/")[0], kind))

    return prepare(
        objects,
        owner=req.owner,
        namespace=req.namespace,
        scope_of=scope_of,
        revision=revision,
        boundaries=req.boundaries,
        run_id=run,
    )


def _not_in(objects: list[Manifest], inventory: list[InventoryEntry] | None) -> set[ObjectRef]:
    """The objects' refs that the inventory does not list (at any version): likely new."""
    listed = {key_of(entry.ref) for entry in inventory or []}
    return {ref for ref in map(ObjectRef.of, objects) if key_of(ref) not in listed}


def _presumes_no_inventory(req: SyncRequest, objects: list[Manifest]) -> bool:
    """Whether this sync skips the inventory read and claims the inventory before its first
    write: a fenced first sync that writes (not a preview), with objects (an empty render
    must see the inventory it would empty), and nothing that plans its prune before the
    validation (a stored plan, a prune budget)."""
    return (
        req.first_sync
        and req.guard is not None
        and bool(objects)
        and not req.dry_run
        and req.plan_check is None
        and not req.prune_budget.limited
    )


def _read_inventory(req: SyncRequest, store: InventoryStore) -> Inventory | None:
    stored = store.read(req.app)
    _check_fence(req, store, stored)
    return stored


def _owned(plan: order.SyncPlan) -> dict[ObjectRef, int]:
    """What a sync of `plan` owns once applied, with its wave: its objects, never its hooks."""
    return {s.ref: s.wave for w in plan.waves for s in w.steps if not s.is_hook}


def _entries(plan: order.SyncPlan) -> list[InventoryEntry]:
    return _sorted_entries(_owned(plan))


def _sorted_entries(owned: Mapping[ObjectRef, int]) -> list[InventoryEntry]:
    return sorted((InventoryEntry(ref, wave) for ref, wave in owned.items()), key=_entry_key)


def _check_fence(req: SyncRequest, store: InventoryStore, stored: Inventory | None) -> None:
    """A stored token newer than ours: a stale holder stops here (its guard fails); a current
    one finds the token counter was reset (a registry restored into an empty Redis) and takes a
    token past the stored one, so the API server's precondition and the check still hold."""
    if req.guard is None or stored is None or stored.fence <= req.fence:
        return
    req.check_lease("the inventory check")
    req.guard.advance(stored.fence)
    store.check_fence(req.app, stored, req.fence)


def _own_inventory(req: SyncRequest, stored: Inventory | None) -> list[InventoryEntry] | None:
    """The stored inventory's entries when it is this app's (`Inventory.belongs_to`); None
    when there is none, or when another app of the same name wrote it (its objects are not
    ours: the record stage replaces it)."""
    if stored is None or not stored.belongs_to(req.owner, adopt_legacy=req.adopt_legacy):
        return None
    return stored.entries


def _ownership(
    req: SyncRequest,
    plan: order.SyncPlan,
    stored: Inventory | None,
    inventory: list[InventoryEntry] | None,
) -> Ownership:
    """Objects with a legacy tracking id count as ours when our inventory lists them; on the
    sync that adopts a legacy inventory, this sync's hooks too (hooks are in no inventory)."""
    legacy = [entry.ref for entry in inventory or []]
    if stored is not None and inventory is not None and not stored.uid:
        legacy += sorted(_hook_refs(plan))
    return Ownership.of(req.owner, legacy)


def _guard_empty(
    req: SyncRequest, objects: list[Manifest], inventory: list[InventoryEntry] | None
) -> None:
    if objects or not inventory or req.allow_empty:
        return
    raise ApplyError(
        f"the render of {req.path} is empty but app {req.app} owns "
        f"{len(inventory)} object(s) in the cluster; refusing to sync so nothing is pruned. "
        "Use --allow-empty if the app should really be empty"
    )


def _would_apply(decisions: dict[ObjectRef, Decision], plan: order.SyncPlan) -> StageReport:
    """A dry run's entry for each desired object: its action and its live health."""
    waves = {s.ref: s.wave for w in plan.waves for s in w.steps}
    resources = []
    for ref, d in decisions.items():
        message = "would apply" if d.apply else ""
        status = health.assess(d.live) if d.live else health.assess_missing(ref)
        entry = ResourceResult(
            ref, waves.get(ref, 0), d.action, status.health, message or status.message
        )
        resources.append(entry)
    return StageReport(resources=tuple(resources), undone=any(d.apply for d in decisions.values()))


def _hook_objects(plan: order.SyncPlan) -> list[Manifest]:
    """Every hook this sync may run, SyncFail hooks included."""
    return [s.obj for s in order.hook_steps(plan)]


def _waves(plan: order.SyncPlan) -> dict[ObjectRef, int]:
    return {s.ref: s.wave for w in plan.waves for s in w.steps}


def _prune_not_run(
    req: SyncRequest,
    clients: Clients,
    plan: order.SyncPlan,
    ownership: Ownership,
    inventory: list[InventoryEntry] | None,
    caches: SyncCaches,
) -> StageReport:
    """After a wave failed: what prune would have deleted, listed as not pruned (prune never
    runs after a failed wave, so nothing is half-pruned). Reads only; an error reading is
    left out, since the wave's error is the one the sync reports."""
    try:
        pruning = _plan_prune(req, clients, plan, ownership, inventory, index=caches.labelled)
    except FleetError:
        return StageReport(note="prune did not run")
    message = "not pruned: prune did not run, a wave failed"
    left = tuple(
        ResourceResult(ref, wave, Action.SKIPPED, Health.HEALTHY, message)
        for ref, wave in pruning.delete
    )
    note = "prune did not run" + (f" ({len(left)} object(s) left to prune)" if left else "")
    return StageReport(resources=left, undone=bool(left), note=note)


def _plan_prune(
    req: SyncRequest,
    clients: Clients,
    plan: order.SyncPlan,
    ownership: Ownership,
    inventory: list[InventoryEntry] | None,
    *,
    index: prune.LabelledIndex | None = None,
) -> PrunePlan:
    desired = {s.ref for w in plan.waves for s in w.steps}
    hooks = _hook_refs(plan)
    kinds = {(r.api_version, r.kind) for r in desired if r not in hooks}
    kinds |= {(e.ref.api_version, e.ref.kind) for e in inventory or []}
    kube = clients.kube
    labelled = prune.find_labelled(
        kube, req.app, sorted(kinds), index=index, desired=desired, lister=clients.own
    )
    labelled = [o for o in labelled if not is_instance(o)]  # hooks are never pruned
    live: dict[ObjectRef, Manifest | None] = {
        ObjectRef.of(o): o for o in labelled if ObjectRef.of(o) not in desired
    }
    live.update(
        prune.read_live(kube, inventory=inventory or [], labelled=labelled, desired=desired)
    )
    return prune.plan(
        ownership=ownership,
        inventory=inventory or [],
        labelled=labelled,
        desired=desired,
        live=live,
        allowed_kinds=req.prune_kinds_allowed,
    )


def _prune(
    req: SyncRequest,
    kube: KubeClient,
    pruning: PrunePlan,
    *,
    deadline: float,
    progress: Progress | None,
    execute: bool = True,
) -> StageReport:
    """Delete what `pruning` says when the request allows it (else report what needs --prune)."""
    kept = tuple(
        ResourceResult(ref, 0, Action.SKIPPED, Health.HEALTHY, f"not pruned: {reason}")
        for ref, reason in pruning.kept
    )
    if not (req.prune and execute):
        waiting = tuple(
            ResourceResult(
                ref, wave, Action.SKIPPED, Health.HEALTHY, "requires pruning (use --prune)"
            )
            for ref, wave in pruning.delete
        )
        return StageReport(resources=kept + waiting, undone=bool(waiting))
    outcomes = prune.execute(
        kube,
        pruning,
        timeout=max(deadline - time.monotonic(), 1.0),
        on_progress=progress,
        boundaries=req.boundaries,
        guard=req.check_lease,
        propagation=req.prune_propagation,
    )
    pruned = tuple(
        ResourceResult(o.ref, o.wave, Action.PRUNED, Health.MISSING, o.message) for o in outcomes
    )
    return StageReport(resources=kept + pruned, writes=len(pruned))


def _checked_plan(
    req: SyncRequest,
    commit: str,
    decisions: dict[ObjectRef, Decision],
    plan: order.SyncPlan,
    pruning: PrunePlan,
) -> StageReport:
    """What the sync would do (`fleet.engine.syncplan`), checked against a stored plan when
    the request runs one, and against the prune budget (a dry run only notes it)."""
    fields = {
        ref: d.drift.changed + tuple(f"-{p}" for p in d.drift.removed)
        for ref, d in decisions.items()
    }
    hooks = [(s.ref, s.wave) for w in plan.waves for s in w.steps if s.is_hook]
    planned = syncplan.changes(
        decisions, fields, _waves(plan), hooks, pruning.delete, prune=req.prune
    )
    pinned = syncplan.digest(commit, planned)
    if req.plan_check is not None and not req.dry_run:
        req.plan_check(commit, pinned)
    note = _budget_note(req, pruning, declared=_declared(plan)) if req.prune else ""
    if note and not req.dry_run and not req.allow_prune_over_budget:
        raise prune.PruneOverBudget(note)
    if not req.dry_run:
        return StageReport()
    return StageReport(plan=planned, plan_digest=pinned, note=note)


def _declared(plan: order.SyncPlan) -> int:
    return sum(not s.is_hook for w in plan.waves for s in w.steps)


def _budget_note(req: SyncRequest, pruning: PrunePlan, *, declared: int) -> str:
    """Why `pruning` breaks the app's prune budget ("" when it does not or none is set); the
    app's objects are those it declares plus those it would delete."""
    owned = declared + len(pruning.delete)
    why = prune.over_budget(req.prune_budget, deleting=len(pruning.delete), owned=owned)
    if not why:
        return ""
    return (
        f"prune over budget: the sync would delete {why}; nothing was deleted. Allow it once "
        f"with `gitfleet app sync {req.app} --allow-prune-over-budget`"
    )


def _check_budget(req: SyncRequest, pruning: PrunePlan, *, declared: int) -> None:
    if req.allow_prune_over_budget:
        return
    note = _budget_note(req, pruning, declared=declared)
    if note:
        raise prune.PruneOverBudget(note)


def _compared(plan: order.SyncPlan, objects: list[Manifest]) -> list[Manifest]:
    """The objects stage 4 compares with the cluster: all but hooks and skipped objects."""
    left_out = _hook_refs(plan) | set(plan.skipped)
    return [o for o in objects if ObjectRef.of(o) not in left_out]


def _hook_refs(plan: order.SyncPlan) -> set[ObjectRef]:
    return {s.ref for w in plan.waves for s in w.steps if s.is_hook}


def _record(
    req: SyncRequest,
    store: InventoryStore,
    plan: order.SyncPlan,
    stored: Inventory | None,
    pruning: PrunePlan,
) -> StageReport:
    """Save what this app now owns, stamped with its uid; an inventory another app of the same
    name left, or a legacy one just adopted, is replaced even when the entries are the same."""
    entries = _owned(plan)
    if not req.prune:
        entries.update({ref: wave for ref, wave in pruning.delete})
    new = _sorted_entries(entries)
    old = sorted(stored.entries if stored else [], key=_entry_key)
    fenced = stored is None or stored.fence == req.fence
    if new == old and fenced and (stored is None or stored.written_by(req.owner)):
        return StageReport()
    store.save(req.owner, new, fence=req.fence, stored=stored)
    return StageReport(writes=1)


def _entry_key(entry: InventoryEntry) -> tuple[str, ...]:
    r = entry.ref
    return (r.group, r.kind, r.namespace, r.name, r.version, str(entry.wave))


__all__ = ["ResourceResult", "SyncResult", "SyncStatus", "run"]
