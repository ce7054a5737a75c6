"""Prune stage: delete what an application owned and no longer declares, and nothing else.

`plan` is pure: from the last inventory, the live objects carrying the app label, the desired
refs and the live state of each candidate, it decides what to delete and, for everything it
keeps, the reason a person reads. An object is deleted only when all of these hold:

- it was in the previous inventory or carries the app label, and is not desired now (identity
  is group, kind, namespace and name; a version change is the same object);
- it still exists, and its tracking annotation names this app (by uid: another app of the same
  name is another app) *and this very object* (`tracking.Ownership.owns`): objects of another
  app, made by hand, or copied from one of ours keep their life; a label alone is not
  ownership; a legacy id without a uid counts only for objects the app's own inventory lists;
- no opt-out is set (`gitfleet.io/prune: "false"`, sync option `Prune=false`, Flux's
  `kustomize.toolkit.fluxcd.io/prune: disabled`);
- it is not a CustomResourceDefinition or a Namespace, unless the app allows that kind:
  deleting one deletes every custom resource of the kind, or everything in the namespace.

An object already being deleted (deletionTimestamp set) is not deleted again but waited on.

Before `execute` deletes anything, every object of the plan is checked against the project's
boundaries with the scope the cluster reports (`fleet.engine.scope`): one outside them refuses
the whole prune (OutsideProject, stage prune, naming each object and the rule), and nothing is
deleted. A project narrowed after an app deployed, or an inventory that lists objects elsewhere,
so never makes a sync delete outside what its project allows today.

`execute` deletes in `order.prune_order` batches (highest wave first, then the reverse of the
apply order, Namespaces and CRDs last), each batch concurrently from a small thread pool, and
waits until every object of a batch is gone before starting the next. Objects still there at
the deadline raise `PruneIncomplete` (a PruneError) naming every one and its finalizers, with
the outcome of each object attached, instead of waiting forever.

Propagation is Background by default, as in Flux: the API server removes the object at once
(unless a finalizer holds it) and the garbage collector removes its dependents afterwards. Argo
CD's default, Foreground, would make every Deployment wait for its ReplicaSets and Pods to go
first, so one slow pod or a finalizer on a dependent would stall the whole prune; we wait for the
object we own, not for what a controller made from it. An app may choose foreground or orphan
(`execute`'s `propagation`), and one object may override it with the annotation
`gitfleet.io/prune-propagation: foreground|background|orphan` (`PrunePlan.propagation`).

Prune runs after every wave has applied and is healthy, so every prune is Argo CD's
`PruneLast`; an object annotated `argocd.argoproj.io/sync-options: PruneLast=true` is, in
addition, deleted in a batch of its own after every other prune batch.

A `PruneBudget` (`over_budget`) bounds how much one sync may delete: a plan over it raises
`PruneOverBudget` before the first delete, unless a person allowed that sync.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

from fleet.engine.inventory import InventoryEntry
from fleet.engine.plan.boundaries import UNBOUNDED, Boundaries
from fleet.engine.plan.order import prune_order, sync_wave
from fleet.engine.plan.references import Key, key_of
from fleet.engine.plan.tracking import (
    APP_LABEL,
    TRACKING_ANNOTATION,
    Ownership,
    prune_disabled_by,
    sync_options,
    tracking_of,
    validate_app_name,
)
from fleet.engine.scope import refusal
from fleet.errors import KubeApiError, OutsideProject, PruneError
from fleet.kube.client import KubeClient
from fleet.model import Action, Manifest, ObjectRef

PROTECTED = frozenset({("apiextensions.k8s.io", "CustomResourceDefinition"), ("", "Namespace")})
PROPAGATION = "Background"
PROPAGATION_ANNOTATION = "gitfleet.io/prune-propagation"
PROPAGATIONS = {"background": "Background", "foreground": "Foreground", "orphan": "Orphan"}
WORKERS = 8
POLL_FIRST, POLL_MAX = 0.1, 1.0
Progress = Callable[[str], None]
T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "PROTECTED",
    "PruneBudget",
    "PruneIncomplete",
    "PruneOutcome",
    "PruneOverBudget",
    "PrunePlan",
    "check_boundaries",
    "execute",
    "find_labelled",
    "keep_reason",
    "over_budget",
    "plan",
    "read_live",
]


@dataclass(frozen=True)
class PrunePlan:
    """What to delete (with the wave each was applied in) and what to keep, with the reason.

    `terminating`: objects of ours already being deleted; `execute` waits for them to go.
    """

    delete: tuple[tuple[ObjectRef, int], ...]
    kept: tuple[tuple[ObjectRef, str], ...]
    terminating: tuple[tuple[ObjectRef, int], ...] = ()
    # per-object choices read from the live objects: a propagation policy (API spelling) and
    # the objects marked PruneLast=true, deleted after every other batch
    propagation: tuple[tuple[ObjectRef, str], ...] = ()
    last: frozenset[ObjectRef] = frozenset()


@dataclass(frozen=True)
class PruneBudget:
    """At most `max_count` objects (0: no limit) or `max_percent` of the app's objects (0: no
    limit) deleted by one sync."""

    max_count: int = 0
    max_percent: float = 0.0

    @property
    def limited(self) -> bool:
        return self.max_count > 0 or self.max_percent > 0


class PruneOverBudget(PruneError):
    """A sync would delete more than the app's prune budget: nothing was deleted. A person
    must allow it, so it is not retried (its own stage tells the worker)."""

    stage = "prune-budget"
    retryable = False


def over_budget(budget: PruneBudget, *, deleting: int, owned: int) -> str:
    """Why deleting `deleting` of the app's `owned` objects breaks `budget`; "" when it does
    not. `owned` counts what the app declares now plus what it would delete."""
    if not deleting or not budget.limited:
        return ""
    share = 100.0 * deleting / max(owned, 1)
    if budget.max_count and deleting > budget.max_count:
        return f"{deleting} object(s), more than the budget of {budget.max_count}"
    if budget.max_percent and share > budget.max_percent:
        return (
            f"{deleting} of {owned} object(s) ({share:.0f}%), more than the budget of "
            f"{budget.max_percent:g}%"
        )
    return ""


@dataclass(frozen=True)
class PruneOutcome:
    """What became of one object: `pruned` once it is gone from the cluster."""

    ref: ObjectRef
    wave: int
    pruned: bool
    message: str

    @property
    def action(self) -> Action:
        return Action.PRUNED if self.pruned else Action.FAILED


class PruneIncomplete(PruneError):
    """Some objects could not be deleted or were still present at the deadline.

    `outcomes` holds every planned object: pruned, failed, or not attempted because an earlier
    batch did not finish.
    """

    retryable = True

    def __init__(self, message: str, *, outcomes: list[PruneOutcome], cluster: str = "") -> None:
        super().__init__(message, cluster=cluster)
        self.outcomes = outcomes


# -- plan: pure ------------------------------------------------------------------------------


def _candidates(
    inventory: Sequence[InventoryEntry],
    labelled: Sequence[Manifest],
    desired: Collection[ObjectRef],
) -> dict[Key, tuple[ObjectRef, int]]:
    """Inventory plus labelled, minus desired; the inventory's wave wins over the annotation's."""
    found = {key_of(entry.ref): (entry.ref, entry.wave) for entry in inventory}
    for obj in labelled:
        ref = ObjectRef.of(obj)
        if key_of(ref) not in found:
            found[key_of(ref)] = (ref, sync_wave(obj))
    for ref in desired:
        found.pop(key_of(ref), None)
    return found


def _live_index(
    labelled: Sequence[Manifest], live: Mapping[ObjectRef, Manifest | None]
) -> dict[Key, Manifest]:
    """Live objects by version-free identity; an object seen under any version counts."""
    index = {key_of(ObjectRef.of(obj)): obj for obj in labelled}
    for ref, obj in live.items():
        if obj is not None:
            index[key_of(ref)] = obj
    return index


def _ownership_reason(obj: Manifest, *, ownership: Ownership, ref: ObjectRef) -> str | None:
    named = tracking_of(obj)
    if named is None:
        return "not tracked by this app (created by hand?)"
    other = ownership.other_owner(obj, ref)
    if other:
        return f"tracked by {other}"
    if ownership.owns(obj, ref):
        return None
    where = ObjectRef(named.group, "", named.kind, named.namespace, named.name)
    return f"its {TRACKING_ANNOTATION} annotation names {where}, not this object (copied?)"


def keep_reason(
    obj: Manifest,
    *,
    ownership: Ownership,
    ref: ObjectRef,
    allowed_kinds: frozenset[str] = frozenset(),
) -> str | None:
    """Why the live `obj` (a candidate `ref` of the app) must not be deleted; None to delete
    it."""
    reason = _ownership_reason(obj, ownership=ownership, ref=ref)
    if reason:
        return reason
    disabled_by = prune_disabled_by(obj)
    if disabled_by:
        return f"prune disabled by {disabled_by}"
    if (ref.group, ref.kind) in PROTECTED and ref.kind not in allowed_kinds:
        return f"{ref.kind} is never pruned unless the app allows it"
    return None


def _served_ref(ref: ObjectRef, obj: Manifest) -> ObjectRef:
    """`ref` at the version the live object was read with (an old one may be gone)."""
    current = ObjectRef.of(obj)
    return current if current.version and key_of(current) == key_of(ref) else ref


def plan(
    *,
    ownership: Ownership,
    inventory: Sequence[InventoryEntry],
    labelled: Sequence[Manifest],
    desired: Collection[ObjectRef],
    live: Mapping[ObjectRef, Manifest | None],
    allowed_kinds: frozenset[str] = frozenset(),
) -> PrunePlan:
    """Decide what to delete and what to keep, and why (see the module docstring).

    `live` holds the live state of candidates, keyed by ref at any version; a labelled object
    needs no entry (it is its own live state), and a candidate found in neither is gone already
    and left out of the plan. `inventory` must be the app's own (`Inventory.belongs_to`).
    """
    objects = _live_index(labelled, live)
    delete, kept, terminating = [], [], []
    propagation: list[tuple[ObjectRef, str]] = []
    last: set[ObjectRef] = set()
    for key, (ref, wave) in sorted(_candidates(inventory, labelled, desired).items()):
        obj = objects.get(key)
        if obj is None:
            continue
        reason = keep_reason(obj, ownership=ownership, ref=ref, allowed_kinds=allowed_kinds)
        if reason:
            kept.append((ref, reason))
        elif (obj.get("metadata") or {}).get("deletionTimestamp"):
            terminating.append((_served_ref(ref, obj), wave))
        else:
            served = _served_ref(ref, obj)
            delete.append((served, wave))
            chosen = _propagation_of(obj)
            if chosen:
                propagation.append((served, chosen))
            if sync_options(obj).get("PruneLast", "").lower() == "true":
                last.add(served)
    return PrunePlan(
        tuple(delete), tuple(kept), tuple(terminating), tuple(propagation), frozenset(last)
    )


def _propagation_of(obj: Manifest) -> str:
    """The object's own propagation policy (annotation), API spelling; "" when none."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return PROPAGATIONS.get(str(annotations.get(PROPAGATION_ANNOTATION, "")).lower(), "")


