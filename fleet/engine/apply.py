"""Server-side apply of out-of-sync objects, validated by a server-side dry-run first.

`Applier.decide` compares each desired object with its live state (`diff.compare`) and, where
the local comparison says something changed, confirms it with a dry-run apply: the dry-run's
answer equal to live means no drift (defaulting explained the difference). The same dry-run is
the validation: a refusal is kept on the decision (`dry_run_error`), and
`fleet.engine.validate` fails the sync naming every refused object before anything is written.
Objects whose API does not exist yet (a custom resource of a CRD in the same sync) or whose
namespace this sync creates are not dry-run here: `fleet.engine.validate` writes the Namespaces
and CRDs they need first and dry-runs them right after (`Decision.validated` tells them apart).

`diff_live` is stage 4 of a sync on top of that: it reads the live objects, refuses every object
another application tracks (one OwnershipConflict naming them all; another app of the same name
is another application: ownership is by uid, `tracking.Ownership`), finds the namespace to
create first, decides, leaves alone an object whose self-heal is paused by annotation unless a
person asked for the sync, and dry-runs what the cluster can dry-run now; it returns the
decisions with the stage's `StageReport`. An object the caller names as likely new (not in the
app's inventory) is dry-run first instead of read (`Applier.probe`): an answer without a
resourceVersion is the server saying it would create the object, which is an authoritative
"absent" (no other app owns it) and the validation at once, so a new object costs one request
before its apply instead of a GET and a dry-run. An answer for an object that exists, or a
refusal, falls back to the GET and the usual decision, so the guess only ever costs requests.

Every write goes through `apply_one`, which first checks the object against the project's
boundaries with the scope the cluster reports (`fleet.engine.scope`): desired objects, hooks,
SyncFail hooks and the delete of a Replace alike. `check` does the same for the deletes
`fleet.engine.waves` makes.

An immutable-field error recreates the object only when it opts in with
`gitfleet.io/sync-options: Replace=true` (or Argo CD's annotation); otherwise the error names
the field and the option. The per-cluster concurrency limit is the client's connection pool.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from fleet.engine import scope
from fleet.engine.contract import ResourceResult, SyncRequest
from fleet.engine.diff import compare as diff
from fleet.engine.plan import tracking
from fleet.engine.plan.boundaries import UNBOUNDED, Boundaries
from fleet.engine.report import StageReport
from fleet.errors import ApplyError, FleetError, KubeApiError, OwnershipConflict
from fleet.kube.client import KubeClient
from fleet.model import Action, Health, Manifest, ObjectRef

T = TypeVar("T")
R = TypeVar("R")

LIST_THRESHOLD = 4  # objects of one kind in one namespace above which a LIST beats GETs
REPLACE_HINT = "Set gitfleet.io/sync-options: Replace=true to recreate it."
ADOPT_HINT = (
    "If this app should take an object over, remove its gitfleet.io/tracking annotation "
    "first (kubectl annotate <kind>/<name> gitfleet.io/tracking-)"
)


@dataclass
class Decision:
    """What to do with one desired object, filled in stage by stage."""

    ref: ObjectRef
    desired: Manifest
    live: Manifest | None
    drift: diff.Drift
    apply: bool
    dry_run_error: str = ""
    replace: bool = False
    skip_reason: str = ""
    validated: bool = False  # a server-side dry-run answered for it (`dry_run_error` if refused)
    written_early: Action | None = None  # a Namespace or CRD written before the dry-run's end

    @classmethod
    def unconditional(cls, ref: ObjectRef, obj: Manifest) -> Decision:
        """Write `obj` as it is, compared with nothing: a hook, or a namespace to create."""
        return cls(ref, obj, None, diff.Drift(changed=("",)), True)

    @property
    def action(self) -> Action:
        if self.written_early is not None:
            return self.written_early
        if self.skip_reason:
            return Action.SKIPPED
        if not self.apply:
            return Action.UNCHANGED
        return Action.CREATED if self.live is None else Action.CONFIGURED


class Applier:
    def __init__(
        self,
        kube: KubeClient,
        *,
        force: bool = True,
        workers: int = 8,
        boundaries: Boundaries = UNBOUNDED,
    ) -> None:
        self.kube = kube
        self.force = force
        self.boundaries = boundaries
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None  # started by the first call with 2 items
        self.writes = 0

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def _each(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """`fn` of each item, in order, concurrently on the pool; a single item runs on the
        calling thread (most apps hold one object per tier: no thread to start or wake)."""
        items = list(items)
        if len(items) < 2:
            return [fn(item) for item in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="apply")
        return list(self._pool.map(fn, items))

    # -- decide and validate ------------------------------------------------------------------

    def fetch_live(
        self, refs: Sequence[ObjectRef], servable: set[ObjectRef]
    ) -> dict[ObjectRef, Manifest | None]:
        """Live state of every ref: one LIST per (kind, namespace) holding several objects,
        a GET for the rest, concurrently. Refs whose kind is not served yet are None."""
        groups: dict[tuple[str, str, str], list[ObjectRef]] = defaultdict(list)
        for ref in refs:
            if ref in servable:
                groups[(ref.api_version, ref.kind, ref.namespace)].append(ref)
        found: dict[ObjectRef, Manifest | None] = dict.fromkeys(refs)
        for part in self._each(self._fetch_group, groups.items()):
            found.update(part)
        return found

    def _fetch_group(
        self, item: tuple[tuple[str, str, str], list[ObjectRef]]
    ) -> dict[ObjectRef, Manifest | None]:
        (api_version, kind, namespace), refs = item
        if len(refs) < LIST_THRESHOLD:
            return {ref: self.kube.get(ref) for ref in refs}
        listed = self.kube.list(api_version, kind, namespace=namespace)
        by_name = {o["metadata"]["name"]: o for o in listed}
        return {ref: by_name.get(ref.name) for ref in refs}

    def decide(
        self,
        desired: Manifest,
        live: Manifest | None,
        *,
        ignore: diff.IgnoreRules,
        can_dry_run: bool,
    ) -> Decision:
        ref = ObjectRef.of(desired)
        drift = diff.compare(desired, live, ignore=ignore)
        decision = Decision(ref, diff.strip_ignored(desired, ignore, live), live, drift, False)
        if drift.in_sync:
            return decision
        decision.apply = True
        if can_dry_run:
            self.confirm(decision)
        return decision

    def probe(self, desired: Manifest, *, ignore: diff.IgnoreRules) -> Decision | None:
        """The decision for `desired` when a dry-run apply of it shows the server would create
        it (its answer has no resourceVersion): validated, nothing live. None when the object
        exists or the dry-run was refused; the caller then reads it and decides as usual."""
        decision = self.decide(desired, None, ignore=ignore, can_dry_run=False)
        decision.validated = True
        try:
            answer = self.kube.apply(decision.desired, force=self.force, dry_run=True)
        except KubeApiError:
            return None
        return decision if _would_create(answer) else None

    def probe_all(
        self, objects: Sequence[Manifest], ignore: diff.IgnoreRules
    ) -> dict[ObjectRef, Decision]:
        """`probe` each object concurrently; the decisions of those the server would create."""
        found = self._each(lambda obj: self.probe(obj, ignore=ignore), objects)
        return {d.ref: d for d in found if d is not None}

    def confirm(self, decision: Decision) -> None:
        """Dry-run the apply of `decision`: a refusal lands in `dry_run_error`, an answer equal
        to the live object means nothing to apply."""
        decision.validated = True
        try:
            answer = self.kube.apply(decision.desired, force=self.force, dry_run=True)
        except KubeApiError as e:
            if _is_immutable(e) and tracking.wants_replace(decision.desired):
                decision.replace = True
            else:
                decision.dry_run_error = _explain(decision.ref, e, failed="dry-run refused")
            return
        if decision.live is not None and diff.normalize(answer) == diff.normalize(decision.live):
            decision.apply = False

    def confirm_hook(self, hook: Decision) -> None:
        """Dry-run a hook as it will be created. An immutable-field answer is no refusal: the
        earlier instance of that name is deleted before the hook runs (BeforeHookCreation)."""
        hook.validated = True
        try:
            self.kube.apply(hook.desired, force=self.force, dry_run=True)
        except KubeApiError as e:
            if not _is_immutable(e):
                hook.dry_run_error = _explain(hook.ref, e, failed="dry-run refused")

    def decide_all(
        self, items: Sequence[tuple[Manifest, Manifest | None, bool]], ignore: diff.IgnoreRules
    ) -> list[Decision]:
        return self._each(lambda i: self.decide(i[0], i[1], ignore=ignore, can_dry_run=i[2]), items)

    # -- apply --------------------------------------------------------------------------------

    def check(self, ref: ObjectRef, *, stage: str = "apply") -> None:
        """Raise OutsideProject when the project does not let this sync write `ref`."""
        scope.enforce(self.kube, self.boundaries, ref, stage=stage)

    def create_namespace(self, name: str, *, deadline: float) -> Manifest:
        """Create the app's own destination namespace (`create_namespace`): it needs to be an
        allowed destination, or Namespace an allowed kind, as a rendered one would."""
        decision = _namespace_decision(name)
        reason = self.boundaries.namespace_refusal(name)
        if reason:
            self.check(decision.ref)
        return self._write(decision, deadline=deadline)

    def apply_one(self, decision: Decision, *, deadline: float) -> Manifest:
        """Apply (or recreate) one object; return the live object the server answered."""
        self.check(decision.ref)
        return self._write(decision, deadline=deadline)

    def _write(self, decision: Decision, *, deadline: float) -> Manifest:
        if decision.replace:
            return self._recreate(decision, deadline=deadline)
        try:
            live = self.kube.apply(decision.desired, force=self.force)
        except KubeApiError as e:
            if _is_immutable(e) and tracking.wants_replace(decision.desired):
                return self._recreate(decision, deadline=deadline)
            raise ApplyError(_explain(decision.ref, e), obj=str(decision.ref)) from e
        self.writes += 1
        return live

    def apply_many(
        self, decisions: Sequence[Decision], *, deadline: float
    ) -> list[tuple[Decision, Manifest | None, FleetError | None]]:
        """Apply concurrently; every outcome is returned, failures included."""

        def run(d: Decision) -> tuple[Decision, Manifest | None, FleetError | None]:
            try:
                return d, self.apply_one(d, deadline=deadline), None
            except FleetError as e:
                return d, None, e

        return self._each(run, decisions)

    def _recreate(self, decision: Decision, *, deadline: float) -> Manifest:
        self.kube.delete(decision.ref, propagation="Foreground")
        self.writes += 1
        while self.kube.get(decision.ref) is not None:
            if time.monotonic() > deadline:
                raise ApplyError(f"{decision.ref} replace failed: the old object is not gone")
            time.sleep(0.2)
        live = self.kube.apply(decision.desired, force=self.force)
        self.writes += 1
        return live


# -- stage 4 of a sync: the desired objects against the live ones ------------------------------


@dataclass(frozen=True)
class LiveDiff:
    """Stage 4's answer: what to do with each object, and the namespace to create first."""

    report: StageReport
    decisions: dict[ObjectRef, Decision] = field(default_factory=dict)
    create_namespace: str = ""
    new_namespaces: frozenset[str] = frozenset()  # declared or created by this sync, not live


