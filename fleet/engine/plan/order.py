"""Ordering of one sync: phases, waves, and a dependency graph inside each wave.

`plan(objects)` turns the rendered objects into a `SyncPlan` without any I/O.

Phases follow Argo CD hooks. `gitfleet.io/hook` (else `argocd.argoproj.io/hook`, else a mapped
`helm.sh/hook`) puts an object into PreSync, Sync, PostSync or SyncFail; several
comma-separated values make one step per phase. `Skip`, and hook types a sync never runs
(PreDelete, PostDelete, Helm's delete/rollback/test hooks), put it in `SyncPlan.skipped`.
Helm's legacy `crd-install` is applied as a normal resource. Unknown hook values raise.

Waves come from `gitfleet.io/sync-wave`, else `argocd.argoproj.io/sync-wave`, else Helm's
`helm.sh/hook-weight` (as Argo CD does). A value that is not an integer raises OrderError.

Inside one wave the plan is a DAG, not a list. Edges (dependency applied first):
- a Namespace before every object in it; a CRD before its custom resources (health-gated:
  the CRD must be Established);
- the references `fleet.engine.plan.references.references` infers (pod templates, Ingress,
  RoleBindings);
- NetworkPolicy, ResourceQuota and LimitRange before the pod workloads of their namespace,
  because they act when a pod is admitted and cannot fix a pod admitted before them;
- webhook configurations and APIServices after their Service and after the Deployments,
  StatefulSets and DaemonSets that Service selects (health-gated, so the webhook never points
  at a backend that cannot answer), and webhook configurations after every other object of
  the wave (a webhook must not intercept the objects it is shipped with).
Only objects of the same wave count. Kind order adds no edges: it only sorts the steps of a
tier, so output is deterministic while unrelated objects still apply concurrently. Argo CD
users still see Namespaces and CRDs first (they depend on nothing, so they sit in tier 0) and
webhooks last. Like Argo CD, a normal Namespace or CRD needed by an object in an earlier
phase or wave is moved to the earliest one that needs it.

Preconditions (the orchestrator's job): default namespaces are filled in (an object without
one stays cluster-level here), and every object has a name: `prepare` names each run of a
hook that uses `generateName` (`fleet.engine.plan.hooks`).
`Step.obj` is the caller's dict, not a copy.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fleet.engine.plan.references import (
    WEBHOOK_KINDS,
    Key,
    anchors,
    crds_by_target,
    dependencies,
    key_of,
    references,
)
from fleet.errors import OrderError
from fleet.model import Manifest, ObjectRef

__all__ = [
    "KIND_ORDER",
    "Phase",
    "Step",
    "SyncPlan",
    "Wave",
    "delete_policies",
    "hook_phases",
    "hook_steps",
    "is_hook",
    "kind_rank",
    "plan",
    "prune_order",
    "references",
    "sync_wave",
    "without_hooks",
]

HOOK_ANNOTATIONS = ("gitfleet.io/hook", "argocd.argoproj.io/hook")
POLICY_ANNOTATIONS = ("gitfleet.io/hook-delete-policy", "argocd.argoproj.io/hook-delete-policy")
WAVE_ANNOTATIONS = ("gitfleet.io/sync-wave", "argocd.argoproj.io/sync-wave", "helm.sh/hook-weight")
HELM_HOOK, HELM_POLICY = "helm.sh/hook", "helm.sh/hook-delete-policy"
DELETE_POLICIES = frozenset({"HookSucceeded", "HookFailed", "BeforeHookCreation"})
HELM_POLICIES = {
    "hook-succeeded": "HookSucceeded",
    "hook-failed": "HookFailed",
    "before-hook-creation": "BeforeHookCreation",
}
NOT_RUN_BY_SYNC = frozenset({"PreDelete", "PostDelete"})
HELM_NOT_RUN = frozenset(
    {"pre-delete", "post-delete", "pre-rollback", "post-rollback", "test", "test-success"}
    | {"test-failure"}
)
KIND_ORDER = (
    "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
    "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
    "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
    "ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList",
    "RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController",
    "ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob",
    "IngressClass", "Ingress", "APIService",
)  # fmt: skip
_RANK = {kind: rank for rank, kind in enumerate(KIND_ORDER)}
_OTHER_RANK, _WEBHOOK_RANK = len(KIND_ORDER), len(KIND_ORDER) + 1
_DELETE_LAST = ("Namespace", "CustomResourceDefinition")


class Phase(StrEnum):
    PRE_SYNC = "PreSync"
    SYNC = "Sync"
    POST_SYNC = "PostSync"
    SYNC_FAIL = "SyncFail"


_PHASES = tuple(Phase)
_PHASE_RANK = {phase: rank for rank, phase in enumerate(_PHASES)}
_PHASE_NAMES = frozenset(phase.value for phase in Phase)
HELM_PHASES = {
    "pre-install": Phase.PRE_SYNC,
    "pre-upgrade": Phase.PRE_SYNC,
    "post-install": Phase.POST_SYNC,
    "post-upgrade": Phase.POST_SYNC,
}


@dataclass(frozen=True)
class Step:
    """One object to apply in one phase.

    `after`: objects of the same wave that must be applied first. `wait_healthy`: the subset
    of `after` that must also be healthy first (an Established CRD, a webhook's backend).
    `delete_policies` is empty for normal resources.
    """

    ref: ObjectRef
    obj: Manifest
    phase: Phase
    wave: int
    is_hook: bool
    delete_policies: frozenset[str]
    after: frozenset[ObjectRef]
    wait_healthy: frozenset[ObjectRef]


@dataclass(frozen=True)
class Wave:
    """One (phase, wave number): tiers of steps; a tier's steps may apply concurrently."""

    phase: Phase
    number: int
    tiers: tuple[tuple[Step, ...], ...]

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(step for tier in self.tiers for step in tier)


@dataclass(frozen=True)
class SyncPlan:
    """Waves in run order (PreSync, Sync, PostSync, each ascending), SyncFail hooks held back
    for a failed sync, and the objects a sync does not apply."""

    waves: tuple[Wave, ...]
    sync_fail: tuple[Step, ...]
    skipped: tuple[ObjectRef, ...]


@dataclass(frozen=True)
class _Placed:
    ref: ObjectRef
    key: Key
    obj: Manifest
    phase: Phase
    wave: int
    is_hook: bool

    @property
    def position(self) -> tuple[int, int]:
        return _PHASE_RANK[self.phase], self.wave


def kind_rank(kind: str) -> int:
    """Argo CD's (Helm's) kind order; other kinds after it; webhook configurations last."""
    return _WEBHOOK_RANK if kind in WEBHOOK_KINDS else _RANK.get(kind, _OTHER_RANK)


def _annotations(obj: Manifest) -> Mapping[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def _first(obj: Manifest, names: Iterable[str]) -> tuple[str, str] | None:
    annotations = _annotations(obj)
    return next(((name, str(annotations[name])) for name in names if name in annotations), None)


def _values(obj: Manifest, name: str, text: str) -> list[str]:
    values = [value.strip() for value in text.split(",") if value.strip()]
    if not values:
        raise OrderError(f"{ObjectRef.of(obj)}: annotation {name} is empty", obj=_name(obj))
    return values


def _name(obj: Manifest) -> str:
    return str(ObjectRef.of(obj))


def sync_wave(obj: Manifest) -> int:
    """The object's wave: gitfleet's annotation, else Argo CD's, else Helm's hook weight."""
    found = _first(obj, WAVE_ANNOTATIONS)
    if found is None:
        return 0
    name, text = found
    try:
        return int(text.strip())
    except ValueError:
        message = f"{_name(obj)}: {name} must be an integer, not {text!r}"
        raise OrderError(message, obj=_name(obj)) from None


def _unknown_hook(obj: Manifest, name: str, value: str) -> OrderError:
    return OrderError(f"{_name(obj)}: unknown hook type {value!r} in {name}", obj=_name(obj))


def _argo_phases(obj: Manifest, name: str, text: str) -> tuple[Phase, ...]:
    values = _values(obj, name, text)
    for value in values:
        if value not in _PHASE_NAMES | NOT_RUN_BY_SYNC | {"Skip"}:
            raise _unknown_hook(obj, name, value)
    if "Skip" in values:
        return ()
    return tuple({Phase(v) for v in values if v in _PHASE_NAMES})


def _helm_phases(obj: Manifest, text: str) -> tuple[Phase, ...]:
    values = _values(obj, HELM_HOOK, text)
    for value in values:
        if value not in HELM_PHASES and value not in HELM_NOT_RUN | {"crd-install"}:
            raise _unknown_hook(obj, HELM_HOOK, value)
    if values == ["crd-install"]:
        return (Phase.SYNC,)
    return tuple({HELM_PHASES[v] for v in values if v in HELM_PHASES})


def hook_phases(obj: Manifest) -> tuple[Phase, ...]:
    """The phases `obj` is applied in: (SYNC,) for normal resources, () when never applied."""
    found = _first(obj, HOOK_ANNOTATIONS)
    helm = _annotations(obj).get(HELM_HOOK)
    if found is not None:
        phases = _argo_phases(obj, *found)
    else:
        phases = (Phase.SYNC,) if helm is None else _helm_phases(obj, str(helm))
    return tuple(sorted(phases, key=_PHASE_RANK.__getitem__))


def is_hook(obj: Manifest) -> bool:
    if _first(obj, HOOK_ANNOTATIONS) is not None:
        return True
    helm = _annotations(obj).get(HELM_HOOK)
    return helm is not None and str(helm).strip() != "crd-install"


def delete_policies(obj: Manifest) -> frozenset[str]:
    """A hook's delete policies (default BeforeHookCreation); empty for normal resources."""
    if not is_hook(obj):
        return frozenset()
    found = _first(obj, POLICY_ANNOTATIONS)
    if found is not None:
        policies = _values(obj, *found)
    elif HELM_POLICY in _annotations(obj):
        text = str(_annotations(obj)[HELM_POLICY])
        policies = [HELM_POLICIES.get(v, v) for v in _values(obj, HELM_POLICY, text)]
    else:
        return frozenset({"BeforeHookCreation"})
    unknown = sorted(set(policies) - DELETE_POLICIES)
    if unknown:
        message = f"{_name(obj)}: unknown hook delete policy {', '.join(unknown)}"
        raise OrderError(message, obj=_name(obj))
    return frozenset(policies)


def _unnamed(obj: Manifest, ref: ObjectRef) -> str:
    prefix = (obj.get("metadata") or {}).get("generateName")
    if not prefix:
        return f"{ref} has no metadata.name"
    where = "/".join(filter(None, (ref.kind, ref.namespace, f"{prefix}*")))
    return f"{where} uses generateName; give it a name before planning (apply needs one)"


def _check_identity(objects: Sequence[Manifest]) -> None:
    seen: set[Key] = set()
    for obj in objects:
        ref = ObjectRef.of(obj)
        if not ref.name:
            raise OrderError(_unnamed(obj, ref), obj=str(ref))
        if key_of(ref) in seen:
            raise OrderError(f"{ref} is declared twice; declare each object once", obj=str(ref))
        seen.add(key_of(ref))


def _place(objects: Sequence[Manifest]) -> tuple[list[_Placed], list[ObjectRef]]:
    placed: list[_Placed] = []
    skipped: list[ObjectRef] = []
    for obj in objects:
        ref, phases = ObjectRef.of(obj), hook_phases(obj)
        if not phases:
            skipped.append(ref)
        wave, hook = (sync_wave(obj), is_hook(obj)) if phases else (0, False)
        placed += [_Placed(ref, key_of(ref), obj, phase, wave, hook) for phase in phases]
    return placed, skipped


def _hoist(placed: list[_Placed]) -> list[_Placed]:
    """Move a normal Namespace or CRD up to the earliest phase and wave that needs it."""
    crds = crds_by_target(p.obj for p in placed if not p.is_hook)
    earliest: dict[Key, tuple[int, int]] = {}
    for item in placed:
        if item.phase != Phase.SYNC_FAIL:
            for anchor in anchors(item.obj, crds):
                earliest[anchor] = min(earliest.get(anchor, item.position), item.position)
    moved = []
    for item in placed:
        target = earliest.get(item.key) if not item.is_hook else None
        if target is not None and target < item.position:
            item = dataclasses.replace(item, phase=_PHASES[target[0]], wave=target[1])
        moved.append(item)
    return moved


def _cycle(deps: Mapping[Key, Mapping[Key, bool]], stuck: set[Key]) -> list[Key]:
    """One cycle among the objects that never became ready to apply."""
    path: list[Key] = []
    seen: dict[Key, int] = {}
    key = min(stuck)
    while key not in seen:
        seen[key] = len(path)
        path.append(key)
        key = min(dep for dep in deps[key] if dep in stuck)
    return [*path[seen[key] :], key]


def _label(key: Key) -> str:
    return "/".join(part for part in (key.kind, key.namespace, key.name) if part)


def _cycle_error(wave: Wave, deps: Mapping[Key, Mapping[Key, bool]], stuck: set[Key]) -> OrderError:
    names = [_label(key) for key in _cycle(deps, stuck)]
    where = f"{wave.phase} wave {wave.number}"
    return OrderError(f"dependency cycle in {where}: {' waits for '.join(names)}", obj=names[0])


def _layers(deps: Mapping[Key, Mapping[Key, bool]], wave: Wave) -> list[list[Key]]:
    """Topological layers: each key lands one layer after its latest dependency."""
    waiting = {key: len(needs) for key, needs in deps.items()}
    dependents: dict[Key, list[Key]] = defaultdict(list)
    for key, needs in deps.items():
        for dep in needs:
            dependents[dep].append(key)
    layers, layer = [], [key for key, count in waiting.items() if count == 0]
    while layer:
        layers.append(layer)
        for key in layer:
            for dependent in dependents[key]:
                waiting[dependent] -= 1
        layer = list(dict.fromkeys(d for k in layer for d in dependents[k] if waiting[d] == 0))
    stuck = {key for key, count in waiting.items() if count > 0}
    if stuck:
        raise _cycle_error(wave, deps, stuck)
    return layers


def _step(item: _Placed, deps: Mapping[Key, bool], members: Mapping[Key, _Placed]) -> Step:
    def refs(keys: Iterable[Key]) -> frozenset[ObjectRef]:
        return frozenset(members[key].ref for key in keys)

    return Step(
        ref=item.ref,
        obj=item.obj,
        phase=item.phase,
        wave=item.wave,
        is_hook=item.is_hook,
        delete_policies=delete_policies(item.obj),
        after=refs(deps),
        wait_healthy=refs(key for key, healthy in deps.items() if healthy),
    )


def _by_kind(step: Step) -> tuple[int, ObjectRef]:
    return kind_rank(step.ref.kind), step.ref


def _wave(members: list[_Placed], catalog: Mapping[Key, Manifest]) -> Wave:
    shell = Wave(members[0].phase, members[0].wave, ())
    by_key = {item.key: item for item in members}
    deps = dependencies({item.key: item.obj for item in members}, catalog)
    tiers = [[_step(by_key[k], deps[k], by_key) for k in keys] for keys in _layers(deps, shell)]
    return dataclasses.replace(shell, tiers=tuple(tuple(sorted(t, key=_by_kind)) for t in tiers))


def plan(objects: Sequence[Manifest]) -> SyncPlan:
    """Order one sync's objects into phases, waves and concurrent tiers (see module doc)."""
    _check_identity(objects)
    placed, skipped = _place(objects)
    placed = _hoist(placed)
    catalog = {item.key: item.obj for item in placed}
    groups: dict[tuple[int, int], list[_Placed]] = defaultdict(list)
    for item in placed:
        groups[item.position].append(item)
    waves = [_wave(members, catalog) for _, members in sorted(groups.items())]
    return SyncPlan(
        waves=tuple(wave for wave in waves if wave.phase != Phase.SYNC_FAIL),
        sync_fail=tuple(s for wave in waves if wave.phase == Phase.SYNC_FAIL for s in wave.steps),
        skipped=tuple(sorted(skipped)),
    )


def without_hooks(plan: SyncPlan) -> SyncPlan:
    """The plan with every hook step left out (SyncFail hooks too): a sync that runs no hooks
    (`fleet.engine.plan.hooks.runs_hooks`). Waves left empty are dropped, and no step waits
    for a hook any more."""
    hooks = {s.ref for s in hook_steps(plan)}

    def kept(step: Step) -> Step:
        after, healthy = step.after - hooks, step.wait_healthy - hooks
        return dataclasses.replace(step, after=after, wait_healthy=healthy)

    waves = []
    for wave in plan.waves:
        tiers = tuple(
            t for t in (tuple(kept(s) for s in tier if not s.is_hook) for tier in wave.tiers) if t
        )
        if tiers:
            waves.append(dataclasses.replace(wave, tiers=tiers))
    return dataclasses.replace(plan, waves=tuple(waves), sync_fail=())


def hook_steps(plan: SyncPlan) -> tuple[Step, ...]:
    """Every hook step of the plan, SyncFail hooks included, in run order."""
    return tuple(s for w in plan.waves for s in w.steps if s.is_hook) + plan.sync_fail


def _delete_rank(kind: str) -> int:
    if kind in _DELETE_LAST:
        return _WEBHOOK_RANK + 1 + _DELETE_LAST.index(kind)
    return _WEBHOOK_RANK - kind_rank(kind)


def prune_order(refs: Iterable[tuple[ObjectRef, int]]) -> list[list[ObjectRef]]:
    """Batches to delete one after another; a batch's objects may be deleted concurrently.

    Highest wave first. Within a wave the reverse of the apply order: webhook configurations,
    then custom resources and other unknown kinds, then the kind list backwards, Namespaces and
    CRDs last. One batch per kind rank.
    """
    batches: dict[tuple[int, int], list[ObjectRef]] = defaultdict(list)
    for ref, wave in refs:
        batches[(-wave, _delete_rank(ref.kind))].append(ref)
    return [sorted(batches[position]) for position in sorted(batches)]