# -- reading the cluster ---------------------------------------------------------------------


def _concurrently(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    if len(items) < 2:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(items))) as pool:
        return list(pool.map(fn, items))


def _list_labelled(kube: KubeClient, kind: tuple[str, str], selector: str) -> list[Manifest]:
    try:
        return kube.list(kind[0], kind[1], label_selector=selector)
    except KubeApiError as e:
        if e.status in (404, 405):  # no longer served, or cannot be listed
            return []
        raise


class LabelledIndex(Protocol):
    """A watch-backed view of labelled objects (a worker's watches), which saves a LIST."""

    def labelled(
        self, cluster: str, api_version: str, kind: str, app: str
    ) -> list[Manifest] | None:
        """Objects of the kind labelled with `app` on `cluster`; None when it cannot tell."""
        ...


def find_labelled(
    kube: KubeClient,
    app: str,
    kinds: Iterable[tuple[str, str]],
    *,
    index: LabelledIndex | None = None,
    desired: Collection[ObjectRef] = (),
    lister: KubeClient | None = None,
) -> list[Manifest]:
    """Objects labelled `gitfleet.io/app=<app>` of the (apiVersion, kind) pairs, all namespaces.

    Kinds the server no longer serves are skipped. An object seen under two versions of its
    kind is returned once. With an `index`, kinds it can answer cost no request: a label LIST
    makes the server filter every object of the kind, which with thousands of apps on a cluster
    is most of a sync's server time. The index may lag by an event, so the objects it returns
    that are not `desired` (the prune candidates) are read again with a GET; desired ones are
    only counted as seen. A `lister` other than `kube` (the cluster's own client while `kube`
    acts as a ServiceAccount, which may list nothing cluster-wide) only nominates, as the index
    does: its candidates are read again through `kube`, so its RBAC decides what is seen.
    """
    selector = f"{APP_LABEL}={validate_app_name(app)}"
    unique = sorted(set(kinds))
    answered = {k: index.labelled(kube.name, k[0], k[1], app) if index else None for k in unique}
    lister = lister or kube
    listed = _concurrently(
        lambda kind: _list_labelled(lister, kind, selector),
        [k for k in unique if answered[k] is None],
    )
    wanted = {key_of(r) for r in desired}
    cached = [o for k in unique for o in answered[k] or []]
    if lister is not kube:
        cached, listed = cached + [o for objects in listed for o in objects], []
    stale = [ObjectRef.of(o) for o in cached if key_of(ObjectRef.of(o)) not in wanted]
    fresh = [o for o in _concurrently(kube.get, stale) if o is not None and _is_labelled(o, app)]
    found: dict[Key, Manifest] = {}
    kept = (o for o in cached if key_of(ObjectRef.of(o)) in wanted)
    for obj in (*kept, *fresh, *(obj for objects in listed for obj in objects)):
        found.setdefault(key_of(ObjectRef.of(obj)), obj)
    return list(found.values())