def diff_live(
    request: SyncRequest,
    applier: Applier,
    resources: Sequence[Manifest],
    ownership: tracking.Ownership | None = None,
    *,
    likely_new: Collection[ObjectRef] = (),
) -> LiveDiff:
    """Compare `resources` with the cluster and decide (see the module docstring). The report
    carries the OwnershipConflict instead of raising it; dry-run refusals stay on the decisions
    for `fleet.engine.validate`, which fails the sync on any. `ownership`: what the sync may
    treat as its own (default: the request's owner, no legacy ids). `likely_new`: refs to
    dry-run before reading (`Applier.probe`); a wrong guess costs a request, nothing else."""
    kube = applier.kube
    refs = [ObjectRef.of(o) for o in resources]
    servable = {r for r in refs if kube.has_kind(r.api_version, r.kind)}
    guessed = [o for o, r in zip(resources, refs, strict=True) if r in servable and r in likely_new]
    probed = applier.probe_all(guessed, request.ignore)
    fetched = applier.fetch_live([r for r in refs if r not in probed], servable)
    live = {ref: fetched.get(ref) for ref in refs}
    ownership = ownership or tracking.Ownership.of(request.owner)
    if conflicts := _ownership_conflicts(ownership, live):
        return LiveDiff(conflicts)
    declared = {r.name for r, o in live.items() if r.kind == "Namespace" and o is None}
    admitted = {ref.namespace for ref in probed if ref.namespace}  # a create there was admitted
    create = _namespace_to_create(request, kube, live, declared, exists=admitted)
    new_namespaces = declared | ({create} if create else set())
    items = [
        (obj, live[ref], ref in servable and ref.namespace not in new_namespaces)
        for obj, ref in zip(resources, refs, strict=True)
        if ref not in probed
    ]
    decided = {d.ref: d for d in applier.decide_all(items, request.ignore)}
    for d in probed.values():  # its namespace is new after all (a race): dry-run it again later
        d.validated = d.ref.namespace not in new_namespaces
    decisions = [probed.get(ref) or decided[ref] for ref in refs]
    paused = not request.trigger.by_person and _respect_self_heal_pause(decisions)
    report = StageReport(compared=True, undone=paused)
    return LiveDiff(report, {d.ref: d for d in decisions}, create, frozenset(new_namespaces))