def _is_labelled(obj: Manifest, app: str) -> bool:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(APP_LABEL) == app


def read_live(
    kube: KubeClient,
    *,
    inventory: Sequence[InventoryEntry],
    labelled: Sequence[Manifest],
    desired: Collection[ObjectRef],
) -> dict[ObjectRef, Manifest | None]:
    """GET (concurrently) the inventory objects `plan` needs and `labelled` does not hold."""
    known = {key_of(ObjectRef.of(obj)) for obj in labelled} | {key_of(r) for r in desired}
    refs = [e.ref for e in inventory if key_of(e.ref) not in known]
    return dict(zip(refs, _concurrently(kube.get, refs), strict=True))


# -- execute ---------------------------------------------------------------------------------


def _stuck_message(ref: ObjectRef, live: Manifest) -> str:
    meta = live.get("metadata") or {}
    finalizers = [str(f) for f in meta.get("finalizers") or []]
    if finalizers:
        return f"{ref} is held by finalizers {', '.join(finalizers)}"
    if meta.get("deletionTimestamp"):
        return f"{ref} is being deleted but still present"
    return f"{ref} is still present (recreated by something else?)"


class _Run:
    """One `execute` call: the plan's waves, a deadline, a pool and what happened so far."""

    def __init__(
        self,
        kube: KubeClient,
        pruning: PrunePlan,
        timeout: float,
        progress: Progress,
        propagation: str = PROPAGATION,
    ) -> None:
        self.kube, self.timeout, self.progress = kube, timeout, progress
        self.propagation = dict(pruning.propagation)
        self.default_propagation = propagation
        self.deadline = time.monotonic() + timeout
        self.waves = dict(pruning.delete) | dict(pruning.terminating)
        self.terminating = {ref for ref, _ in pruning.terminating}
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="prune")
        self.outcomes: list[PruneOutcome] = []

    def batch(self, refs: list[ObjectRef]) -> list[str]:
        """Delete and wait for one batch; record outcomes; return the problems, if any."""
        to_delete = [ref for ref in refs if ref not in self.terminating]
        errors = dict(zip(to_delete, self.pool.map(self._delete, to_delete), strict=True))
        for ref in to_delete:
            self.progress(errors[ref] or f"{ref} deleting")
        stuck = self._wait_gone([ref for ref in refs if not errors.get(ref)])
        problems = []
        for ref in refs:
            problem = errors.get(ref) or (_stuck_message(ref, stuck[ref]) if ref in stuck else "")
            self._record(ref, problem)
            problems += [problem] if problem else []
        return problems

    def _delete(self, ref: ObjectRef) -> str:
        try:
            chosen = self.propagation.get(ref, self.default_propagation)
            self.kube.delete(ref, propagation=chosen)
        except KubeApiError as e:
            return str(e)
        return ""

    def _wait_gone(self, refs: list[ObjectRef]) -> dict[ObjectRef, Manifest]:
        """Poll until every ref is gone or the deadline passes; return those still present."""
        pause, remaining = POLL_FIRST, refs
        while True:
            found = dict(zip(remaining, self.pool.map(self.kube.get, remaining), strict=True))
            present = {ref: obj for ref, obj in found.items() if obj is not None}
            for ref in (ref for ref in remaining if ref not in present):
                self.progress(f"{ref} pruned")
            left = self.deadline - time.monotonic()
            if not present or left <= 0:
                return present
            remaining = list(present)
            time.sleep(min(pause, left))
            pause = min(pause * 1.5, POLL_MAX)

    def _record(self, ref: ObjectRef, problem: str) -> None:
        message = problem or "pruned"
        self.outcomes.append(PruneOutcome(ref, self.waves[ref], not problem, message))

    def skip(self, refs: Iterable[ObjectRef]) -> None:
        for ref in refs:
            message = "not attempted: an earlier prune batch did not finish"
            self.outcomes.append(PruneOutcome(ref, self.waves[ref], False, message))

    def fail(self, problems: list[str]) -> PruneIncomplete:
        head = f"{len(problems)} object(s) not pruned within {self.timeout:g}s"
        message = f"{head}: {'; '.join(problems)}"
        return PruneIncomplete(message, outcomes=self.outcomes, cluster=self.kube.name)