def _respect_self_heal_pause(decisions: list[Decision]) -> bool:
    """Leave alone a live object annotated `gitfleet.io/self-heal: "false"` (someone is
    debugging it); called only when no person asked for the sync, since a person's sync still
    applies it. Returns whether any drift was left in place."""
    paused = False
    for d in decisions:
        if d.apply and d.live is not None and tracking.is_self_heal_disabled(d.live):
            d.apply, d.dry_run_error, d.replace = False, "", False
            d.skip_reason = 'self-heal paused by annotation gitfleet.io/self-heal: "false"'
            paused = True
    return paused


def _ownership_conflicts(
    ownership: tracking.Ownership, live: dict[ObjectRef, Manifest | None]
) -> StageReport | None:
    """The objects another application tracks, each failed, and the error naming them all."""
    conflicts = []
    for ref, obj in live.items():
        other = ownership.other_owner(obj, ref) if obj is not None else None
        if other:
            conflicts.append((ref, other))
    if not conflicts:
        return None
    return StageReport(
        resources=tuple(
            ResourceResult(ref, 0, Action.FAILED, Health.UNKNOWN, f"tracked by {other}")
            for ref, other in conflicts
        ),
        error=OwnershipConflict(
            "objects owned by another application were not applied: "
            + "; ".join(f"{ref} is tracked by {other}" for ref, other in conflicts)
            + f". {ADOPT_HINT}"
        ),
    )