def execute(
    kube: KubeClient,
    plan: PrunePlan,
    *,
    timeout: float,
    on_progress: Progress | None = None,
    boundaries: Boundaries = UNBOUNDED,
    guard: Callable[[str], None] | None = None,
    propagation: str = PROPAGATION,
) -> list[PruneOutcome]:
    """Delete the plan's objects batch by batch (see the module docstring); `guard` (the
    sync's lease check) runs before each batch and raises LeaseLost to stop before deleting.
    `propagation`: the delete calls' policy (API spelling) for objects that choose none.

    Returns one outcome per object, all pruned. Raises OutsideProject, deleting nothing, when
    an object lies outside `boundaries`; PruneIncomplete (carrying every outcome) when an
    object could not be deleted or was still present after `timeout` seconds; later batches
    are then not attempted.
    """
    check_boundaries(kube, plan, boundaries)
    run = _Run(kube, plan, timeout, on_progress or (lambda _: None), propagation)
    batches = _with_last(prune_order(run.waves.items()), plan.last)
    with run.pool:
        for index, refs in enumerate(batches):
            if guard is not None:
                guard(f"prune batch {index + 1} of {len(batches)}")
            problems = run.batch(refs)
            if problems:
                run.skip(ref for later in batches[index + 1 :] for ref in later)
                raise run.fail(problems)
    return run.outcomes


def _with_last(batches: list[list[ObjectRef]], last: frozenset[ObjectRef]) -> list[list[ObjectRef]]:
    """`batches` with the PruneLast objects moved into one final batch."""
    if not last:
        return batches
    kept = [[ref for ref in batch if ref not in last] for batch in batches]
    final = sorted(ref for batch in batches for ref in batch if ref in last)
    return [batch for batch in kept if batch] + ([final] if final else [])


def check_boundaries(kube: KubeClient, plan: PrunePlan, boundaries: Boundaries) -> None:
    """Raise OutsideProject (stage prune) naming every object of `plan` outside `boundaries`,
    judged with the scope the cluster reports now."""
    reasons = _concurrently(lambda ref: refusal(kube, boundaries, ref), [r for r, _ in plan.delete])
    refused = [reason for reason in reasons if reason]
    if refused:
        raise OutsideProject(
            f"{len(refused)} prune candidate(s) refused, nothing was deleted: "
            + "; ".join(refused),
            stage="prune",
            cluster=kube.name,
        )