def _namespace_decision(name: str) -> Decision:
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    return Decision.unconditional(ObjectRef.of(obj), obj)


def _namespace_to_create(
    request: SyncRequest,
    kube: KubeClient,
    live: dict[ObjectRef, Manifest | None],
    declared: set[str],
    *,
    exists: Collection[str] = (),
) -> str:
    """The app's namespace, when the request asks to create it and it neither exists nor is
    declared in the render; else "". `exists`: namespaces known to exist (the server admitted
    a dry-run create in them, which the NamespaceLifecycle admission refuses in a missing one)."""
    target = request.namespace
    if not request.create_namespace or target in declared or target in exists:
        return ""
    ns_ref = ObjectRef("", "v1", "Namespace", "", target)
    return target if ns_ref not in live and kube.get(ns_ref) is None else ""


# -- errors -----------------------------------------------------------------------------------


def _would_create(answer: Manifest) -> bool:
    """Whether a dry-run apply's answer is of an object the server would create: a dry-run
    create is never stored, so it has no resourceVersion; an existing object's answer has the
    version it was read at."""
    return not (answer.get("metadata") or {}).get("resourceVersion")


def _is_immutable(e: KubeApiError) -> bool:
    return e.status == 422 and "immutable" in str(e).lower()


def _explain(ref: ObjectRef, e: KubeApiError, *, failed: str = "apply failed") -> str:
    message = str(e).split(": ", 1)[-1] if ": " in str(e) else str(e)
    text = f"{ref} {failed} ({e.reason or e.status}): {message}"
    if _is_immutable(e):
        text += f" {REPLACE_HINT}"
    return text
